"""Task graph of a pipeline instance (networkx), ASAP/ALAP windows and lower bounds.

One node per action (:class:`~cpsched.actions.Action`) with attributes ``duration`` (integer
ticks) and ``device``; one edge per dependency of docs/spec.md §1 with attribute ``lag``
(ticks): the p2p latency when the two actions run on different devices, else 0.  An edge
``u -> v`` with lag ``L`` means ``start(v) >= end(u) + L``.  The rules themselves (durations,
dependencies, release points) live in :mod:`cpsched.rules` and are re-exported here.

All times here are integer ticks (see :meth:`Instance.ticks`).
"""

from __future__ import annotations

import math
import threading
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import partial

import networkx as nx

from cpsched.actions import Action, Kind
from cpsched.core import HeadsTails, ResourceGraph, digraph_from, heads_and_tails
from cpsched.engine import paused_gc
from cpsched.instance import Instance
from cpsched.rules import (
    FusedRule,
    dependencies,
    duration,
    fused_rule_from,
    overlap_duration,
    release_actions,
    stage_ticks,
)


def build_task_graph(instance: Instance, actions: Iterable[Action] | None = None) -> nx.DiGraph:
    """The task graph of ``instance``.

    Args:
        actions: the action set (default: :func:`~cpsched.actions.default_actions`, ``F, B``
            or ``F, I, W`` for every (stage, microbatch)); pass a schedule's actions to honour
            its fused ``B`` choices.

    Returns:
        ``nx.DiGraph`` with node attrs ``duration``, ``device`` and edge attr ``lag`` (ticks);
        graph attrs ``instance``.  Edges are :func:`cpsched.rules.dependencies`, added in
        action order.
    """
    return _graph(instance, actions, "device", instance=instance)


#: the last :func:`task_graph`: (the instance, the graph)
_LAST_GRAPH: list[tuple[Instance, nx.DiGraph]] = []
_LAST_GRAPH_LOCK = threading.Lock()


def task_graph(instance: Instance) -> nx.DiGraph:
    """:func:`build_task_graph` of the default actions, kept for the last instance asked for:
    ``solve`` needs it for the plain lower bound while the known schedules run
    (:mod:`cpsched.schedules.registry`) and again for its bounds, and at 24 576-32 768 actions
    building it takes 0.5-1 s.  It is reused only for the same instance object (instances
    are frozen); one graph is kept (it refers to its instance), until another instance asks.
    Callers must not change the graph (none does: the graph is read only once built).
    """
    with _LAST_GRAPH_LOCK:
        if _LAST_GRAPH and _LAST_GRAPH[0][0] is instance:
            return _LAST_GRAPH[0][1]
    g = build_task_graph(instance)
    with _LAST_GRAPH_LOCK:
        _LAST_GRAPH[:] = [(instance, g)]
    return g


def _graph(inst: Instance, actions: Iterable[Action] | None, device_attr: str,
           **graph_attr: object) -> nx.DiGraph:
    """The task graph, its device attribute called ``device_attr``."""
    act = partial(tuple.__new__, Action)  # Action((k, s, i)) without the Python-level __new__
    if actions is None:  # default_actions(instance), built faster
        S, m = inst.num_stages, inst.m
        kinds = (Kind.F, Kind.I, Kind.W) if inst.split_backward else (Kind.F, Kind.B)
        acts = [act((k, s, i)) for i in range(m) for s in range(S) for k in kinds]
    else:
        acts = list(actions)
    tk = stage_ticks(inst)
    S, half, split = inst.num_stages, tk.half, inst.split_backward
    fused = {(a.stage, a.microbatch) for a in acts if a.kind == Kind.B} if split else set()
    with paused_gc():
        nodes = [(a, {"duration": tk.duration[a.kind][a.stage],
                      device_attr: tk.device[a.microbatch >= half][a.stage]}) for a in acts]
        edges = []
        for a in acts:
            k, s, i = a
            dr = i >= half
            if k == Kind.F:
                if s > 0:
                    edges.append((act((Kind.F, s - 1, i)), a, {"lag": tk.forward_lag[dr][s]}))
            elif k == Kind.W:
                edges.append((act((Kind.I, s, i)), a, {"lag": 0}))
            elif s == S - 1:
                edges.append((act((Kind.F, s, i)), a, {"lag": 0}))
            else:
                nk = Kind.I if split and (s + 1, i) not in fused else Kind.B
                edges.append((act((nk, s + 1, i)), a, {"lag": tk.backward_lag[dr][s]}))
        names = {a for a, _ in nodes}
        if len(names) == len(nodes) and all(u in names for u, _, _ in edges):
            return digraph_from(nodes, edges, **graph_attr)
    g = nx.DiGraph(**graph_attr)  # repeated actions or missing predecessors: as networkx
    g.add_nodes_from(nodes)
    g.add_edges_from(edges)
    return g


