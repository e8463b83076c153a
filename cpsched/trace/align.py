"""One clock for all ranks: offsets from the dependencies between ranks, and what still looks
violated afterwards, reported as clock skew (docs/trace.md).

The ranks of a trace each read their own clock.  On one host they share it (PyTorch profiler
traces say so by their ``host_name``); otherwise each rank's clock may be off by a constant.
The data constrain those constants: a consumer cannot start before its producer on another
rank has ended (docs/spec.md §1.3).  For each pair of neighbouring devices ``a``, ``b`` the
smallest observed gap from ``a`` to ``b`` (``g_ab``: consumer start on ``b`` minus producer
end on ``a``, forward dependencies) and from ``b`` to ``a`` (``g_ba``, backward ones) shift in
opposite directions with the offset, so, assuming the fastest transfer takes as long either
way, ``b``'s clock is ``(g_ab - g_ba) / 2`` ahead of ``a``'s (the estimate NTP makes from a
round trip).  With dependencies in one direction only, the first dependency is taken as tight
(offset ``g_ab``).  Offsets are chained from device 0 and subtracted.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass

from cpsched.actions import Action, Kind
from cpsched.trace.shape import Shape

#: Gaps within this many ms count as touching (times are kept to 1e-6 ms).
EPS_MS = 1e-6

ALIGN_MODES = ("auto", "none", "deps")


@dataclass(frozen=True)
class Gap:
    """A dependency between two devices, after alignment (ms).

    Attributes:
        producer, consumer: the two actions.
        gap: consumer start minus producer end (negative: looks violated).
        waited: the consumer's device was idle right before it and this was its latest
            producer, so the gap is a transfer time rather than slack.
    """

    producer: Action
    consumer: Action
    source: int
    target: int
    gap: float
    waited: bool


@dataclass
class Aligned:
    """The measured step on one clock.

    Attributes:
        mode: ``"none"`` (clocks as read) or ``"deps"`` (offsets from the dependencies).
        offsets: ms added to each device's clock, shape ``(p,)`` (device 0: 0).
        times: ``{action: (start, end)}`` in ms from the step's first start.
        waited: ``{action: ms}`` the action's range waited for its input before ``start``.
        gaps: every dependency between two devices.
        skew: the gaps that are negative (a consumer before its producer's end).
        step_ms: the measured step time (last end minus first start).
        why: how the offsets were found, per device.
    """

    mode: str
    offsets: list[float]
    times: dict[Action, tuple[float, float]]
    waited: dict[Action, float]
    gaps: list[Gap]
    skew: list[Gap]
    step_ms: float
    why: list[str]


def dependencies(shape: Shape) -> list[tuple[Action, Action]]:
    """Every (producer, consumer) pair of docs/spec.md §1.3 among the trace's actions."""
    S, spans = shape.num_stages, shape.spans
    out = []
    for a in spans:
        s, i = a.stage, a.microbatch
        if a.kind == Kind.F and s > 0:
            out.append((Action(Kind.F, s - 1, i), a))
        elif a.kind in (Kind.B, Kind.I):
            if s == S - 1:
                out.append((Action(Kind.F, s, i), a))
            else:
                nxt = Action(Kind.B, s + 1, i)
                out.append((nxt if nxt in spans else Action(Kind.I, s + 1, i), a))
        elif a.kind == Kind.W:
            out.append((Action(Kind.I, s, i), a))
    return out


def _raw_times(shape: Shape, to_ms: float) -> dict[Action, tuple[float, float, float]]:
    """``{action: (start, end, waited)}`` in ms on each rank's own clock."""
    return {a: (sp.start * to_ms, sp.end * to_ms, sp.waited * to_ms)
            for a, sp in shape.spans.items()}


def _pair_offsets(shape: Shape, raw: dict[Action, tuple[float, float, float]],
                  deps: list[tuple[Action, Action]]) -> tuple[list[float], list[str]]:
    """Offsets (ms, to add) per device from the smallest gaps between device pairs."""
    p = shape.p
    least: dict[tuple[int, int], float] = {}
    for a, b in deps:
        da, db = shape.device_of(a.stage), shape.device_of(b.stage)
        if da != db:
            g = raw[b][0] - raw[a][1]
            least[(da, db)] = min(least.get((da, db), g), g)
    ahead: dict[tuple[int, int], tuple[float, str]] = {}  # (a, b): b's clock ahead of a's
    for (a, b), g in least.items():
        if (b, a) in least:
            ahead[(a, b)] = ((g - least[(b, a)]) / 2, "round trip")
        elif (b, a) not in ahead:
            ahead[(a, b)] = (g, "first dependency tight")
            ahead[(b, a)] = (-g, "first dependency tight")
    offsets: list[float | None] = [None] * p
    why = [""] * p
    offsets[0], why[0] = 0.0, "reference clock"
    queue = deque([0])
    while queue:
        a = queue.popleft()
        for (x, b), (d, how) in sorted(ahead.items()):
            if x == a and offsets[b] is None:
                offsets[b] = offsets[a] - d  # type: ignore[operator]
                why[b] = f"{how} with device {a}"
                queue.append(b)
    for d in range(p):
        if offsets[d] is None:
            offsets[d], why[d] = 0.0, "no dependency with another device: clock kept"
    return [float(x) for x in offsets], why  # type: ignore[arg-type]


def _gaps(shape: Shape, times: dict[Action, tuple[float, float]],
          deps: list[tuple[Action, Action]]) -> list[Gap]:
    """The cross-device dependencies with their gaps and whether the consumer waited."""
    prev_end: dict[Action, float] = {}
    by_device: dict[int, list[Action]] = defaultdict(list)
    for a in times:
        by_device[shape.device_of(a.stage)].append(a)
    for acts in by_device.values():
        acts.sort(key=lambda a: times[a])
        last = 0.0
        for a in acts:
            prev_end[a] = last
            last = max(last, times[a][1])
    latest: dict[Action, Action] = {}
    for a, b in deps:
        if b not in latest or times[a][1] > times[latest[b]][1]:
            latest[b] = a
    out = []
    for a, b in deps:
        da, db = shape.device_of(a.stage), shape.device_of(b.stage)
        if da == db:
            continue
        start = times[b][0]
        waited = latest[b] == a and start > prev_end[b] + EPS_MS
        out.append(Gap(a, b, da, db, round(start - times[a][1], 6), waited))
    return out


def align(shape: Shape, to_ms: float, mode: str = "deps") -> Aligned:
    """The measured step on one clock, in ms from its first start.

    Args:
        shape: the trace's pipeline (:func:`~cpsched.trace.shape.pipeline_shape`).
        to_ms: ms per unit of the trace's times.
        mode: ``"none"`` keep the clocks; ``"deps"`` offsets from the dependencies (module
            docstring).  (``"auto"`` is resolved by the caller.)

    Returns:
        :class:`Aligned`; dependencies still violated are in ``skew`` (not an error).

    Raises:
        ValueError: an unknown ``mode``.
    """
    if mode not in ("none", "deps"):
        raise ValueError(f"align mode {mode!r}: one of none, deps")
    raw = _raw_times(shape, to_ms)
    deps = dependencies(shape)
    if mode == "deps":
        offsets, why = _pair_offsets(shape, raw, deps)
    else:
        offsets, why = [0.0] * shape.p, ["clocks as read (one host)"] * shape.p
    shifted = {a: (s + offsets[shape.device_of(a.stage)], e + offsets[shape.device_of(a.stage)])
               for a, (s, e, _) in raw.items()}
    t0 = min(s for s, _ in shifted.values())
    times = {a: (round(s - t0, 6), round(e - t0, 6)) for a, (s, e) in shifted.items()}
    waited = {a: round(w, 6) for a, (_, _, w) in raw.items()}
    gaps = _gaps(shape, times, deps)
    skew = [g for g in gaps if g.gap < -EPS_MS]
    step = max(e for _, e in times.values())
    return Aligned(mode, [round(x, 6) for x in offsets], times, waited, gaps, skew, step, why)


__all__ = ["ALIGN_MODES", "Aligned", "Gap", "align", "dependencies"]
