"""The pair window bound: where and when a device's overlapped F&B pairs can run
(docs/modelling.md §28).

With ``overlap_forward_backward`` a device saves time only by pairing a forward with a
backward of another microbatch, and a pair can run only while both are available: not
before the later of their heads, not after the earlier of their deadlines ``C - tail``.
The pair bounds of docs/modelling.md §4.3 and §16.1 credit a device with its best pairs
wherever they fall, and fill the windows where no pair runs with any forward or backward.
This bound keeps the actions' own windows: the actions of one device are grouped into
*types* (kind, stage, head, tail: the microbatches of one stage and direction), and a
*mode* is a type run alone or a pair of a forward type with a backward type (``F + B``,
``F + I``, or ``F + I + W`` with the weight gradient fused in, each lasting
``overlap_forward_backward[s_F]``).  For a makespan ``C`` a linear program spreads the
modes' device time over the intervals between the windows' ends; the device runs one
thing at a time, and every action of every type must be covered once::

    z[k, j] >= 0                          device time of mode k in interval j (inside k's window)
    sum_k z[k, j] <= len(j)               one thing at a time
    sum_{k covers t} sum_j z[k, j] / dur(k) = n(t)    every action of type t, once

Two more row families: *links* — the runs of a type done by ``x`` are at most those of the
closest earlier type of the same microbatches done by ``x - lag + D`` (``lag`` the chain from
one start to the other, ``D`` the longest mode of the earlier type) — and, under a memory
limit, at every cut the forwards run so far minus the releases run so far hold at most the
limit.  If the LP has no solution no schedule has makespan ``C`` (*proof*, docs/modelling.md
§28: in a schedule each action runs alone or in one pair, inside the window of its mode; the
device time of each mode per interval is a feasible point).  Feasibility grows with ``C``,
so a bisection finds the least ``C`` not refuted.  It runs actions and holds activations in
fractions (a relaxation of both), and is computed only with an overlap cost: without pairs
it is a preemptive one-machine bound that §11, §16 and §24 dominate.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import networkx as nx
from ortools.linear_solver import pywraplp

from cpsched.actions import Action, Kind
from cpsched.core import HeadsTails
from cpsched.graph import (
    build_task_graph,
    microbatch_chains,
    nodes_by_device,
    overlap_heads_tails,
)
from cpsched.instance import Instance
from cpsched.rules import release_actions

#: a count the LP covers within this many actions of the total is taken as covered
_COVER_TOLERANCE = 1e-4
#: the validator's own slack on the memory limit, and more (docs/spec.md §1.5)
_MEMORY_TOLERANCE = 1e-3


@dataclass(frozen=True)
class _Type:
    """The actions of one device with the same kind, stage, head and tail (ticks)."""

    kind: Kind
    stage: int
    head: int
    tail: int
    duration: int
    count: int
    memory: float  # taken at the start (forward, > 0) or given back at the end (< 0)
    microbatches: frozenset[int]


@dataclass(frozen=True)
class _Mode:
    """One way the device runs: ``members`` (indices of types) together for ``duration``
    ticks, starting at or after ``head`` and ending at least ``tail`` before the makespan."""

    members: tuple[int, ...]
    duration: int
    head: int
    tail: int
    memory: float = 0.0  # memory taken (forward) minus given back (release) by one run


@dataclass(frozen=True)
class _Link:
    """Each action of type ``after`` starts at least ``lag`` ticks after the start of its
    microbatch's action of type ``before`` (the same microbatches; indices of types)."""

    before: int
    after: int
    lag: int


@dataclass(frozen=True)
class _Device:
    """One device's LP data: its types, modes, links, and per type the longest mode that
    runs it (ticks: an action started by ``t`` has run by ``t + longest``)."""

    types: list[_Type]
    modes: list[_Mode]
    links: list[_Link]
    longest: list[int]


def _types(inst: Instance, nodes: Iterable[Action], dur: Mapping[Action, int],
           head: Mapping[Action, int], tail: Mapping[Action, int]) -> list[_Type]:
    """The device's actions grouped by (kind, stage, head, tail); ``dur`` the durations."""
    groups: dict[tuple[Kind, int, int, int, int], set[int]] = {}
    for a in nodes:
        groups.setdefault((a.kind, a.stage, head[a], tail[a], dur[a]), set()).add(a.microbatch)
    return [_Type(k, s, h, t, d, len(mbs), _memory(inst, k, s), frozenset(mbs))
            for (k, s, h, t, d), mbs in sorted(groups.items())]