def nodes_by_device(g: nx.DiGraph) -> dict[int, list[Action]]:
    """The nodes of ``g`` per device (in node order)."""
    out: dict[int, list[Action]] = defaultdict(list)
    for a, d in g.nodes(data="device"):
        out[d].append(a)
    return out


@dataclass(frozen=True)
class LowerBound:
    """A combinatorial lower bound on the makespan (ticks) and where it comes from.

    ``value = max(critical_path, max_d device_bound[d])`` with ``device_bound[d] = min head on
    d + total work on d + min tail on d`` (docs/modelling.md §4).  Valid for every schedule that
    does not overlap F&B pairs.
    """

    value: int
    critical_path: int
    device_bound: tuple[int, ...]


def lower_bound(instance: Instance, g: nx.DiGraph | None = None, *,
                ht: HeadsTails | None = None) -> LowerBound:
    """Lower bound on the optimal makespan in ticks (see :class:`LowerBound`).  ``ht``: the
    graph's :func:`heads_and_tails` when the caller already has them (computed otherwise)."""
    g = task_graph(instance) if g is None else g
    head, tail = heads_and_tails(g) if ht is None else ht
    dur = nx.get_node_attributes(g, "duration")
    cp = max((head[a] + dur[a] + tail[a] for a in g), default=0)
    per_dev = []
    by_dev = nodes_by_device(g)
    for d in range(instance.p):
        nodes = by_dev.get(d)
        if not nodes:
            per_dev.append(0)
            continue
        per_dev.append(min(head[a] for a in nodes) + sum(dur[a] for a in nodes)
                       + min(tail[a] for a in nodes))
    return LowerBound(max(cp, *per_dev), cp, tuple(per_dev))


def microbatch_chains(g: nx.DiGraph, microbatch: int, sources: Iterable[Action],
                      durations: Mapping[Action, int] | None = None
                      ) -> dict[Action, dict[Action, int]]:
    """Longest chains inside one microbatch (dependencies never leave a microbatch):
    ``out[a][b]`` = the longest sum of durations and lags from the start of ``a`` to the start
    of ``b`` (ticks; ``out[a][a] = 0``), for every ``b`` reachable from each source ``a``.
    ``durations`` replaces the graph's (e.g. :func:`overlap_relaxed_durations`)."""
    sub = g.subgraph([a for a in g if a.microbatch == microbatch])
    order = list(nx.topological_sort(sub))
    dur = nx.get_node_attributes(sub, "duration") if durations is None else durations
    out: dict[Action, dict[Action, int]] = {}
    for a in sources:
        dist = {a: 0}
        for v in order:
            for u, e in sub._pred[v].items():  # noqa: SLF001 - read-only
                if u in dist:
                    dist[v] = max(dist.get(v, 0), dist[u] + dur[u] + e["lag"])
        out[a] = dist
    return out


