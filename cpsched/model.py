"""The schedule data model: actions, per-device orders, timed schedules, the JSON file (SPEC §3).

No solver code here.  Terms follow PyTorch ``torch.distributed.pipelining``: an action is
``(kind, stage, microbatch)`` with kind ``F`` (forward), ``B`` (full backward), ``I`` (input
gradient, "B" in the Zero Bubble paper) or ``W`` (weight gradient); its string form is
PyTorch's ``"{stage}{kind}{microbatch}"``, e.g. ``"2F0"``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, NamedTuple

from cpsched.instance import Instance, InstanceError

SCHEDULE_FORMAT = "cpsched.schedule/1"
STATUSES = ("OPTIMAL", "FEASIBLE", "HEURISTIC", "INFEASIBLE", "UNKNOWN")


class Kind(StrEnum):
    """Action kinds (PyTorch's names)."""

    F = "F"
    B = "B"
    I = "I"  # noqa: E741  (PyTorch's name)
    W = "W"


class Action(NamedTuple):
    """One compute action: ``kind`` of ``stage`` for ``microbatch``."""

    kind: Kind
    stage: int
    microbatch: int

    def __str__(self) -> str:
        return f"{self.stage}{self.kind}{self.microbatch}"

    @classmethod
    def parse(cls, text: str) -> Action:
        """Parse PyTorch's ``"2F0"`` form.  Raises ValueError on anything else."""
        mt = re.fullmatch(r"\s*(\d+)\s*([FBIW])\s*(\d+)\s*", text)
        if not mt:
            raise ValueError(f"not an action: {text!r} (expected e.g. 2F0, 3I1, 1W4, 0B2)")
        return cls(Kind(mt.group(2)), int(mt.group(1)), int(mt.group(3)))


def F(stage: int, mb: int) -> Action:  # noqa: N802
    """Forward action shorthand."""
    return Action(Kind.F, stage, mb)


def B(stage: int, mb: int) -> Action:  # noqa: N802
    """Full-backward action shorthand."""
    return Action(Kind.B, stage, mb)


def I(stage: int, mb: int) -> Action:  # noqa: E743, N802
    """Input-gradient backward action shorthand."""
    return Action(Kind.I, stage, mb)


def W(stage: int, mb: int) -> Action:  # noqa: N802
    """Weight-gradient backward action shorthand."""
    return Action(Kind.W, stage, mb)


class Overlap(NamedTuple):
    """An overlapped F&B pair (DualPipe-style): one ``F`` and one ``B``/``I`` of another
    stage or microbatch on the same device, run together for ``overlap_forward_backward``.
    PyTorch writes it ``(0F7;7B3)OVERLAP_F_B``."""

    forward: Action
    backward: Action

    def __str__(self) -> str:
        return f"({self.forward};{self.backward})OVERLAP_F_B"


Step = Action | Overlap
#: ``orders[d]`` is device d's sequence of steps, in execution order.
DeviceOrders = list[list[Step]]


def step_actions(step: Step) -> tuple[Action, ...]:
    """The actions of one step (two for an overlapped pair)."""
    return (step.forward, step.backward) if isinstance(step, Overlap) else (step,)


def default_actions(instance: Instance) -> list[Action]:
    """Every action of the instance when no fused B is chosen: ``F`` and ``B`` per (stage,
    microbatch), or ``F``, ``I``, ``W`` with ``split_backward``.  Order: microbatch, stage,
    kind."""
    kinds = (Kind.F, Kind.I, Kind.W) if instance.split_backward else (Kind.F, Kind.B)
    return [Action(k, s, i) for i in range(instance.m) for s in range(instance.num_stages)
            for k in kinds]


@dataclass(frozen=True, slots=True)
class TimedAction:
    """An action placed in time, in the instance's own units (SPEC §3 ``actions`` rows)."""

    device: int
    stage: int
    microbatch: int
    kind: Kind
    start: float
    end: float
    overlap: int | None = None

    @property
    def action(self) -> Action:
        return Action(self.kind, self.stage, self.microbatch)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"device": self.device, "stage": self.stage,
                             "microbatch": self.microbatch, "kind": str(self.kind),
                             "start": self.start, "end": self.end}
        if self.overlap is not None:
            d["overlap"] = self.overlap
        return d


class ScheduleFileError(ValueError):
    """A schedule file cannot be read (not JSON, wrong format, missing or wrong fields)."""