def _links(types: list[_Type], chains: Mapping[Action, Mapping[Action, int]]) -> list[_Link]:
    """For each type, the closest earlier type of the same microbatches on the device (the
    smallest longest-chain lag, start to start, from ``chains``)."""
    links = []
    for b, tb in enumerate(types):
        mb = min(tb.microbatches)
        target = Action(tb.kind, tb.stage, mb)
        best: tuple[int, int] | None = None
        for a, ta in enumerate(types):
            if a == b or ta.microbatches != tb.microbatches:
                continue
            lag = chains.get(Action(ta.kind, ta.stage, mb), {}).get(target)
            if lag is not None and (best is None or lag < best[0]):
                best = (lag, a)
        if best is not None:
            links.append(_Link(best[1], b, best[0]))
    return links


def _device(inst: Instance, types: list[_Type],
            chains: Mapping[Action, Mapping[Action, int]]) -> _Device:
    """:class:`_Device` of ``types`` (:func:`_types`)."""
    modes = _modes(inst, types)
    longest = [0] * len(types)
    for mode in modes:
        for k in mode.members:
            longest[k] = max(longest[k], mode.duration)
    return _Device(types, modes, _links(types, chains), longest)


def _memory(inst: Instance, kind: Kind, stage: int) -> float:
    """What one action of ``kind`` at ``stage`` does to its device's memory (docs/spec.md
    §1.5): a forward takes the stage's activation, its releases
    (:func:`cpsched.rules.release_actions`) give their fractions of it back."""
    act = inst.activation[stage]
    if kind == Kind.F:
        return act
    return -act * sum(f for a, f in release_actions(inst, stage, 0) if a.kind == kind)


def _modes(inst: Instance, types: list[_Type]) -> list[_Mode]:
    """Every type alone, and every pair of a forward type with a backward type (``B``, ``I``,
    or ``I`` with the ``W`` of the same stage fused) that saves device time."""
    pair = [inst.ticks(x) for x in inst.overlap_forward_backward or ()]
    modes = [_Mode((k,), t.duration, t.head, t.tail, t.memory) for k, t in enumerate(types)
             if t.duration > 0]
    weights: dict[int, list[int]] = {}
    for k, t in enumerate(types):
        if t.kind == Kind.W:
            weights.setdefault(t.stage, []).append(k)
    for f, tf in enumerate(types):
        if tf.kind != Kind.F:
            continue
        for b, tb in enumerate(types):
            if tb.kind not in (Kind.B, Kind.I):
                continue
            fused = weights.get(tb.stage, []) if tb.kind == Kind.I else []
            options = [(b,)] + [(b, w) for w in fused]
            for backward in options:
                members = (f, *backward)
                solo = sum(types[k].duration for k in members)
                if solo > pair[tf.stage]:  # a pair that saves nothing is dominated by solo
                    modes.append(_Mode(members, pair[tf.stage],
                                       max(types[k].head for k in members[:2]),
                                       max(types[k].tail for k in members),
                                       sum(types[k].memory for k in members)))
    return modes


def _refuted(dev: _Device, makespan: int, scale: float, limit: float | None) -> bool:
    """True when the LP of the module docstring has no solution for ``makespan`` (ticks):
    its largest coverage is below the number of actions.  Times in units of ``scale``."""
    types, modes = dev.types, dev.modes
    points = sorted({0, makespan} | {m.head for m in modes} | {makespan - m.tail for m in modes})
    points = [x for x in points if 0 <= x <= makespan]
    lp = pywraplp.Solver.CreateSolver("GLOP")
    # cover[t][j]: the actions of type t run (as a fraction of each) in interval j
    cover: list[list[list[tuple[pywraplp.Variable, float]]]] = [
        [[] for _ in points[1:]] for _ in types]
    busy: list[list[pywraplp.Variable]] = [[] for _ in points[1:]]
    for mode in modes:
        lo, hi = mode.head, makespan - mode.tail
        if hi - lo < mode.duration:
            continue  # the mode cannot run at all
        for j, (a, b) in enumerate(zip(points, points[1:], strict=False)):
            if a >= lo and b <= hi:
                z = lp.NumVar(0.0, (b - a) / scale, "")
                busy[j].append(z)
                for k in mode.members:
                    cover[k][j].append((z, scale / mode.duration))
    for k, t in enumerate(types):  # an action of no duration takes no device time
        if t.duration == 0:
            lo, hi = t.head, makespan - t.tail
            for j, (a, b) in enumerate(zip(points, points[1:], strict=False)):
                if a <= hi and b >= lo:
                    cover[k][j].append((lp.NumVar(0.0, float(t.count), ""), 1.0))
    for j, zs in enumerate(busy):  # one thing at a time
        if zs:
            lp.Add(sum(zs) <= (points[j + 1] - points[j]) / scale)
    # done[t][j]: actions of type t run before points[j] (cumulative)
    done: list[list[Any]] = []
    for t, per_type in zip(types, cover, strict=True):
        if not any(per_type):
            return True  # an action that can run nowhere
        acc: list[Any] = [0.0]
        for terms in per_type:
            if terms:
                v = lp.NumVar(0.0, float(t.count), "")
                lp.Add(v == acc[-1] + sum(w * z for z, w in terms))
                acc.append(v)
            else:
                acc.append(acc[-1])
        done.append(acc)
    for link in dev.links:  # an action starts at least `lag` after its microbatch's earlier one
        late = done[link.after]
        for j, x in enumerate(points[1:], start=1):
            y = x - link.lag + dev.longest[link.before]
            if y >= makespan or isinstance(late[j], float):
                continue
            lp.Add(late[j] <= done[link.before][bisect_left(points, y)] if y > 0 else late[j] <= 0)
    if limit is not None:  # memory at each point: forwards started minus releases ended
        for j in range(1, len(points)):
            held = [t.memory * done[k][j] for k, t in enumerate(types)
                    if t.memory and not isinstance(done[k][j], float)]
            if held:
                lp.Add(sum(held) <= limit + _MEMORY_TOLERANCE)
    total = sum(t.count for t in types)
    lp.Maximize(sum(acc[-1] for acc in done))
    if lp.Solve() != pywraplp.Solver.OPTIMAL:
        return False  # no claim without a solved LP
    return lp.Objective().Value() < total - _COVER_TOLERANCE