def overlap_relaxed_durations(instance: Instance, g: nx.DiGraph) -> dict[Action, int]:
    """Per action of ``g``, a duration (ticks) that no schedule with overlapped F&B pairs can
    beat along any chain of the task graph.

    In a pair each member spans the pair's duration ``overlap_forward_backward[s_F]`` (the
    ``F``'s stage) instead of its own.  So an ``F`` counts ``min(duration, its own stage's
    pair)``, and a backward (``B`` or ``I``) ``min(duration, P_d)`` with ``P_d`` the shortest
    pair of its device ``d`` (the pairs its device's forwards can form).  With split
    backward a pair may run a fused ``B`` (``I`` and ``W`` together, both ending with the
    pair), so the ``I -> W`` chain only guarantees ``min(I + W, P_d)``: ``W`` counts
    ``max(0, min(I + W, P_d) - min(I, P_d))``.  Within docs/spec.md §2.2's range (a pair at
    least as long as its device's longest forward and backward) these are the durations
    themselves.  Without an overlap cost: the durations themselves.
    """
    dur = nx.get_node_attributes(g, "duration")
    ov = instance.overlap_forward_backward
    if ov is None:
        return dict(dur)
    pair = [instance.ticks(x) for x in ov]
    device = {a: instance.device_of(a.stage, a.microbatch) for a in dur}
    shortest: dict[int, int] = {}
    for a in dur:
        if a.kind == Kind.F:
            d = device[a]
            shortest[d] = min(shortest.get(d, pair[a.stage]), pair[a.stage])
    out: dict[Action, int] = {}
    for a, d in dur.items():
        if a.kind == Kind.F:
            out[a] = min(d, pair[a.stage])
            continue
        cap = shortest.get(device[a])
        if cap is None:  # no forward on the device: no pair can hold this action
            out[a] = d
        elif a.kind == Kind.W and instance.split_backward:
            i = duration(instance, Action(Kind.I, a.stage, a.microbatch))
            out[a] = max(0, min(i + d, cap) - min(i, cap))
        else:
            out[a] = min(d, cap)
    return out


def overlap_lower_bound(instance: Instance, g: nx.DiGraph | None = None, *,
                        relaxed: tuple[dict[Action, int], HeadsTails] | None = None) -> int:
    """Lower bound (ticks) valid also for schedules with overlapped F&B pairs.

    Chains use :func:`overlap_relaxed_durations`, and a device's work is its total minus the
    largest savings its pairs could make (``F + B - pair`` per pair, ``B`` the full backward
    since a pair may run it fused, at most ``min(#F, #B/I)`` pairs: :func:`pair_savings`).
    Equals :func:`lower_bound` when no overlap cost is given.  ``relaxed``: the graph's
    :func:`overlap_heads_tails` when the caller has them.
    """
    g = task_graph(instance) if g is None else g
    if instance.overlap_forward_backward is None:
        return lower_bound(instance, g).value
    rel, (head, tail) = overlap_heads_tails(instance, g) if relaxed is None else relaxed
    dur = nx.get_node_attributes(g, "duration")
    cp = max((head[a] + rel[a] + tail[a] for a in g), default=0)
    best = cp
    for nodes in nodes_by_device(g).values():
        work = sum(dur[a] for a in nodes) - sum(pair_savings(instance, nodes, dur))
        best = max(best, min(head[a] for a in nodes) + work + min(tail[a] for a in nodes))
    return best


def overlap_heads_tails(instance: Instance, g: nx.DiGraph
                        ) -> tuple[dict[Action, int], HeadsTails]:
    """The pair-relaxed durations (:func:`overlap_relaxed_durations`) and the heads and
    tails they give (ticks): what no schedule with overlapped pairs can beat."""
    rel = overlap_relaxed_durations(instance, g)
    return rel, heads_and_tails(g, rel)


