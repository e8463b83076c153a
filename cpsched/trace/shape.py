"""The pipeline a trace shows: devices, stages per device, microbatches, placement, split
backward — read off the measured actions, each checked complete (docs/trace.md).

A rank's device is the lowest stage it runs (``loop`` and ``v`` placements both put stage
``d`` on device ``d``), so the ranks' own numbering (global ranks in a multi-dimensional job)
does not matter.
"""

from __future__ import annotations

from dataclasses import dataclass

from cpsched.actions import Action, Kind
from cpsched.trace.errors import TraceError
from cpsched.trace.spans import RawTrace, Span


@dataclass(frozen=True)
class Shape:
    """The pipeline of a trace.

    Attributes:
        p, v, m: devices, stages per device, microbatches (``S = p * v`` stages).
        placement: ``"loop"`` or ``"v"`` (docs/spec.md §1.1).
        split_backward: the trace has ``I``/``W`` actions.
        device: ``{rank as in the trace: device}``.
        spans: ``{action: its span}``; both actions of an overlapped pair map to the pair.
    """

    p: int
    v: int
    m: int
    placement: str
    split_backward: bool
    device: dict[int, int]
    spans: dict[Action, Span]

    @property
    def num_stages(self) -> int:
        """``S = p * v``."""
        return self.p * self.v

    def device_of(self, stage: int) -> int:
        """The device of ``stage`` under :attr:`placement`."""
        p = self.p
        if self.placement == "loop":
            return stage % p
        return stage if stage < p else 2 * p - 1 - stage


def _collect(raw: RawTrace) -> tuple[dict[Action, Span], dict[int, set[int]]]:
    """Every action's span (each once) and the stages of each rank."""
    spans: dict[Action, Span] = {}
    stages: dict[int, set[int]] = {r: set() for r in raw.files}
    for sp in raw.spans:
        for a in sp.actions:
            if a in spans:
                other = spans[a]
                raise TraceError(sp.file, sp.entry, f"{a} again (also {other.file}: "
                                 f"{other.entry}): each action runs once per step")
            spans[a] = sp
            stages[sp.rank].add(a.stage)
    return spans, stages


def _devices(raw: RawTrace, stages: dict[int, set[int]]) -> tuple[dict[int, int], int]:
    """``{rank: device}`` (the lowest stage of each rank) and S.

    Raises:
        TraceError: a rank without actions, ranks sharing a first stage, a missing rank.
    """
    p = raw.p
    device: dict[int, int] = {}
    for r, st in sorted(stages.items()):
        if not st:
            raise TraceError(raw.files[r], "", "no compute actions for this rank")
        d = min(st)
        if d in device.values():
            other = next(q for q, e in device.items() if e == d)
            raise TraceError(raw.files[r], "", f"runs stage {d}, as {raw.files[other]} does")
        device[r] = d
    S = 1 + max(max(st) for st in stages.values())
    if sorted(device.values()) != list(range(p)) or S % p:
        lacking = [d for d in range(S) if d not in device.values()]
        where = ", ".join(raw.files[r] for r in sorted(raw.files))
        raise TraceError(where, "", f"{p} rank file(s) hold stages 0..{S - 1}, but no file "
                         f"starts at stage {lacking[0] if lacking else '?'}: is the trace of "
                         "a rank missing? (one file per pipeline rank)")
    return device, S


def _placement(raw: RawTrace, device: dict[int, int], stages: dict[int, set[int]],
               p: int, v: int) -> str:
    """``loop`` or ``v``, whichever puts every rank's stages where the trace has them."""
    loop = {r: {s for s in range(p * v) if s % p == d} for r, d in device.items()}
    if all(stages[r] == loop[r] for r in device):
        return "loop"
    vee = {r: {d, 2 * p - 1 - d} for r, d in device.items()}
    if v == 2 and all(stages[r] == vee[r] for r in device):
        return "v"
    r = next(r for r in device if stages[r] != loop[r])
    raise TraceError(raw.files[r], "", f"runs stages {sorted(stages[r])}; the loop placement "
                     f"puts {sorted(loop[r])} there" + (
                         f" and the v placement {sorted(vee[r])}" if v == 2 else ""))


def _check_complete(raw: RawTrace, spans: dict[Action, Span], p: int, S: int, m: int,
                    file_of: dict[int, str], placement: str) -> bool:
    """Every (stage, microbatch) has F and B, or I and W; returns whether I/W appear."""
    split = any(a.kind in (Kind.I, Kind.W) for a in spans)

    def missing(a: Action, why: str) -> TraceError:
        d = a.stage % p if placement == "loop" else (a.stage if a.stage < p
                                                     else 2 * p - 1 - a.stage)
        return TraceError(file_of[d], "", f"{a} missing: {why}")

    for s in range(S):
        for i in range(m):
            if Action(Kind.F, s, i) not in spans:
                raise missing(Action(Kind.F, s, i), f"stages 0..{S - 1} and microbatches "
                              f"0..{m - 1} appear in the trace")
            has_b = Action(Kind.B, s, i) in spans
            has_i, has_w = (Action(k, s, i) in spans for k in (Kind.I, Kind.W))
            if has_b and (has_i or has_w):
                sp = spans[Action(Kind.B, s, i)]
                raise TraceError(sp.file, sp.entry, f"{s}B{i} and {s}{'I' if has_i else 'W'}"
                                 f"{i} both ran: a full backward or I and W, not both")
            if not has_b and not (has_i and has_w):
                k = Kind.B if not (has_i or has_w) else (Kind.W if has_i else Kind.I)
                raise missing(Action(k, s, i), "every microbatch needs its backward")
    return split


def pipeline_shape(raw: RawTrace) -> Shape:
    """The pipeline of ``raw``: each action once, every rank present, a ``loop`` or ``v``
    placement, every (stage, microbatch) with its forward and backward.

    Raises:
        TraceError: naming the file (and entry) at fault.
    """
    spans, stages = _collect(raw)
    device, S = _devices(raw, stages)
    p = raw.p
    v = S // p
    placement = _placement(raw, device, stages, p, v)
    m = 1 + max(a.microbatch for a in spans)
    file_of = {d: raw.files[r] for r, d in device.items()}
    split = _check_complete(raw, spans, p, S, m, file_of, placement)
    return Shape(p, v, m, placement, split, device, spans)


__all__ = ["Shape", "pipeline_shape"]
