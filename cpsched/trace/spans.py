"""What a trace reader hands on: measured compute steps per rank, on each rank's own clock.

Both readers (:mod:`~cpsched.trace.chrome`, :mod:`~cpsched.trace.megatron`) produce a
:class:`RawTrace`; :mod:`~cpsched.trace.shape` derives the pipeline's shape from it,
:mod:`~cpsched.trace.align` puts the ranks on one clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cpsched.actions import Action


@dataclass(frozen=True)
class Span:
    """One measured compute step of one rank, on that rank's clock (the file's time unit).

    Attributes:
        rank: pipeline rank that ran it.
        actions: the action, or the two actions (F first) of an overlapped F&B pair.
        start: when it began computing: the range's start, or later the moment its input
            arrived (``ready``) when the trace shows the range waiting for it.
        end: when the range ended.
        waited: time at the start of the range spent waiting for the input (0 if none or
            unknown).
        file: the file it comes from.
        entry: where in the file (for messages).
    """

    rank: int
    actions: tuple[Action, ...]
    start: float
    end: float
    waited: float
    file: str
    entry: str

    @property
    def label(self) -> str:
        """``1F0``, or ``(0F3;3B1)`` for a pair."""
        if len(self.actions) == 1:
            return str(self.actions[0])
        return "(" + ";".join(str(a) for a in self.actions) + ")"


@dataclass
class RawTrace:
    """The measured compute steps of one training step, per rank, clocks not yet aligned.

    Attributes:
        source: ``"pytorch-profiler"`` or ``"megatron"``.
        files: ``{rank: file}``, one per pipeline rank (ranks ``0..p-1``).
        spans: every compute step of the chosen training step.
        to_ms: factor from the file's time unit to milliseconds (1e-3 for µs).
        same_clock: the files say they were taken on one host (one clock); alignment is then
            not needed (``--align auto`` keeps the clocks).
        step: which training step of the trace (0-based) and how many it holds.
        notes: what the reader assumed or left out, for the report.
        overhead: ``{rank: time}`` (file units) the rank spent in the step's other
            pipeline ranges (send, receive, gradient reduction, ...), when the trace has them.
    """

    source: str
    files: dict[int, str]
    spans: list[Span]
    to_ms: float
    same_clock: bool
    step: tuple[int, int] = (0, 1)
    notes: list[str] = field(default_factory=list)
    overhead: dict[int, float] = field(default_factory=dict)

    @property
    def p(self) -> int:
        """Number of pipeline ranks."""
        return len(self.files)


__all__ = ["RawTrace", "Span"]
