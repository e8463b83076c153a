"""Hand edits of a schedule: move a step earlier or later in its device's order, re-time the
orders with the one simulator and check them with the one validator.

Orders travel through the page as text, one list of PyTorch-style step names per device
(``"2F0"``, ``"(0F7;7B3)OVERLAP_F_B"`` for an overlapped pair, docs/torch.md).  After every
move :func:`retime` runs :func:`cpsched.simulate` — which names the waiting cycle when the new
order deadlocks — and :func:`cpsched.validate` on the result, whose memory-limit violations
name device and time (docs/spec.md §3.3); :func:`memory_marks` turns those into points to
mark on the charts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from cpsched.actions import Action, DeviceOrders, Overlap, Step
from cpsched.instance import Instance
from cpsched.model import Schedule
from cpsched.simulate import OrderError, simulate
from cpsched.validate import validate

OrdersText = list[list[str]]

_PAIR = re.compile(r"\(\s*([^;()]+?)\s*;\s*([^;()]+?)\s*\)OVERLAP_F_B")
_WAITS = re.compile(r"waits at (\S+) for (\S+) \(rank")
_OVER = re.compile(r"device (\d+) holds \S+ > memory limit \S+ at time (\S+)")


def step_text(step: Step) -> str:
    """A step's name: ``"2F0"``, or ``"(0F7;7B3)OVERLAP_F_B"`` for a pair."""
    return str(step)


def parse_step(text: str) -> Step:
    """The step named ``text`` (see :func:`step_text`).

    Raises:
        ValueError: not an action or pair name.
    """
    pair = _PAIR.fullmatch(text.strip())
    if pair:
        return Overlap(Action.parse(pair.group(1)), Action.parse(pair.group(2)))
    return Action.parse(text)


def orders_to_text(orders: Sequence[Sequence[Step]]) -> OrdersText:
    """Orders as step names, one list per device."""
    return [[step_text(s) for s in steps] for steps in orders]


def text_to_orders(rows: Sequence[Sequence[str]]) -> DeviceOrders:
    """Step names back to orders.  Raises ValueError on a name that is not a step."""
    return [[parse_step(s) for s in steps] for steps in rows]


def step_names(text: str) -> list[str]:
    """The action names in a step name (two for a pair)."""
    pair = _PAIR.fullmatch(text.strip())
    return [pair.group(1), pair.group(2)] if pair else [text.strip()]


def locate(rows: Sequence[Sequence[str]], action: str) -> tuple[int, int] | None:
    """(device, index) of the step holding ``action`` (e.g. ``"2F0"``), or None."""
    for d, steps in enumerate(rows):
        for k, s in enumerate(steps):
            if action in step_names(s):
                return d, k
    return None


def move(rows: Sequence[Sequence[str]], action: str, delta: int) -> OrdersText:
    """A copy of ``rows`` with the step holding ``action`` moved ``delta`` places later in its
    device's order (negative: earlier), stopping at either end.  Unknown action: unchanged."""
    out = [list(steps) for steps in rows]
    where = locate(out, action)
    if where is None:
        return out
    d, k = where
    step = out[d].pop(k)
    out[d].insert(max(0, min(len(out[d]), k + delta)), step)
    return out


@dataclass
class Retimed:
    """The outcome of re-timing hand-edited orders.

    Attributes:
        schedule: the timed schedule (None when the orders deadlock or are incomplete).
        error: the simulator's message, e.g. ``deadlock: rank 0 waits at 0B0 for 1B0 (rank
            1); rank 1 waits at 1F0 for 0F0 (rank 0)`` (empty when it timed).
        cycle: the actions named in a deadlock's waiting cycle (waiting and awaited).
        violations: the validator's findings on ``schedule`` (empty: valid).
        marks: ``(time, device)`` of memory-limit overruns among ``violations``.
    """

    schedule: Schedule | None
    error: str = ""
    cycle: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    marks: list[tuple[float, int]] = field(default_factory=list)


def deadlock_cycle(message: str) -> list[str]:
    """The actions a deadlock message names: each waiting step's actions and what it waits
    for (``waits at 0B0 for 1B0`` → ``0B0``, ``1B0``)."""
    out: list[str] = []
    for waiting, awaited in _WAITS.findall(message):
        for name in [*step_names(waiting), awaited]:
            if name not in out:
                out.append(name)
    return out


def memory_marks(violations: Sequence[str]) -> list[tuple[float, int]]:
    """``(time, device)`` of each memory-limit violation (``device d holds X > memory limit
    L at time t``)."""
    found = [_OVER.search(v) for v in violations]
    return [(float(m.group(2)), int(m.group(1))) for m in found if m]


def retime(inst: Instance, rows: Sequence[Sequence[str]], method: str = "hand-edited"
           ) -> Retimed:
    """Time hand-edited orders with the simulator and check them with the validator.

    Returns:
        :class:`Retimed`; a deadlock or an incomplete order is reported in ``error`` (never
        raised).
    """
    try:
        orders = text_to_orders(rows)
        schedule = simulate(inst, orders, method=method)
    except (OrderError, ValueError) as exc:
        msg = str(exc)
        return Retimed(None, error=msg, cycle=deadlock_cycle(msg))
    violations = validate(schedule)
    return Retimed(schedule, violations=violations, marks=memory_marks(violations))


__all__ = ["OrdersText", "Retimed", "deadlock_cycle", "locate", "memory_marks", "move",
           "orders_to_text", "parse_step", "retime", "step_names", "step_text",
           "text_to_orders"]