def pair_savings(instance: Instance, nodes: Iterable[Action], dur: Mapping[Action, int]
                 ) -> list[int]:
    """The most device time the pairs among one device's actions ``nodes`` can save (ticks),
    largest first (docs/modelling.md §4.3).

    A pair of ``F(s)`` with a backward of full duration ``b`` (``B``, or ``I + W``: a pair may
    run it fused) saves at most ``F(s) + b - overlap_forward_backward[s]``.  That is
    ``c + b`` with ``c = F(s) - overlap[s]`` depending on the forward alone, so the best ``j``
    pairs match the ``j`` largest ``c`` with the ``j`` largest ``b`` in order (the saving
    ``max(0, c + b)`` is convex in ``c + b``); at most ``k = min(#F, #B/I)`` pairs."""
    pair = [instance.ticks(x) for x in instance.overlap_forward_backward or ()]
    nodes = list(nodes)
    cs = sorted((dur[a] - pair[a.stage] for a in nodes if a.kind == Kind.F), reverse=True)
    bs = sorted((instance.ticks(instance.backward[a.stage]) for a in nodes
                 if a.kind in (Kind.B, Kind.I)), reverse=True)
    k = min(len(cs), len(bs))
    return sorted((max(0, c + b) for c, b in zip(cs[:k], bs[:k], strict=True)),
                  reverse=True)


def windows(g: nx.DiGraph, horizon: int) -> dict[Action, tuple[int, int]]:
    """ASAP/ALAP start windows ``(earliest, latest)`` in ticks against ``horizon``.

    A latest start below the earliest means no schedule finishes by ``horizon``.
    """
    head, tail = heads_and_tails(g)
    dur = nx.get_node_attributes(g, "duration")
    return {a: (head[a], horizon - tail[a] - dur[a]) for a in g}


def memory_scale(instance: Instance) -> int:
    """The solver's memory unit (:attr:`Instance.memory_scale`): memory is scaled by it for
    integer demands."""
    return instance.memory_scale


def pipeline_resource_graph(instance: Instance) -> ResourceGraph:
    """The pipeline as a general :class:`~cpsched.core.ResourceGraph` (the pipeline builder).

    One task per default action (ticks) on its device (a resource of capacity 1), the
    docs/spec.md §1 dependencies with their lags, and — with a memory limit — one pool per
    device (limit scaled by :func:`memory_scale`) with a buffer from the start of ``F(s, i)``
    to the end of each release action (:func:`cpsched.rules.release_actions`), holding that
    part of ``activation[s]`` (rounded up).
    """
    rg = ResourceGraph()
    for d in range(instance.p):
        rg.add_resource(d, 1)
    # the task graph with "resource" for "device": valid by construction, no per-task checks
    rg.graph = _graph(instance, None, "resource")
    dev = nx.get_node_attributes(rg.graph, "resource")
    pool, buffers = memory_buffers(instance)
    if pool is None:
        return rg
    for d in range(instance.p):
        rg.add_pool(d, pool)
    for f, rel, amount in buffers:
        rg.add_buffer(dev[f], f, rel, amount)
    return rg


def memory_buffers(instance: Instance, microbatches: Iterable[int] | None = None
                   ) -> tuple[int | None, list[tuple[Action, Action, int]]]:
    """The memory rule of docs/spec.md §1.5 in the solver's integer units
    (:func:`memory_scale`): each device's limit (None without one, rounded down) and every
    buffer ``(F(s, i), release, amount)`` — held from the start of ``F(s, i)`` to the end of
    the release action, ``activation[s]`` times the fraction it frees (rounded up; zero
    amounts left out) — of the given microbatches (default: all)."""
    limit = instance.memory_limit
    if limit is None:
        return None, []
    sc = memory_scale(instance)
    buffers = []
    for i in range(instance.m) if microbatches is None else microbatches:
        for s in range(instance.num_stages):
            f = Action(Kind.F, s, i)
            for rel, frac in release_actions(instance, s, i):
                amount = math.ceil(instance.activation[s] * frac * sc - 1e-6)
                if amount > 0:
                    buffers.append((f, rel, amount))
    return math.floor(limit * sc + 1e-6), buffers


__all__ = [
    "FusedRule", "LowerBound", "build_task_graph", "dependencies", "duration",
    "fused_rule_from", "heads_and_tails", "lower_bound", "memory_buffers", "memory_scale",
    "microbatch_chains", "nodes_by_device", "overlap_heads_tails", "pair_savings",
    "overlap_duration", "overlap_lower_bound", "overlap_relaxed_durations",
    "pipeline_resource_graph", "release_actions", "windows",
]
