"""Task graph of a pipeline instance (networkx), ASAP/ALAP windows and lower bounds.

One node per action (:class:`~cpsched.model.Action`) with attributes ``duration`` (integer
ticks) and ``device``; one edge per dependency of SPEC §1 with attribute ``lag`` (ticks): the
p2p latency when the two actions run on different devices, else 0.  An edge ``u -> v`` with
lag ``L`` means ``start(v) >= end(u) + L``.

All times here are integer ticks (see :meth:`Instance.ticks`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import networkx as nx

from cpsched.core import ResourceGraph, heads_and_tails
from cpsched.instance import Instance
from cpsched.model import Action, Kind, Overlap, default_actions

#: ``fused(stage, microbatch)`` is True when that (stage, microbatch) runs one fused B.
FusedRule = Callable[[int, int], bool]


def duration(instance: Instance, action: Action) -> int:
    """Duration of ``action`` in ticks (fused ``B`` lasts ``I + W`` with split backward)."""
    s = action.stage
    if action.kind == Kind.F:
        x = instance.forward[s]
    elif action.kind == Kind.B:
        x = instance.backward[s]
    elif action.kind == Kind.I:
        x = instance.backward_input[s]
    else:
        x = instance.backward_weight[s]
    return instance.ticks(x)


def overlap_duration(instance: Instance, pair: Overlap) -> int:
    """Duration in ticks of an overlapped F&B pair: ``overlap_forward_backward`` of the F's
    stage when given, else the two run back to back (sum of the durations)."""
    ov = instance.overlap_forward_backward
    if ov is None:
        return duration(instance, pair.forward) + duration(instance, pair.backward)
    return instance.ticks(ov[pair.forward.stage])


def dependencies(instance: Instance, action: Action, fused: FusedRule) -> list[tuple[Action, int]]:
    """Predecessors of ``action`` with their lags (ticks), per SPEC §1.

    ``fused(s, i)`` tells which backward kind (s, i) runs when split backward is on
    (``B`` if fused, else ``I``); without split backward every backward is ``B``.
    """
    S = instance.num_stages
    s, i, k = action.stage, action.microbatch, action.kind
    lat = instance.ticks(instance.p2p_latency)
    dev = instance.device_of(s, i)

    def lag(other_stage: int) -> int:
        return lat if instance.device_of(other_stage, i) != dev else 0

    def bwd(stage: int) -> Action:
        if not instance.split_backward or fused(stage, i):
            return Action(Kind.B, stage, i)
        return Action(Kind.I, stage, i)

    if k == Kind.F:
        return [(Action(Kind.F, s - 1, i), lag(s - 1))] if s > 0 else []
    if k == Kind.W:
        return [(Action(Kind.I, s, i), 0)]
    # B or I
    if s == S - 1:
        return [(Action(Kind.F, s, i), 0)]
    return [(bwd(s + 1), lag(s + 1))]


def fused_rule_from(actions: Iterable[Action]) -> FusedRule:
    """The fused rule implied by a set of actions (a (stage, mb) with a ``B`` is fused)."""
    fused = {(a.stage, a.microbatch) for a in actions if a.kind == Kind.B}
    return lambda s, i: (s, i) in fused


def build_task_graph(instance: Instance, actions: Iterable[Action] | None = None) -> nx.DiGraph:
    """The task graph of ``instance``.

    Args:
        actions: the action set (default :func:`~cpsched.model.default_actions`: ``F, B`` or
            ``F, I, W`` for every (stage, microbatch)); pass a schedule's actions to honour
            its fused ``B`` choices.

    Returns:
        ``nx.DiGraph`` with node attrs ``duration``, ``device`` and edge attr ``lag`` (ticks);
        graph attrs ``instance``.
    """
    acts = list(actions) if actions is not None else default_actions(instance)
    rule = fused_rule_from(acts)
    g = nx.DiGraph(instance=instance)
    for a in acts:
        g.add_node(a, duration=duration(instance, a), device=instance.device_of(a.stage,
                                                                                a.microbatch))
    for a in acts:
        for pred, lag in dependencies(instance, a, rule):
            g.add_edge(pred, a, lag=lag)
    return g


@dataclass(frozen=True)
class LowerBound:
    """A combinatorial lower bound on the makespan (ticks) and where it comes from.

    ``value = max(critical_path, max_d device_bound[d])`` with ``device_bound[d] = min head on
    d + total work on d + min tail on d`` (DESIGN-NOTES 4).  Valid for every schedule that
    does not overlap F&B pairs.
    """

    value: int
    critical_path: int
    device_bound: tuple[int, ...]


def lower_bound(instance: Instance, g: nx.DiGraph | None = None) -> LowerBound:
    """Lower bound on the optimal makespan in ticks (see :class:`LowerBound`)."""
    g = build_task_graph(instance) if g is None else g
    head, tail = heads_and_tails(g)
    dur = nx.get_node_attributes(g, "duration")
    dev = nx.get_node_attributes(g, "device")
    cp = max((head[a] + dur[a] + tail[a] for a in g), default=0)
    per_dev = []
    for d in range(instance.p):
        nodes = [a for a in g if dev[a] == d]
        if not nodes:
            per_dev.append(0)
            continue
        per_dev.append(min(head[a] for a in nodes) + sum(dur[a] for a in nodes)
                       + min(tail[a] for a in nodes))
    return LowerBound(max(cp, *per_dev), cp, tuple(per_dev))


def overlap_relaxed_durations(instance: Instance, g: nx.DiGraph) -> dict[Action, int]:
    """Per action of ``g``, a duration (ticks) that no schedule with overlapped F&B pairs can
    beat along any chain of the task graph.

    In a pair each member spans a pair duration (at least the shortest
    ``overlap_forward_backward``, ``P``) instead of its own, so ``F``, ``B`` and ``I`` count
    ``min(duration, P)``.  With split backward a pair may run a fused ``B`` (``I`` and ``W``
    together, both ending with the pair), so the ``I -> W`` chain only guarantees
    ``min(I + W, P)``: ``W`` counts ``max(0, min(I + W, P) - min(I, P))``.  Without an overlap
    cost: the durations themselves.
    """
    dur = nx.get_node_attributes(g, "duration")
    ov = instance.overlap_forward_backward
    if ov is None:
        return dict(dur)
    shortest = min(instance.ticks(x) for x in ov)
    out: dict[Action, int] = {}
    for a, d in dur.items():
        if a.kind == Kind.W and instance.split_backward:
            i = duration(instance, Action(Kind.I, a.stage, a.microbatch))
            out[a] = max(0, min(i + d, shortest) - min(i, shortest))
        else:
            out[a] = min(d, shortest)
    return out


def overlap_lower_bound(instance: Instance, g: nx.DiGraph | None = None) -> int:
    """Lower bound (ticks) valid also for schedules with overlapped F&B pairs.

    Chains use :func:`overlap_relaxed_durations`, and a device's work is its total minus the
    largest savings its pairs could make (``F + B - pair`` per pair, ``B`` the full backward
    since a pair may run it fused, at most ``min(#F, #B/I)`` pairs).  Equals
    :func:`lower_bound` when no overlap cost is given.
    """
    g = build_task_graph(instance) if g is None else g
    ov = instance.overlap_forward_backward
    if ov is None:
        return lower_bound(instance, g).value
    shortest = min(instance.ticks(x) for x in ov)
    h = g.copy()
    rel = overlap_relaxed_durations(instance, g)
    for a in h:
        h.nodes[a]["duration"] = rel[a]
    head, tail = heads_and_tails(h)
    dur = nx.get_node_attributes(g, "duration")
    cp = max((head[a] + rel[a] + tail[a] for a in h), default=0)
    best = cp
    for d in range(instance.p):
        nodes = [a for a in g if g.nodes[a]["device"] == d]
        if not nodes:
            continue
        fs = sorted((dur[a] for a in nodes if a.kind == Kind.F), reverse=True)
        # a pair may take a fused B (I + W) with split backward: that saves the most
        bs = sorted((instance.ticks(instance.backward[a.stage]) for a in nodes
                     if a.kind in (Kind.B, Kind.I)), reverse=True)
        k = min(len(fs), len(bs))
        savings = sum(max(0, f + b - shortest) for f, b in zip(fs[:k], bs[:k], strict=True))
        work = sum(dur[a] for a in nodes) - savings
        best = max(best, min(head[a] for a in nodes) + work + min(tail[a] for a in nodes))
    return best


def windows(g: nx.DiGraph, horizon: int) -> dict[Action, tuple[int, int]]:
    """ASAP/ALAP start windows ``(earliest, latest)`` in ticks against ``horizon``.

    A latest start below the earliest means no schedule finishes by ``horizon``.
    """
    head, tail = heads_and_tails(g)
    dur = nx.get_node_attributes(g, "duration")
    return {a: (head[a], horizon - tail[a] - dur[a]) for a in g}


def memory_scale(instance: Instance) -> int:
    """Smallest power of ten (<= 10**6) that makes every activation part (``a``, ``a * r``,
    ``a * (1 - r)``) and the limit integers; memory is scaled by it for integer demands."""
    r = instance.released_by_input
    vals = [x for a in instance.activation for x in (a, a * r, a * (1 - r))]
    if instance.memory_limit is not None:
        vals.append(instance.memory_limit)
    for k in range(7):
        sc = 10**k
        if all(abs(x * sc - round(x * sc)) < 1e-6 for x in vals):
            return sc
    return 10**6


def release_actions(instance: Instance, stage: int, microbatch: int
                    ) -> list[tuple[Action, float]]:
    """(action whose end releases memory, fraction released) for (stage, microbatch) with the
    default action set: ``B`` (all), or ``I`` (``released_by_input``) and ``W`` (the rest)."""
    if not instance.split_backward:
        return [(Action(Kind.B, stage, microbatch), 1.0)]
    r = instance.released_by_input
    return [(Action(Kind.I, stage, microbatch), r), (Action(Kind.W, stage, microbatch), 1.0 - r)]


def pipeline_resource_graph(instance: Instance) -> ResourceGraph:
    """The pipeline as a general :class:`~cpsched.core.ResourceGraph` (the pipeline builder).

    One task per default action (ticks) on its device (a resource of capacity 1), the SPEC §1
    dependencies with their lags, and — with a memory limit — one pool per device (limit
    scaled by :func:`memory_scale`) with a buffer from the start of ``F(s, i)`` to the end of
    each release action, holding that part of ``activation[s]`` (rounded up).
    """
    g = build_task_graph(instance)
    rg = ResourceGraph()
    for d in range(instance.p):
        rg.add_resource(d, 1)
    for a, data in g.nodes(data=True):
        rg.add_task(a, data["duration"], data["device"])
    for u, v, data in g.edges(data=True):
        rg.add_edge(u, v, data["lag"])
    limit = instance.memory_limit
    if limit is None:
        return rg
    sc = memory_scale(instance)
    for d in range(instance.p):
        rg.add_pool(d, math.floor(limit * sc + 1e-6))
    for i in range(instance.m):
        for s in range(instance.num_stages):
            f = Action(Kind.F, s, i)
            for rel, frac in release_actions(instance, s, i):
                rg.add_buffer(g.nodes[f]["device"], f, rel,
                              math.ceil(instance.activation[s] * frac * sc - 1e-6))
    return rg