def _device_bound(inst: Instance, dev: _Device, lo: int, hi: int,
                  out_of_time: Callable[[], bool]) -> int:
    """The least makespan (ticks) in ``[lo, hi]`` that the LP of one device does not refute;
    ``lo`` when it refutes nothing (or ``out_of_time()`` first)."""
    scale = max(1, inst.ticks(1.0))
    limit = None if inst.memory_limit is None else float(inst.memory_limit)
    if not _refuted(dev, lo, scale, limit):
        return lo
    refuted, top = lo, hi
    while top - refuted > 1:
        if out_of_time():
            break
        mid = (refuted + top) // 2
        if _refuted(dev, mid, scale, limit):
            refuted = mid
        else:
            top = mid
    return min(refuted + 1, hi)


def pair_window_bound(inst: Instance, g: nx.DiGraph | None = None, *, lower: int = 0,
                      upper: int | None = None,
                      relaxed: tuple[dict[Action, int], HeadsTails] | None = None,
                      deadline: float | None = None,
                      stopped: Callable[[], bool] | None = None) -> int:
    """Lower bound (ticks) on the makespan of every valid schedule of ``inst``, from each
    device's pair windows (module docstring; docs/modelling.md §28); ``lower`` without an
    overlap cost.

    Args:
        g: the task graph (built when None).
        lower: a known lower bound (ticks); the result is at least this.
        upper: a known makespan (ticks) the bisection need not look beyond (default: the
            sum of all durations).
        relaxed: the graph's :func:`cpsched.graph.overlap_heads_tails` when the caller has
            them (the pair-relaxed durations, heads and tails, docs/modelling.md §4.3).
        deadline: ``time.perf_counter()`` value after which no new LP starts; the bound
            then stands at what was refuted.
        stopped: asked before each LP; True ends the bisection the same way (Ctrl-C).

    Returns:
        ``max(lower, the least makespan no device's LP refutes)``.
    """
    if inst.overlap_forward_backward is None:
        return lower
    g = build_task_graph(inst) if g is None else g
    rel, (head, tail) = overlap_heads_tails(inst, g) if relaxed is None else relaxed
    dur = nx.get_node_attributes(g, "duration")
    types = {d: _types(inst, nodes, dur, head, tail) for d, nodes in nodes_by_device(g).items()}
    sources: dict[int, set[Action]] = {}  # one microbatch of each type: its chains
    for ts in types.values():
        for t in ts:
            mb = min(t.microbatches)
            sources.setdefault(mb, set()).add(Action(t.kind, t.stage, mb))
    chains: dict[Action, dict[Action, int]] = {}
    for mb, acts in sources.items():
        chains.update(microbatch_chains(g, mb, acts, rel))

    def out_of_time() -> bool:
        return (deadline is not None and time.perf_counter() > deadline) or (
            stopped is not None and stopped())

    top = sum(dur.values()) if upper is None else upper
    best = lower
    for d in sorted(types):
        if best >= top or out_of_time():
            break
        best = max(best, _device_bound(inst, _device(inst, types[d], chains), best, top,
                                       out_of_time))
    return best
