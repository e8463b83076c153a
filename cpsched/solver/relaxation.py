"""The one-device relaxation bound (docs/modelling.md §21).

Keep one device ``d`` as it is — its actions, ``NoOverlap``, its memory limit — and give every
other device unlimited capacity.  What the other devices do then shrinks to fixed time lags:
an action of ``d`` cannot start before its head (the longest chain before it), the makespan is
at least its end plus its tail, and two actions of ``d`` in one microbatch are at least the
longest chain between them apart.  Every schedule of the instance, restricted to ``d``, is a
schedule of this relaxation with the same makespan or less, so the relaxation's optimum — or
any lower bound CP-SAT proves on it — is a lower bound on the instance's optimum.

On memory-capped instances this is where the bound gains: the device must interleave its
forwards and backwards so that few microbatches are live, and its own actions then collide
(e.g. p=4 v=2 m=16 F=5 B=10 limit 6: the other bounds give 555, this one 590, best schedule
known 595).  The model is small (one device's actions), FIFO per (kind, stage, direction) and
the implied memory precedences hold in it for the same reasons as in the full model
(docs/modelling.md §1, §2, §14).

Minimising the relaxed makespan can stall at the bound it starts from while the decision
"makespan at most T?" is refuted at once for T above it, so a ladder of such decisions runs
first (:func:`_ladder`, docs/modelling.md §21: p=8 v=2 m=16 profiled, limit 1: 205.073 →
207.983 within one deterministic unit).

Several neighbouring devices can be kept together the same way, each with its own
``NoOverlap`` and memory limit (:func:`relaxed_groups`, docs/modelling.md §31): every schedule
restricted to them is a schedule of that relaxation too, and it sees how their limits pace
each other, which one device alone cannot.  The same holds for devices that are not
neighbours: device 0, paced by its memory, with the last device, where every round trip
turns and which carries the most work (§35).

With an overlap cost the kept device also has its F&B pairs
(:mod:`cpsched.solver.relaxation_pairs`, docs/modelling.md §29); ``solve`` runs that version
before the search (:func:`cpsched.solver.prelude.pair_relaxation`, ``pairs=True``) and this
one after it.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import chain
from typing import Any

import networkx as nx
from ortools.sat.python import cp_model

from cpsched.actions import Action
from cpsched.core import HeadsTails
from cpsched.graph import memory_buffers, microbatch_chains, overlap_relaxed_durations
from cpsched.instance import Instance
from cpsched.schedules.transforms import direction
from cpsched.solver.constraints import (
    fifo_pairs,
    footprint_precedence_pairs,
    memory_precedence_pairs,
)
from cpsched.solver.cpsat import solve_model
from cpsched.solver.relaxation_pairs import DeviceActions, RelaxedModel, pair_relaxed_model
from cpsched.solver.side_by_side import SolverHub, side_by_side

#: Devices with more actions than this are not relaxed (the model would not be small).
MAX_ACTIONS = 200
#: Devices kept together in the group relaxation, and their most actions in all
#: (docs/modelling.md §31: three devices of 48 and of 72 actions solved in 3-30 s on one
#: worker; groups of 288 and 432 actions undecided in 40-60 s)
GROUP_SIZE, MAX_GROUP_ACTIONS = 3, 240
#: Fewest seconds worth starting a group with (under a time limit)
GROUP_MIN_SECONDS = 1.0
#: The same for the relaxation with overlapped pairs (docs/modelling.md §29): CP-SAT solved
#: it on devices of 24 and 36 actions within seconds, never on 48 or more (72, 96) in 40 s.
MAX_PAIR_ACTIONS = 48


@dataclass(frozen=True)
class DeviceRelaxation:
    """The relaxation of one device (or a group of devices, a tuple; docs/modelling.md §31):
    ``bound`` (ticks, proven), whether CP-SAT ``solved`` it to optimality, and its
    ``seconds``."""

    device: int | tuple[int, ...]
    bound: int
    solved: bool
    seconds: float


def _representatives(inst: Instance) -> dict[int, int]:
    """``{microbatch: representative}``: every microbatch of a direction has the same chain
    (durations and lags depend on the stage and direction only)."""
    reps: dict[int, int] = {}
    first: dict[int, int] = {}
    for i in range(inst.m):
        reps[i] = first.setdefault(direction(inst, i), i)
    return reps


def _device_lags(inst: Instance, g: nx.DiGraph, rel: Mapping[Action, int],
                 nodes: list[Action]) -> list[tuple[Action, Action, int]]:
    """Lags between the device's actions of each microbatch, computed once per direction
    along chains of the durations ``rel`` (the graph's, or the pair-relaxed ones)."""
    reps = _representatives(inst)
    by_mb: dict[int, list[Action]] = {}
    for a in nodes:
        by_mb.setdefault(a.microbatch, []).append(a)
    rep_lags: dict[int, list[tuple[Action, Action, int]]] = {}
    for r in set(reps.values()) & set(by_mb):
        # longest chain from the end of a to the start of b, for a, b on the device
        chains = microbatch_chains(g, r, by_mb[r], rel)
        rep_lags[r] = [(a, b, chains[a][b] - rel[a]) for a in by_mb[r] for b in by_mb[r]
                       if b != a and b in chains[a]]
    return [(Action(a.kind, a.stage, i), Action(b.kind, b.stage, i), lag)
            for i in by_mb for a, b, lag in rep_lags.get(reps[i], [])]


def _memory(inst: Instance, rm: RelaxedModel, horizon: int, dev: DeviceActions) -> None:
    """Each kept device's memory limit (cumulative over the live intervals of its buffers,
    :func:`cpsched.graph.memory_buffers`, each from its ``F``'s start to its release's end)
    and the implied FIFO memory and footprint precedences among the kept actions
    (docs/modelling.md §2, §14)."""
    pool, buffers = memory_buffers(inst)
    if pool is None:
        return
    m, start, end = rm.model, rm.start, rm.end
    held: dict[int, tuple[list[cp_model.IntervalVar], list[int]]] = {}
    for f, rel, amount in buffers:
        if f in start:
            size = m.new_int_var(0, horizon, "")
            m.add(size == end[rel] - start[f])
            ivs, amounts = held.setdefault(dev.owner(f), ([], []))
            ivs.append(m.new_interval_var(start[f], size, end[rel], ""))
            amounts.append(amount)
    for ivs, amounts in held.values():
        if sum(amounts) > pool:
            m.add_cumulative(ivs, amounts, pool)
    pairs = inst.overlap_forward_backward is not None
    for f, rel in chain(memory_precedence_pairs(inst, pairs), footprint_precedence_pairs(inst)):
        if f in start and rel in start:
            m.add(start[f] >= end[rel])


def relaxed_model(inst: Instance, ht: HeadsTails, dev: DeviceActions, lower: int,
                  upper: int) -> RelaxedModel:
    """The relaxation of one device (``dev``, durations in ticks) as a CP-SAT model whose
    makespan lies in ``[lower, upper]`` (ticks), with overlapped pairs when the instance
    has an overlap cost (:func:`cpsched.solver.relaxation_pairs.pair_relaxed_model`)."""
    rm = (_plain_model(inst, ht, dev, lower, upper) if inst.overlap_forward_backward is None
          else pair_relaxed_model(inst, ht, dev, lower, upper))
    _memory(inst, rm, upper, dev)
    return rm


def _plain_model(inst: Instance, ht: HeadsTails, dev: DeviceActions, lower: int,
                 upper: int) -> RelaxedModel:
    """The relaxation without pairs (:func:`relaxed_model`) before its memory: every action
    alone, ends ``start + duration``."""
    head, tail = ht
    dur = dev.dur
    m = cp_model.CpModel()
    start = {a: m.new_int_var(head[a], max(head[a], upper - dur[a] - tail[a]), "s")
             for a in dev.nodes}
    for nodes in dev.per_device():
        m.add_no_overlap([m.new_fixed_size_interval_var(start[a], dur[a], "") for a in nodes])
    for a, b, lag in dev.lags:
        m.add(start[b] >= start[a] + dur[a] + lag)
    for a, nxt in fifo_pairs(inst, start):  # FIFO: docs/modelling.md §1
        m.add(start[nxt] >= start[a] + dur[a])
    makespan = m.new_int_var(lower, upper, "makespan")
    for a in dev.nodes:
        m.add(makespan >= start[a] + dur[a] + tail[a])
    return RelaxedModel(m, dict(start), {a: start[a] + dur[a] for a in dev.nodes}, makespan)


@dataclass
class _Budget:
    """What is left of a relaxation's budget: CP-SAT deterministic units and, if given,
    wall seconds (each run's own use is taken off)."""

    deterministic: float
    wall: float | None

    def spend(self, solver: cp_model.CpSolver, seconds: float) -> None:
        """Take off ``solver``'s deterministic time and ``seconds`` of wall time (the
        model's build as well as its solve: a device with pairs has thousands of candidate
        pairs to build at every question)."""
        self.deterministic -= solver.deterministic_time
        if self.wall is not None:
            self.wall -= seconds

    def left(self) -> bool:
        return self.deterministic > 1e-3 and (self.wall is None or self.wall > 0.05)


def _solver(deterministic: float, wall: float | None,
            on_solver: Callable[[cp_model.CpSolver], None] | None) -> cp_model.CpSolver:
    """A one-worker solver within ``deterministic`` units and ``wall`` seconds."""
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.catch_sigint_signal = False  # Ctrl-C is the caller's
    solver.parameters.max_deterministic_time = max(1e-3, deterministic)
    if wall is not None:
        solver.parameters.max_time_in_seconds = max(0.01, wall)
    if on_solver is not None:
        on_solver(solver)
    return solver


#: share of a relaxation's budget for the makespan ladder, and of the ladder's for one question
LADDER_SHARE, QUESTION_SHARE = 0.5, 0.125
#: the ladder's first step is the gap over this many (ticks, at least 1)
LADDER_STEPS = 64


def _ladder(inst: Instance, ht: HeadsTails, dev: DeviceActions, lower: int, upper: int,
            budget: _Budget, on_solver: Callable[[cp_model.CpSolver], None] | None,
            stopped: Callable[[], bool]) -> tuple[int, int]:
    """The makespan ladder (docs/modelling.md §21): short decision runs "a relaxed schedule
    of makespan at most ``T``?" from ``lower`` upward.  INFEASIBLE proves the relaxation's
    optimum, hence the instance's, above ``T``; a schedule found lowers the upper end; an
    undecided question halves the step, and the ladder ends when a one-tick step is
    undecided or the budget is spent.

    Returns:
        ``(lo, hi)`` in ticks: the relaxation's optimum is proven in ``[lo, hi]``.
    """
    _, tail = ht
    lo, hi = lower, upper
    step = max(1, (hi - lo) // LADDER_STEPS)
    units = budget.deterministic * QUESTION_SHARE
    wall = None if budget.wall is None else budget.wall * QUESTION_SHARE
    while lo < hi and budget.left() and not stopped():
        t = min(hi - 1, lo + step - 1)
        began = time.perf_counter()
        rm = relaxed_model(inst, ht, dev, lo, t)
        built = time.perf_counter() - began
        solver = _solver(min(budget.deterministic, units),
                         None if wall is None else min(budget.wall - built, wall), on_solver)
        code = solve_model(solver, rm.model)
        budget.spend(solver, time.perf_counter() - began)
        if code == cp_model.INFEASIBLE:
            lo, step = t + 1, 2 * step
        elif code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            hi = max(lo, max(solver.value(rm.end[a]) + tail[a] for a in dev.nodes))
        elif step == 1:
            break
        else:
            step = max(1, step // 2)
    return lo, hi


def kept_actions(inst: Instance, g: nx.DiGraph, d: int | tuple[int, ...]) -> DeviceActions:
    """The actions of device ``d`` (or of a group of devices, a tuple) with their durations
    and the lags between them through the other devices, as the relaxation keeps them."""
    dur: dict[Action, int] = nx.get_node_attributes(g, "duration")
    rel = overlap_relaxed_durations(inst, g)  # the durations themselves without pairs
    device = nx.get_node_attributes(g, "device")
    group = isinstance(d, tuple)
    kept = set(d) if group else {d}
    nodes = [a for a in g if device[a] in kept]
    return DeviceActions(nodes, dur, rel, _device_lags(inst, g, rel, nodes),
                         {a: device[a] for a in nodes} if group else None)


def relax_device(inst: Instance, g: nx.DiGraph, ht: HeadsTails, d: int | tuple[int, ...],
                 lower: int, upper: int, *, deterministic_time: float,
                 time_limit: float | None = None,
                 on_solver: Callable[[cp_model.CpSolver], None] | None = None,
                 stopped: Callable[[], bool] = lambda: False) -> DeviceRelaxation:
    """Bound the relaxation of device ``d`` (see the module docstring) — or of a group of
    devices kept together, a tuple ``d`` (docs/modelling.md §31; not with an overlap cost)
    — with CP-SAT, one worker, within ``deterministic_time`` units (and ``time_limit`` wall
    seconds, if given): first the makespan ladder (:func:`_ladder`, :data:`LADDER_SHARE` of
    the budget), then minimising the makespan between the ladder's ends with what is left.

    Args:
        g, ht: the task graph (:func:`cpsched.graph.build_task_graph`) and its heads and tails
            (with an overlap cost the pair-relaxed ones, :func:`cpsched.graph.overlap_heads_tails`).
        lower, upper: a known lower bound and a known makespan (ticks); the relaxation's
            optimum is searched in between.
        on_solver: called with each ``CpSolver`` before it solves (Ctrl-C: its
            ``stop_search()``; the bound proven so far is kept).
        stopped: whether a stop was asked for (no further CP-SAT run starts).

    Returns:
        :class:`DeviceRelaxation` whose ``bound`` is proven (at least ``lower``, at most
        ``upper``); ``solved`` when it is the relaxation's optimum.
    """
    dev = kept_actions(inst, g, d)
    group = isinstance(d, tuple)
    # a group minimises at once: its ladder's questions just below the optimum stay
    # undecided where minimising proves it (docs/modelling.md §31)
    share = 0.0 if group else LADDER_SHARE
    budget = _Budget(deterministic_time * share,
                     None if time_limit is None else time_limit * share)
    t0 = time.perf_counter()
    lo, hi = _ladder(inst, ht, dev, lower, upper, budget, on_solver, stopped) if share else (
        lower, upper)
    if lo >= hi or stopped():
        return DeviceRelaxation(d, min(lo, upper), lo >= hi, time.perf_counter() - t0)
    budget.deterministic += deterministic_time * (1 - share)
    if budget.wall is not None and time_limit is not None:
        budget.wall += time_limit * (1 - share)
    began = time.perf_counter()
    rm = relaxed_model(inst, ht, dev, lo, hi)
    rm.model.minimize(rm.makespan)
    built = time.perf_counter() - began
    solver = _solver(budget.deterministic, None if budget.wall is None else budget.wall - built,
                     on_solver)
    code = solve_model(solver, rm.model)
    seconds = time.perf_counter() - t0
    if code == cp_model.INFEASIBLE:  # no schedule below hi: hi is optimal for d
        return DeviceRelaxation(d, hi, True, seconds)
    bound = max(lo, int(math.ceil(solver.best_objective_bound - 1e-9)))
    return DeviceRelaxation(d, min(bound, hi), code == cp_model.OPTIMAL, seconds)


def pressured_devices(inst: Instance, g: nx.DiGraph, ht: HeadsTails, top: int) -> list[int]:
    """The ``top`` devices most likely to give the best relaxation: the devices holding a
    first stage (the longest round trips: device 0, and p - 1 under bidirectional placement),
    then the highest per-device fill/drain bound (docs/modelling.md §16), ties to the lower
    index."""
    from cpsched.bounds import fill_drain_bound

    first = [0, inst.p - 1] if inst.placement == "bidirectional" else [0]
    if top <= len(first):
        return first[:top]
    per_device = fill_drain_bound(inst, g, ht=ht)[1]
    ranked = [b.device for b in sorted(per_device, key=lambda b: (-b.value, b.device))]
    return list(dict.fromkeys(first + ranked))[:top]


def _device_counts(g: nx.DiGraph) -> Counter[int]:
    """Actions of the task graph ``g`` per device."""
    return Counter(nx.get_node_attributes(g, "device").values())


def _after_search(inst: Instance) -> bool:
    """Whether the relaxation after the search applies to ``inst`` at all: a memory limit
    and no overlap cost (docs/modelling.md §21; with one, the relaxation with pairs runs
    before the search, §29)."""
    return inst.memory_limit is not None and inst.overlap_forward_backward is None


def may_follow_search(inst: Instance) -> bool:
    """Whether the one-device relaxation may run after the search on ``inst``
    (:func:`relaxed_devices` without ``pairs`` may name a device): it applies and a device
    holds at most :data:`MAX_ACTIONS` actions (every device holds ``n_actions / p``).
    :func:`cpsched.solver.prelude.search_share` leaves it time then (§33)."""
    return _after_search(inst) and inst.n_actions // inst.p <= MAX_ACTIONS


def relaxed_devices(inst: Instance, g: nx.DiGraph, ht: HeadsTails, top: int = 1, *,
                    pairs: bool = False) -> list[int]:
    """The devices the relaxation runs on: the ``top`` most pressured
    (:func:`pressured_devices`) with at most :data:`MAX_ACTIONS` actions
    (:data:`MAX_PAIR_ACTIONS` with ``pairs``).  Without
    ``pairs`` none without a memory limit or with an overlap cost (the relaxation after the
    search, docs/modelling.md §21); with ``pairs`` none *without* an overlap cost (the
    relaxation with pairs before the search, limit or not, §29)."""
    if not (inst.overlap_forward_backward is not None if pairs else _after_search(inst)):
        return []
    counts = _device_counts(g)
    most = MAX_PAIR_ACTIONS if pairs else MAX_ACTIONS
    return [d for d in pressured_devices(inst, g, ht, top) if counts[d] <= most]


def relaxed_groups(inst: Instance, g: nx.DiGraph) -> list[tuple[int, ...]]:
    """The groups of devices the relaxation keeps together after the single devices
    (docs/modelling.md §31, §35), each with at most :data:`MAX_GROUP_ACTIONS` actions
    together and fewer than ``p`` devices (all of them is the full model):

    - under loop and V placement first the *turn pair*: device 0 with the last device
      ``p - 1``, where every microbatch turns from its forwards to its backwards, so every
      round trip from device 0 passes it, then devices 0, 1 and ``p - 1`` (the *turn
      triple*; before devices 0-2 since session 31: it proved more on every instance
      measured, docs/modelling.md §36);
    - devices ``0, 1, ...`` — under bidirectional placement also ``p - 1, p - 2, ...`` — as
      many as :data:`GROUP_SIZE`, at least two.

    None without a memory limit or with an overlap cost (as the single devices after the
    search, :func:`relaxed_devices`)."""
    if not _after_search(inst):
        return []
    counts = _device_counts(g)
    last = inst.p - 1
    if inst.placement == "bidirectional":
        runs = [list(range(inst.p)), list(range(last, -1, -1))]
    else:
        runs = [[0, last], [0, 1, last], list(range(inst.p))]
    groups: list[tuple[int, ...]] = []
    for devices in runs:
        kept: list[int] = []
        for d in dict.fromkeys(devices):
            if (len(kept) == min(GROUP_SIZE, inst.p - 1)
                    or sum(counts[k] for k in kept) + counts[d] > MAX_GROUP_ACTIONS):
                break
            kept.append(d)
        if len(kept) >= 2 and tuple(sorted(kept)) not in groups:
            groups.append(tuple(sorted(kept)))
    return groups


class _Queue:
    """What :func:`relaxation_bound` relaxes, in order — ``(device or group, whether a group,
    how many of its kind, its index among them)`` — taken one at a time by each worker,
    with the best bound so far and every result (under a lock: workers run side by side)."""

    def __init__(self, items: list[tuple[Any, bool, int, int]], lower: int) -> None:
        self.items, self.taken = items, 0
        self.value, self.out, self.lock = lower, [], threading.Lock()

    def take(self) -> tuple[Any, bool, int, int] | None:
        with self.lock:
            self.taken += 1
            return self.items[self.taken - 1] if self.taken <= len(self.items) else None

    def add(self, r: DeviceRelaxation) -> None:
        with self.lock:
            self.out.append(r)
            self.value = max(self.value, r.bound)


def _worker(inst: Instance, g: nx.DiGraph, ht: HeadsTails, queue: _Queue, upper: int, *,
            workers: int, began: float, deterministic_time: float, time_limit: float | None,
            on_solver: Callable[[cp_model.CpSolver], None] | None,
            stopped: Callable[[], bool]) -> None:
    """Relax what ``queue`` gives, one after the other, each from the best bound so far
    (the budgets of :func:`relaxation_bound`; ``began``: when its time limit started)."""
    while (item := queue.take()) is not None:
        d, group, n, k = item
        if queue.value >= upper or stopped():
            return
        left = None if time_limit is None else time_limit - (time.perf_counter() - began)
        # single devices share the time left with those no other worker will run
        wall = left if left is None or group else left / max(1, n - k - (workers - 1))
        if wall is not None and wall <= (GROUP_MIN_SECONDS if group else 0.05):
            return
        queue.add(relax_device(inst, g, ht, d, queue.value, upper,
                               deterministic_time=deterministic_time / n, time_limit=wall,
                               on_solver=on_solver, stopped=stopped))


def relaxation_bound(inst: Instance, g: nx.DiGraph, ht: HeadsTails, lower: int, upper: int,
                     *, deterministic_time: float, time_limit: float | None = None,
                     top: int = 1, on_solver: Callable[[cp_model.CpSolver], None] | None = None,
                     stopped: Callable[[], bool] = lambda: False, pairs: bool = False,
                     parallel: bool = False) -> tuple[int, list[DeviceRelaxation]]:
    """The best one-device relaxation bound (ticks) over the ``top`` most pressured devices
    (:func:`pressured_devices`) and, without ``pairs``, the groups of devices kept together
    (:func:`relaxed_groups`, docs/modelling.md §31), and each one's result.

    The budget — ``deterministic_time`` (CP-SAT's deterministic units, reproducible) and
    ``time_limit`` (wall seconds, if given): the single devices of :func:`relaxed_devices`
    first, sharing both evenly; then the groups in their order (the turn pair, the turn
    triple, the first devices: docs/modelling.md §31, §35, §36), each with all the wall time
    left (what one leaves goes to the next) and an even share of the deterministic units.  With
    ``parallel`` and a ``time_limit`` two workers take them in that order side by side, in
    two threads (docs/modelling.md §36: two cores, one CP-SAT worker each): device 0 and the
    turn pair start together, and the first to reach ``upper`` stops the other.  ``lower``
    is returned when there are none or ``lower >= upper``.  Each starts from the best bound
    so far.  ``on_solver`` and ``stopped`` as in :func:`relax_device` (side by side
    ``on_solver`` receives one :class:`~cpsched.solver.side_by_side.SolverHub` that stops
    both); ``pairs`` as in :func:`relaxed_devices` (then ``ht`` are the pair-relaxed heads
    and tails).
    """
    singles = [] if lower >= upper else relaxed_devices(inst, g, ht, top, pairs=pairs)
    groups = relaxed_groups(inst, g) if singles and not pairs else []
    queue = _Queue([(d, False, len(singles), k) for k, d in enumerate(singles)]
                   + [(d, True, len(groups), k) for k, d in enumerate(groups)], lower)
    workers = 2 if parallel and time_limit is not None and len(queue.items) > 1 else 1
    budget = {"workers": workers, "began": time.perf_counter(),
              "deterministic_time": deterministic_time, "time_limit": time_limit}
    if workers == 1:
        _worker(inst, g, ht, queue, upper, **budget, on_solver=on_solver, stopped=stopped)
        return queue.value, queue.out

    def run(hub: SolverHub) -> None:
        _worker(inst, g, ht, queue, upper, **budget, on_solver=hub.add, stopped=hub.done)
        if queue.value >= upper:  # proven: the other worker has nothing left to do
            hub.stop_search()

    side_by_side([run] * workers, on_solver=on_solver, stopped=stopped)
    return queue.value, queue.out


__all__ = ["GROUP_SIZE", "MAX_ACTIONS", "MAX_GROUP_ACTIONS", "MAX_PAIR_ACTIONS",
           "DeviceRelaxation", "pressured_devices", "relax_device", "relaxation_bound",
           "may_follow_search", "relaxed_devices", "relaxed_groups"]