@dataclass
class Schedule:
    """A timed schedule for an instance, with the metrics of SPEC §5.

    ``actions`` are sorted by (device, start, F before B/I/W).  ``lower_bound`` is a proven
    bound on the optimal makespan (None if unknown); ``status`` one of :data:`STATUSES`.
    """

    instance: Instance
    actions: list[TimedAction]
    method: str
    status: str = "HEURISTIC"
    lower_bound: float | None = None
    solve_seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.actions = sorted(self.actions, key=_action_sort_key)

    # metrics (SPEC §5) ----------------------------------------------------
    @property
    def makespan(self) -> float:
        """Latest action end (0 for no actions)."""
        return max((a.end for a in self.actions), default=0.0)

    @property
    def bubble_fraction(self) -> float:
        """``1 - busy / (p * makespan)``; an overlapped pair counts its duration once."""
        from cpsched.metrics import bubble_fraction

        return bubble_fraction(self)

    @property
    def peak_memory(self) -> list[float]:
        """Peak memory held per device (SPEC §1 memory rule)."""
        from cpsched.metrics import peak_memory

        return peak_memory(self)

    @property
    def gap(self) -> float | None:
        """``(makespan - lower_bound) / makespan`` (None without a bound)."""
        if self.lower_bound is None or self.makespan <= 0:
            return None
        return max(0.0, (self.makespan - self.lower_bound) / self.makespan)

    def orders(self) -> DeviceOrders:
        """Per-device orders (by start, F before B/I/W on ties), overlapped pairs rebuilt."""
        orders: DeviceOrders = [[] for _ in range(self.instance.p)]
        pending: dict[int, TimedAction] = {}
        for a in self.actions:
            if a.overlap is None:
                orders[a.device].append(a.action)
            elif a.overlap in pending:
                other = pending.pop(a.overlap)
                f, b = (other, a) if other.kind == Kind.F else (a, other)
                orders[a.device].append(Overlap(f.action, b.action))
            else:
                pending[a.overlap] = a
        return orders

    # JSON (SPEC §3) -------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The SPEC §3 document."""
        r = _rounder(self.instance)
        d: dict[str, Any] = {
            "format": SCHEDULE_FORMAT,
            "instance": self.instance.to_dict(),
            "method": self.method,
            "status": self.status,
            "makespan": r(self.makespan),
            "lower_bound": None if self.lower_bound is None else r(self.lower_bound),
            "gap": None if self.gap is None else round(self.gap, 6),
            "bubble_fraction": round(self.bubble_fraction, 6),
            "peak_memory": [r(x) for x in self.peak_memory],
            "solve_seconds": round(self.solve_seconds, 3),
        }
        d.update(self.extra)
        d["actions"] = [a.to_dict() for a in self.actions]
        return d

    def to_json(self, path: str | Path | None = None) -> str:
        """Serialise (and write to ``path`` when given); returns the JSON text."""
        text = json.dumps(self.to_dict(), indent=1)
        if path is not None:
            Path(path).write_text(text + "\n", encoding="utf-8")
        return text

    @classmethod
    def from_dict(cls, data: dict[str, Any], instance: Instance | None = None) -> Schedule:
        """Read a SPEC §3 document; ``instance`` overrides the embedded one.

        Raises:
            ScheduleFileError: wrong format or fields.
            InstanceError: the embedded instance is invalid.
        """
        if not isinstance(data, dict):
            raise ScheduleFileError("a schedule file is a JSON object")
        fmt = data.get("format")
        if fmt != SCHEDULE_FORMAT:
            raise ScheduleFileError(f"format = {fmt!r}: expected {SCHEDULE_FORMAT!r}")
        if instance is None:
            if "instance" not in data:
                raise ScheduleFileError("instance: missing (give the instance file as well)")
            instance = Instance.from_dict(data["instance"])
        rows = data.get("actions")
        if not isinstance(rows, list):
            raise ScheduleFileError("actions: expected a list of action objects")
        actions = []
        for k, row in enumerate(rows):
            try:
                actions.append(TimedAction(
                    device=_int(row["device"]), stage=_int(row["stage"]),
                    microbatch=_int(row["microbatch"]), kind=Kind(row["kind"]),
                    start=_num(row["start"]), end=_num(row["end"]),
                    overlap=None if row.get("overlap") is None else _int(row["overlap"]),
                ))
            except (KeyError, ValueError, TypeError) as exc:
                raise ScheduleFileError(f"actions[{k}] = {row!r}: {exc!s} (each action needs "
                                        "device, stage, microbatch, kind F/B/I/W, start, end)"
                                        ) from None
        status = data.get("status", "UNKNOWN")
        lb = data.get("lower_bound")
        return cls(instance, actions, method=str(data.get("method", "file")),
                   status=status if status in STATUSES else "UNKNOWN",
                   lower_bound=None if lb is None else float(lb),
                   solve_seconds=float(data.get("solve_seconds", 0.0) or 0.0))

    @classmethod
    def from_json(cls, path: str | Path, instance: Instance | None = None) -> Schedule:
        """Read a schedule file.  Raises ScheduleFileError / InstanceError."""
        p = Path(path)
        if not p.is_file():
            raise ScheduleFileError(f"schedule file {str(path)!r}: no such file")
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ScheduleFileError(f"schedule file {str(path)!r}: not JSON ({exc})") from None
        return cls.from_dict(data, instance)


def _int(x: Any) -> int:
    if isinstance(x, bool) or not isinstance(x, int):
        raise ValueError(f"{x!r} is not an integer")
    return x


def _num(x: Any) -> float:
    if isinstance(x, bool) or not isinstance(x, int | float):
        raise ValueError(f"{x!r} is not a number")
    return x


def _rounder(instance: Instance):  # noqa: ANN202
    def r(x: float) -> float:
        return instance.from_ticks(instance.ticks(x)) if x == x else x

    return r


_KIND_RANK = {Kind.F: 0, Kind.B: 1, Kind.I: 1, Kind.W: 2}


def _action_sort_key(a: TimedAction) -> tuple:
    # end before kind: a zero-length action at t runs before one that starts at t and lasts
    return (a.device, a.start, a.end, _KIND_RANK[a.kind], a.stage, a.microbatch)


def format_orders(orders: Sequence[Iterable[Step]]) -> str:
    """Orders as text, one line per device: ``rank 0: 0F0 0F1 0B0 ...``."""
    return "\n".join(f"rank {d}: " + " ".join(str(s) for s in steps)
                     for d, steps in enumerate(orders))


__all__ = [
    "Action", "B", "DeviceOrders", "F", "I", "InstanceError", "Kind", "Overlap",
    "Schedule", "ScheduleFileError", "Step", "TimedAction", "W", "default_actions",
    "format_orders", "step_actions",
]
