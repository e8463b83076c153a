"""Memory-aware lower bounds on the makespan (docs/modelling.md §11, §16).

The plain bound (:func:`cpsched.graph.lower_bound`: critical path, per device head + work +
tail) ignores the memory limit.  Under a tight limit a device cannot keep busy while its
pipeline fills and drains, and these bounds count that idle time:

* :func:`fill_drain_bound` (docs/modelling.md §16): before the first backward action of a
  device can start, only forwards run there and none of their memory is freed, so the
  forward work done then is at most what fits in the limit; after the device's last forward,
  only backward work of microbatches still held remains, at most what fits in the limit,
  while the last forward's tail must still run.  An action reaches only the part of a window
  its head (tail) allows (:func:`window_idle`).  Idle time in both windows adds to the work.
* :func:`area_bound` (docs/modelling.md §11): memory–time area.  Each microbatch holds
  ``a_s`` from the start of ``F(s)`` to its release, at least the round trip ``RT_s``; the
  area ``m * sum_s a_s RT_s`` fits under ``limit`` between the first forward and the last
  release, and under the ramps near both ends: forwards, and releases, run one at a time.

* :func:`pair_fill_drain_bound` (docs/modelling.md §16.1): the same windows with overlapped
  F&B pairs.  No pair can run before a device's first backward is available nor after its last
  forward, so a forward run in the fill window or a backward in the drain window is one pair
  fewer; the device either idles there or gives up the pairs' savings.  Under a memory limit
  the windows also idle at least as :func:`fill_drain_bound`'s do (only solo actions there).

All values are integer ticks; the first two hold for every valid schedule without overlapped
F&B pairs (with pairs, durations shrink: they are not used then), the third for every valid
schedule with or without pairs.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import accumulate

import networkx as nx
from ortools.linear_solver import pywraplp

from cpsched.actions import Action, Kind
from cpsched.core import HeadsTails, heads_and_tails
from cpsched.graph import (
    build_task_graph,
    microbatch_chains,
    nodes_by_device,
    overlap_heads_tails,
    pair_savings,
)
from cpsched.instance import Instance

_EPS = 1e-6


@dataclass(frozen=True)
class DeviceMemoryBound:
    """The fill/drain bound of one device (ticks): ``value = head + work + idle_fill +
    idle_drain`` (``max`` of the two idles when the windows may meet)."""

    device: int
    value: int
    head: int
    work: int
    idle_fill: float
    idle_drain: float


def fractional_knapsack(items: Iterable[tuple[float, float, int]], capacity: float) -> float:
    """Largest total work of ``items`` ``(work, weight, copies)`` whose weights fit in
    ``capacity``, allowing fractions (an upper bound on the integral choice).

    Items of weight 0 are always taken whole.  Returns ``math.inf`` if such an item has
    infinitely many copies (never here: copies are finite)."""
    total = 0.0
    room = capacity
    rest: list[tuple[float, float, int]] = []
    for work, weight, copies in items:
        if copies <= 0 or work <= 0:
            continue
        if weight <= 0:
            total += work * copies
        else:
            rest.append((work, weight, copies))
    for work, weight, copies in sorted(rest, key=lambda x: x[0] / x[1], reverse=True):
        if room <= 0:
            break
        take = min(copies, room / weight)
        total += take * work
        room -= take * weight
    return total


@dataclass(frozen=True)
class WindowItem:
    """``copies`` alike pieces of work that may fall in a window (:func:`window_idle`):
    ``parts`` ``(ticks, reach)``, each an action of ``ticks`` that cannot use ``reach`` ticks
    at one end of the window (it starts that late at the earliest, or must end that early);
    ``weight`` the memory each copy holds; ``key`` the group whose copies share a cap."""

    parts: tuple[tuple[int, int], ...]
    weight: float
    copies: int
    key: int


def window_idle(items: list[WindowItem], limit: float, shortest: int,
                caps: Mapping[int, int] | None = None) -> float:
    """Least idle time (ticks) in a window of one device, at least ``shortest`` ticks long,
    whose work is copies of ``items`` all held at once within ``limit`` (docs/modelling.md §16).

    For a window of length ``Y``, an item can be in it only if every part's reach is at most
    ``Y``; its copies ``x_j`` (fractions allowed, ``x_j <= copies``, ``sum x_j <= caps[key]``)
    satisfy ``sum_j weight_j x_j <= limit`` and, for every reach ``r`` (0 included),
    ``sum of the parts with reach >= r <= Y - r``: the actions run one at a time, in the part
    of the window they can reach.  Between two consecutive reaches the usable items are fixed,
    and a linear program (GLOP) minimises ``Y - work``; the smallest over all such ranges is a
    lower bound (every schedule's window is a feasible point of one of them).  Ranges start
    past ``fractional_knapsack`` + the best so far are skipped: the work never exceeds that
    knapsack.  A small margin covers the solver's tolerances.  0.0 for ``shortest <= 0``.
    """
    if shortest <= 0 or not items:
        return float(max(shortest, 0))
    top = fractional_knapsack([(sum(t for t, _ in it.parts), it.weight, it.copies)
                               for it in items], limit)
    reach = [max(r for _, r in it.parts) for it in items]
    starts = sorted({shortest} | {r for r in reach if r > shortest})
    best = math.inf
    for k, lo in enumerate(starts):
        if lo - top >= best:
            break
        hi = starts[k + 1] if k + 1 < len(starts) else None
        usable = [it for it, r in zip(items, reach, strict=True) if r <= lo]
        best = min(best, _window_lp(usable, limit, lo, hi, caps or {}))
    return max(0.0, best - 1e-6 * best - 1e-3)


def _window_lp(items: list[WindowItem], limit: float, lo: int, hi: int | None,
               caps: Mapping[int, int]) -> float:
    """``min (Y - work)`` over windows ``lo <= Y <= hi`` using ``items`` (:func:`window_idle`)."""
    lp = pywraplp.Solver.CreateSolver("GLOP")
    y = lp.NumVar(lo, lp.infinity() if hi is None else hi, "Y")
    x = [lp.NumVar(0, it.copies, "") for it in items]
    pairs = list(zip(items, x, strict=True))
    if any(it.weight > 0 for it in items):
        lp.Add(lp.Sum([it.weight * v for it, v in pairs if it.weight > 0]) <= limit)
    for key, cap in caps.items():
        if any(it.key == key for it in items):
            lp.Add(lp.Sum([v for it, v in pairs if it.key == key]) <= cap)
    for r in sorted({r for it in items for t, r in it.parts if t > 0} | {0}):
        terms = [t * v for it, v in pairs for t, rr in it.parts if t > 0 and rr >= r]
        if terms:
            lp.Add(lp.Sum(terms) <= y - r)
    lp.Minimize(y - lp.Sum([sum(t for t, _ in it.parts) * v for it, v in pairs]))
    if lp.Solve() != pywraplp.Solver.OPTIMAL:
        return 0.0  # never expected (x = 0, Y = lo is feasible); 0 idle is always sound
    return lp.Objective().Value()


def _held(inst: Instance, a: Action) -> float:
    """Memory a (stage, microbatch) still holds while ``a`` (a backward action) is pending:
    everything before its ``I``/``B``, the part ``W`` releases afterwards."""
    act = inst.activation[a.stage]
    return act * (1.0 - inst.released_by_input) if a.kind == Kind.W else act


def _device_bound(inst: Instance, d: int, nodes: list[Action], dur: Mapping[Action, int],
                  head: Mapping[Action, int], tail: Mapping[Action, int],
                  limit: float) -> DeviceMemoryBound:
    t0 = min(head[a] for a in nodes)
    work = sum(dur[a] for a in nodes)
    fwd = [a for a in nodes if a.kind == Kind.F]
    if not fwd or len(fwd) == len(nodes):
        return DeviceMemoryBound(d, t0 + work, t0, work, 0.0, 0.0)
    idle_fill, idle_drain = _memory_idles(inst, nodes, dur, head, tail, limit)
    total_held = sum(inst.activation[a.stage] for a in fwd)
    # windows [t0, sigma) and [last F end, C] are disjoint when not every forward fits
    idle = idle_fill + idle_drain if total_held > limit + _EPS else max(idle_fill, idle_drain)
    value = math.ceil(t0 + work + idle - _EPS)
    return DeviceMemoryBound(d, value, t0, work, idle_fill, idle_drain)


def _memory_idles(inst: Instance, nodes: list[Action], dur: Mapping[Action, int],
                  head: Mapping[Action, int], tail: Mapping[Action, int],
                  limit: float) -> tuple[float, float]:
    """The least idle time (ticks) of one device (its actions ``nodes``, with forwards and
    backwards) in its fill and its drain window under ``limit`` (docs/modelling.md §16)."""
    t0 = min(head[a] for a in nodes)
    fwd = [a for a in nodes if a.kind == Kind.F]
    bwd = [a for a in nodes if a.kind != Kind.F]
    # fill: before the first backward starts (at least sigma) only forwards run and nothing
    # is released; a forward cannot start before its head
    sigma = min(head[a] for a in bwd)
    early = Counter((a.stage, dur[a], head[a] - t0) for a in fwd)
    idle_fill = window_idle([WindowItem(((ticks, reach),), inst.activation[s], n, s)
                             for (s, ticks, reach), n in early.items()], limit, sigma - t0)
    # drain: after the last forward (>= tau before the end) only backward work of microbatches
    # held then remains; an action must end at least its tail before the end
    tau = min(tail[a] for a in fwd)
    units: Counter[tuple[Kind, int, int, int, int, int]] = Counter()
    for a in bwd:
        w = Action(Kind.W, a.stage, a.microbatch)
        owed = (dur[w], tail[w]) if a.kind == Kind.I and w in dur else (0, 0)
        units[(a.kind, a.stage, dur[a], tail[a], *owed)] += 1
    # a pending I still owes its W: both under the I's weight; one unit per microbatch
    drain = [WindowItem(((ticks, reach), (w_ticks, w_reach)), _held(inst, Action(kind, s, 0)),
                         n, s) for (kind, s, ticks, reach, w_ticks, w_reach), n in units.items()]
    return idle_fill, window_idle(drain, limit, tau, Counter(a.stage for a in fwd))


def fill_drain_bound(inst: Instance, g: nx.DiGraph | None = None, *,
                     ht: HeadsTails | None = None) -> tuple[int, list[DeviceMemoryBound]]:
    """Lower bound (ticks) from the memory limit's fill and drain idle time on each device
    (docs/modelling.md §16), and the per-device terms.  Without a limit, or with an overlap
    cost, it is the plain per-device bound (head + work).  ``ht``: the graph's
    :func:`heads_and_tails` when the caller has them."""
    g = build_task_graph(inst) if g is None else g
    head, tail = heads_and_tails(g) if ht is None else ht
    dur = nx.get_node_attributes(g, "duration")
    limit = inst.memory_limit
    usable = limit is not None and inst.overlap_forward_backward is None
    out = []
    for d, nodes in sorted(nodes_by_device(g).items()):
        if usable:
            out.append(_device_bound(inst, d, nodes, dur, head, tail, float(limit)))
        else:
            t0, work = min(head[a] for a in nodes), sum(dur[a] for a in nodes)
            out.append(DeviceMemoryBound(d, t0 + work, t0, work, 0.0, 0.0))
    return max((b.value for b in out), default=0), out


def area_bound(inst: Instance, g: nx.DiGraph | None = None, *,
               ht: HeadsTails | None = None) -> int:
    """Memory–time area bound with fill and drain ramps (ticks, docs/modelling.md §11).

    For each device d: every buffer (a stage's activation of one microbatch, docs/spec.md §1
    memory rule) is held at least its round trip ``RT_s`` — the shortest time from the start
    of ``F(s, i)`` to the end of its releases, weighted by the fraction each frees — so the
    held memory integrates to at least ``A = sum_i sum_{s on d} a_s * RT_s``.  It is held in
    ``[t0, C - tau]`` (``t0`` the smallest head of d's forwards, ``tau`` the smallest tail of
    its backward actions), at most the limit there, and near both ends less:
    :func:`area_span` finds the shortest window ``D`` whose ramps still give ``A``, and
    ``C >= t0 + tau + D``.  0 without a limit or with an overlap cost.  ``ht``: the graph's
    :func:`heads_and_tails` when the caller has them.
    """
    limit = inst.memory_limit
    if limit is None or limit <= 0 or inst.overlap_forward_backward is not None:
        return 0
    g = build_task_graph(inst) if g is None else g
    head, tail = heads_and_tails(g) if ht is None else ht
    dev = nx.get_node_attributes(g, "device")
    dur = nx.get_node_attributes(g, "duration")
    # dependencies stay inside a microbatch, and every microbatch of one direction has the
    # same chain: compute the round trips once per direction
    reps = sorted({0, inst.m // 2} if inst.placement == "bidirectional" else {0})
    rt = {i: _round_trips(inst, g, i) for i in reps}
    area: dict[int, float] = {}
    ramps: dict[int, _Ramps] = {}
    for a in g:
        d = dev[a]
        r = ramps.setdefault(d, _Ramps())
        if a.kind == Kind.F:
            rep = reps[-1] if a.microbatch >= reps[-1] else reps[0]
            area[d] = area.get(d, 0.0) + inst.activation[a.stage] * rt[rep][a.stage]
            r.add_forward(head[a], dur[a], inst.activation[a.stage])
        else:
            r.add_backward(tail[a], _release_ticks(inst, a, dur[a]))
    return max((r.t0 + r.tau + area_span(total, limit, r.amount, r.forward, r.release)
                for d, total in area.items() if (r := ramps[d]).amount > 0), default=0)


@dataclass
class _Ramps:
    """Per device: smallest forward head ``t0``, smallest backward tail ``tau``, largest
    activation ``amount``, shortest forward and shortest release (ticks)."""

    t0: int = 2**62
    tau: int = 2**62
    amount: float = 0.0
    forward: int = 2**62
    release: int = 2**62

    def add_forward(self, head: int, duration: int, amount: float) -> None:
        self.t0, self.forward = min(self.t0, head), min(self.forward, duration)
        self.amount = max(self.amount, amount)

    def add_backward(self, tail: int, release: int | None) -> None:
        self.tau = min(self.tau, tail)
        if release is not None:
            self.release = min(self.release, release)


def _release_ticks(inst: Instance, a: Action, duration: int) -> int | None:
    """Shortest duration (ticks) of an action that can free ``a``'s stage's memory in
    ``a``'s place: ``B``; ``I`` when it frees a share (``r > 0``); ``W`` when it does
    (``r < 1``); with split backward also a fused ``B``, which lasts ``I + W``, at least
    either.  None: ``a`` frees nothing."""
    if a.kind == Kind.I and inst.released_by_input <= 0:
        return None
    if a.kind == Kind.W and inst.released_by_input >= 1:
        return None
    return duration


def area_span(area: float, limit: float, amount: float, forward: int, release: int) -> int:
    """The shortest window ``D`` (integer ticks) in which a device can hold ``area``
    (memory x ticks), docs/modelling.md §11.

    At ``u`` ticks after the first forward starts at most ``1 + u / forward`` forwards have
    started (they run one at a time), and ``u`` ticks before the last release ends at most
    ``1 + u / release`` releases are still to end; each holds or frees at most ``amount``.
    So the memory held at ``u`` in a window of length ``D`` is at most
    ``h(u) = min(limit, amount * (1 + u / forward), amount * (1 + (D - u) / release))``, and
    the result is the smallest ``D`` with ``integral_0^D h >= area`` (``h`` is piecewise
    linear: exact trapezoids).  At least ``area / limit``, the plain area bound.
    """
    if area <= 0:
        return 0
    target = area * (1 - 1e-9) - _EPS  # float noise may only weaken the bound
    lo = max(0, math.floor(area / limit) - 1)
    hi = math.ceil(area / limit + (forward + release) * (limit / amount + 1)) + 1
    while lo < hi:  # smallest D with _held_integral(D) >= target (monotone in D)
        mid = (lo + hi) // 2
        if _held_integral(mid, limit, amount, forward, release) >= target:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _held_integral(D: int, limit: float, amount: float, forward: int, release: int) -> float:
    """``integral_0^D h(u) du`` of :func:`area_span` (trapezoids between the kinks); a
    zero-length forward or release puts no ramp on its side."""

    def ramp(x: float, step: int) -> float:
        return amount * (1 + x / step) if step > 0 else math.inf

    def h(u: float) -> float:
        return min(limit, ramp(u, forward), ramp(D - u, release))

    full = limit / amount - 1  # steps until a ramp reaches the limit
    kinks = {0.0, float(D), forward * full, D - release * full,
             D * forward / (forward + release) if forward + release > 0 else 0.0}
    pts = sorted(x for x in kinks if 0 <= x <= D)
    return sum((b - a) * (h(a) + h(b)) / 2 for a, b in zip(pts, pts[1:], strict=False))


def _round_trips(inst: Instance, g: nx.DiGraph, i: int) -> dict[int, float]:
    """``{stage: RT}`` for microbatch ``i``: shortest time from the start of ``F(s, i)`` to
    the end of its releases, weighted by the fraction each frees (ticks)."""
    chains = microbatch_chains(g, i, [Action(Kind.F, s, i) for s in range(inst.num_stages)])

    def to_end(s: int, kind: Kind) -> int:  # start of F(s, i) to the end of (kind, s, i)
        a = Action(kind, s, i)
        return chains[Action(Kind.F, s, i)][a] + g.nodes[a]["duration"]

    if not inst.split_backward:
        return {s: to_end(s, Kind.B) for s in range(inst.num_stages)}
    r = inst.released_by_input
    return {s: r * to_end(s, Kind.I) + (1 - r) * to_end(s, Kind.W)
            for s in range(inst.num_stages)}


def pair_fill_drain_bound(inst: Instance, g: nx.DiGraph | None = None, *,
                          relaxed: tuple[dict[Action, int], HeadsTails] | None = None) -> int:
    """Lower bound (ticks) for instances with ``overlap_forward_backward``, from the time no
    pair can run (docs/modelling.md §16.1); 0 without an overlap cost.

    Per device ``d``, with the pair-relaxed heads and tails of docs/modelling.md §4.3
    (:func:`cpsched.graph.overlap_relaxed_durations`): before ``sigma`` (the smallest head of
    a backward on ``d``) only solo forwards run; after the end of ``d``'s last forward (at
    least ``tau``, the smallest tail of a forward, before the makespan) only solo backward
    work.  If ``L`` of the ``K = min(#F, #B)`` possible pairs are not formed, at most
    ``#F - K + L`` forwards fill the first window and at most ``#B - K + L`` backward units
    the second, and the ``L`` smallest savings are lost::

        C >= t0 + work - savings(K) + min_L [lost(L) + idle_fill + idle_drain]

    (``max`` of the two idles when ``L = K`` and every forward fits in the limit: the windows
    may then meet).  Under a memory limit each idle is at least the window's memory idle of
    :func:`fill_drain_bound` (:func:`window_idle`, only solo actions run there).  ``savings`` is
    the per-pair ``F(s) + B - overlap[s]`` of §4.3 (:func:`cpsched.graph.pair_savings`).
    ``relaxed``: the graph's :func:`cpsched.graph.overlap_heads_tails` when the caller has
    them.
    """
    if inst.overlap_forward_backward is None:
        return 0
    g = build_task_graph(inst) if g is None else g
    _, (head, tail) = overlap_heads_tails(inst, g) if relaxed is None else relaxed
    dur = nx.get_node_attributes(g, "duration")
    return max((_pair_device_bound(inst, nodes, dur, head, tail)
                for nodes in nodes_by_device(g).values()), default=0)


def _pair_device_bound(inst: Instance, nodes: list[Action], dur: Mapping[Action, int],
                       head: Mapping[Action, int], tail: Mapping[Action, int]) -> int:
    """:func:`pair_fill_drain_bound` of one device (its actions ``nodes``)."""
    t0 = min(head[a] for a in nodes)
    work = sum(dur[a] for a in nodes)
    fwd = [a for a in nodes if a.kind == Kind.F]
    first_bwd = [a for a in nodes if a.kind in (Kind.B, Kind.I)]
    if not fwd or not first_bwd:
        return t0 + work
    # a backward unit: B, or I + W (a pair may run it fused: docs/modelling.md §15)
    units = sorted((inst.ticks(inst.backward[a.stage]) for a in first_bwd), reverse=True)
    saving = pair_savings(inst, nodes, dur)
    k = len(saving)
    sigma = min(head[a] for a in first_bwd)
    early = sorted((dur[a] for a in fwd if head[a] < sigma), reverse=True)
    tau = min(tail[a] for a in fwd)
    fill_prefix = list(accumulate(early, initial=0))
    drain_prefix = list(accumulate(units, initial=0))
    spare_f, spare_b = len(fwd) - k, len(units) - k
    # under a limit the windows' idle is also at least the memory one (solo actions there)
    limit = inst.memory_limit
    mem_fill, mem_drain = (0.0, 0.0) if limit is None else \
        _memory_idles(inst, nodes, dur, head, tail, float(limit))
    apart = limit is not None and sum(inst.activation[a.stage] for a in fwd) > limit + _EPS
    best = math.inf
    lost = 0
    for n_lost in range(k + 1):
        if n_lost:
            lost += saving[k - n_lost]  # the smallest savings go first
        x = min(len(early), spare_f + n_lost)
        y = min(len(units), spare_b + n_lost)
        idle_fill = max(sigma - t0 - fill_prefix[x], mem_fill, 0)
        idle_drain = max(tau - drain_prefix[y], mem_drain, 0)
        together = n_lost < k or apart
        idle = idle_fill + idle_drain if together else max(idle_fill, idle_drain)
        best = min(best, lost + idle)
    return math.ceil(t0 + work - sum(saving) + best - _EPS)
