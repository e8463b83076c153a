"""Profile-driven costs: an instance whose durations are the measured ones (docs/trace.md).

Per stage and kind the **median** measured duration becomes the instance's cost (``F``, ``B``,
or ``I`` and ``W`` with split backward; an overlapped pair's median becomes
``overlap_forward_backward``); the spread (min, max, count) is reported, not modelled.  The
**p2p latency** is the median gap between a producer's end and its consumer's start on
another device, over the consumers that were waiting for it (their device idle just before
them, this producer the last to finish); without any such consumer, the smallest gap.  Times
are in ms, rounded to ``resolution`` (1 µs by default) so that the solver's time grid stays
coarse.  Memory is not measured: ``activation = 1`` and no limit unless overridden.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from cpsched.actions import Action, Kind
from cpsched.instance import Instance
from cpsched.trace.align import Aligned, Gap
from cpsched.trace.shape import Shape

#: Default rounding of derived costs, ms (1 µs).
RESOLUTION_MS = 0.001


@dataclass(frozen=True)
class Stat:
    """Measured durations of one kind of action on one stage (ms).

    ``kind`` is ``F``, ``B``, ``I``, ``W`` or ``F&B`` (an overlapped pair, by its F's stage).
    """

    stage: int
    kind: str
    n: int
    median: float
    low: float
    high: float


@dataclass(frozen=True)
class Latency:
    """The p2p latency estimate (ms) and what it rests on."""

    value: float
    basis: str
    n: int
    low: float | None
    high: float | None


def _round(x: float, resolution: float) -> float:
    return round(round(x / resolution) * resolution, 6)


def stage_stats(shape: Shape, aligned: Aligned) -> list[Stat]:
    """Duration statistics per (stage, kind), pairs apart, sorted by stage then kind."""
    samples: dict[tuple[int, str], list[float]] = defaultdict(list)
    for a, sp in shape.spans.items():
        start, end = aligned.times[a]
        if len(sp.actions) == 2:
            if a.kind == Kind.F:
                samples[(a.stage, "F&B")].append(end - start)
        else:
            samples[(a.stage, str(a.kind))].append(end - start)
    order = {"F": 0, "B": 1, "I": 2, "W": 3, "F&B": 4}
    return [Stat(s, k, len(v), round(statistics.median(v), 6), round(min(v), 6),
                 round(max(v), 6))
            for (s, k), v in sorted(samples.items(), key=lambda kv: (kv[0][0], order[kv[0][1]]))]


def p2p_latency(gaps: list[Gap], resolution: float = RESOLUTION_MS) -> Latency:
    """The latency estimate of the module docstring from the cross-device gaps."""
    waited = [g.gap for g in gaps if g.waited]
    if waited:
        return Latency(_round(max(0.0, statistics.median(waited)), resolution),
                       "median gap of the consumers that waited", len(waited), min(waited),
                       max(waited))
    if gaps:
        least = min(g.gap for g in gaps)
        return Latency(_round(max(0.0, least), resolution), "smallest gap (no consumer "
                       "waited)", len(gaps), least, max(g.gap for g in gaps))
    return Latency(0.0, "no dependency between devices", 0, None, None)


def _per_stage(stats: dict[tuple[int, str], Stat], S: int, kind: str,
               fallback: dict[int, float], notes: list[str], resolution: float) -> list[float]:
    out = []
    for s in range(S):
        st = stats.get((s, kind))
        if st is not None:
            out.append(_round(st.median, resolution))
        else:
            out.append(_round(fallback.get(s, 0.0), resolution))
            notes.append(f"stage {s}: no plain {kind} measured; {kind} = {out[-1]:g} ms "
                         "assumed")
    return out


def _costs(shape: Shape, stats: dict[tuple[int, str], Stat], notes: list[str],
           resolution: float) -> dict[str, Any]:
    S = shape.num_stages
    pair = {s: st.median for (s, k), st in stats.items() if k == "F&B"}
    fwd = _per_stage(stats, S, "F", {s: x / 2 for s, x in pair.items()}, notes, resolution)
    costs: dict[str, Any] = {"forward": fwd}
    if shape.split_backward:
        fused = {s: stats[(s, "B")].median / 2 for s in range(S) if (s, "B") in stats}
        costs["backward_input"] = _per_stage(stats, S, "I", fused, notes, resolution)
        costs["backward_weight"] = _per_stage(stats, S, "W", fused, notes, resolution)
    else:
        costs["backward"] = _per_stage(stats, S, "B", {}, notes, resolution)
        for s in range(S):
            if fwd[s] + costs["backward"][s] <= 0:
                costs["backward"][s] = resolution
                notes.append(f"stage {s}: F and B round to 0; B = {resolution:g} ms")
    return costs


def _with_pairs(inst: Instance, stats: dict[tuple[int, str], Stat], notes: list[str],
                resolution: float) -> Instance:
    """``inst`` with ``overlap_forward_backward`` from the measured pairs, each clamped to
    the range an instance allows (docs/guarantees.md §7.1); stages without a measured pair
    get ``F + B`` (no gain)."""
    ov = []
    for s in range(inst.num_stages):
        partner = max(inst.backward[t] for t in inst.pair_partners(s))
        low, high = max(inst.forward[s], partner), inst.forward[s] + partner
        st = stats.get((s, "F&B"))
        x = high if st is None else min(max(_round(st.median, resolution), low), high)
        if st is not None and x != _round(st.median, resolution):
            notes.append(f"stage {s}: measured F&B pair {st.median:g} ms clamped to {x:g} "
                         f"(an instance allows {low:g}..{high:g})")
        ov.append(round(x, 6))
    return inst.replace(**{"costs.overlap_forward_backward": ov})


def derive_instance(shape: Shape, aligned: Aligned, name: str, description: str,
                    overrides: dict[str, Any] | None = None,
                    resolution: float = RESOLUTION_MS) -> tuple[Instance, list[Stat], Latency,
                                                                 list[str]]:
    """The instance of the measured run: shape from the trace, costs from its medians.

    Args:
        overrides: dotted instance keys applied last (``{"memory.limit": 8}``).
        resolution: ms the costs are rounded to (> 0).

    Returns:
        (instance, per-stage statistics, latency estimate, notes on what was assumed).

    Raises:
        InstanceError: an override makes the instance invalid.
    """
    stats = stage_stats(shape, aligned)
    by_key = {(st.stage, st.kind): st for st in stats}
    notes: list[str] = []
    lat = p2p_latency(aligned.gaps, resolution)
    data = {"name": name, "description": description,
            "pipeline": {"devices": shape.p, "stages_per_device": shape.v,
                         "microbatches": shape.m, "placement": shape.placement,
                         "split_backward": shape.split_backward},
            "costs": _costs(shape, by_key, notes, resolution) | {"p2p_latency": lat.value},
            "memory": {"activation": 1}}
    inst = Instance.from_dict(data)
    if any(k == "F&B" for _, k in by_key):
        inst = _with_pairs(inst, by_key, notes, resolution)
    if overrides:
        inst = inst.replace(**overrides)
    return inst, stats, lat, notes


def measured_pairs(shape: Shape) -> dict[Action, int]:
    """An overlap id per action of an overlapped pair (both members share it)."""
    ids: dict[Action, int] = {}
    seen: dict[int, int] = {}
    for a, sp in shape.spans.items():
        if len(sp.actions) == 2:
            ids[a] = seen.setdefault(id(sp), len(seen))
    return ids


__all__ = ["RESOLUTION_MS", "Latency", "Stat", "derive_instance", "measured_pairs",
           "p2p_latency", "stage_stats"]
