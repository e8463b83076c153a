"""Actions and per-device orders: the vocabulary every other module speaks (no solver code).

Terms follow PyTorch ``torch.distributed.pipelining`` (docs/references.md#pytorch): an action is
``(kind, stage, microbatch)`` with kind ``F`` (forward), ``B`` (full backward), ``I`` (input
gradient, "B" in the Zero Bubble paper) or ``W`` (weight gradient); its string form is
PyTorch's ``"{stage}{kind}{microbatch}"``, e.g. ``"2F0"``.  An overlapped F&B pair is an
:class:`Overlap`; a device's order is a list of steps (actions or pairs).  A
:class:`TimedAction` is one row of a schedule file (docs/spec.md §3).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from cpsched.instance import Instance

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


def fuse_backwards(orders: DeviceOrders) -> DeviceOrders:
    """A split-backward schedule's orders run with a fused backward: every ``I`` becomes a
    ``B`` in its place (in an overlapped pair too) and every ``W`` is dropped, shape
    ``(p, steps)`` as given.

    The result is valid for the instance with ``split_backward = false``: a ``B`` needs what
    its ``I`` needed, and frees the stage's whole activation where the ``I`` freed part of it,
    so no device holds more at any point of its order.  Its times are those of the split
    orders with ``I`` lasting ``B`` and ``W`` lasting 0.  cpsched's extension (the published
    V schedules split the backward), docs/spec.md §6.
    """
    def fused(a: Action) -> Action:
        return Action(Kind.B, a.stage, a.microbatch) if a.kind == Kind.I else a

    return [[Overlap(fused(s.forward), fused(s.backward)) if isinstance(s, Overlap)
             else fused(s) for s in row if isinstance(s, Overlap) or s.kind != Kind.W]
            for row in orders]


def default_actions(instance: Instance) -> list[Action]:
    """Every action of the instance when no fused B is chosen: ``F`` and ``B`` per (stage,
    microbatch), or ``F``, ``I``, ``W`` with ``split_backward``.  Order: microbatch, stage,
    kind."""
    kinds = (Kind.F, Kind.I, Kind.W) if instance.split_backward else (Kind.F, Kind.B)
    return [Action(k, s, i) for i in range(instance.m) for s in range(instance.num_stages)
            for k in kinds]


class TimedAction(NamedTuple):
    """An action placed in time, in the instance's own units (docs/spec.md §3 ``actions``
    rows).  A named tuple: schedules of 10^5 actions are built often (the simulator)."""

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




def format_orders(orders: Sequence[Iterable[Step]]) -> str:
    """Orders as text, one line per device: ``rank 0: 0F0 0F1 0B0 ...``."""
    return "\n".join(f"rank {d}: " + " ".join(str(s) for s in steps)
                     for d, steps in enumerate(orders))


__all__ = [
    "Action", "B", "DeviceOrders", "F", "I", "Kind", "Overlap", "Step", "TimedAction", "W",
    "default_actions", "format_orders", "fuse_backwards", "step_actions",
]
