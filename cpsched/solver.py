"""The CP-SAT model: a provably optimal schedule for an instance (SPEC §1, DESIGN-NOTES).

Model (all times in integer ticks, :meth:`Instance.ticks`):

* one fixed-size interval per action (``F`` and ``B``, or ``F``, ``I``, ``W`` with split
  backward; a fused ``B`` outside an overlapped pair is never better than ``I`` then ``W`` back
  to back, so the model splits), its start bounded by the ASAP/ALAP window of the task graph
  against the horizon;
* ``start(v) >= end(u) + lag`` for every dependency (p2p latency across devices);
* ``NoOverlap`` per device;
* FIFO microbatch order per (kind, stage) — and per direction with ``bidirectional``
  placement — as symmetry breaking (DESIGN-NOTES 1: valid, since costs and memory depend on
  the stage only);
* the memory limit as one ``Cumulative`` per device over the live intervals ``[start F,
  end release)`` plus, as implied constraints, per-stage precedences
  ``start(F, s, i + k) >= end(release, s, i)`` (DESIGN-NOTES 2);
* ``makespan >= `` the combinatorial lower bound (DESIGN-NOTES 4) and ``<=`` the horizon (the
  best valid warm start's makespan), with a *complete* hint from that schedule (DESIGN-NOTES 6).

With ``overlap_forward_backward`` the model also covers overlapped F&B pairs (DualPipe-style):
optional intervals per action and per candidate pair, pairs with a fused backward under split
backward, the bound of :func:`~cpsched.graph.overlap_lower_bound` (see :class:`PipelineModel`).
The optimum is then over all valid schedules, pairs included, unless the candidate pairs had
to be restricted (:data:`MAX_PAIRS`; the result says so and claims only the combinatorial
bound).  Without an overlap cost the model is exactly the one above.

:func:`solve` never raises on a time limit and never returns something worse than its hint.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ortools.sat.python import cp_model

from cpsched.core import ResourceGraph, Task, check_starts, list_schedule
from cpsched.graph import (
    build_task_graph,
    heads_and_tails,
    lower_bound,
    overlap_lower_bound,
    overlap_relaxed_durations,
    pipeline_resource_graph,
    release_actions,
    windows,
)
from cpsched.instance import Instance
from cpsched.model import Action, Kind, Schedule, TimedAction
from cpsched.simulate import simulate
from cpsched.validate import validate

#: ``on_progress(elapsed_seconds, incumbent, bound)`` in the instance's time units.
ProgressCallback = Callable[[float, float | None, float | None], None]


@dataclass
class Result:
    """Outcome of :func:`solve`.

    Attributes:
        status: ``OPTIMAL`` (makespan == proven bound), ``FEASIBLE`` (a schedule, gap > 0),
            ``INFEASIBLE`` or ``UNKNOWN`` (no schedule).
        schedule: the best schedule (None when infeasible/unknown), validated.
        makespan / lower_bound: in the instance's time units.
        gap: ``(makespan - lower_bound) / makespan``.
        solve_seconds: wall time of the whole call.
        hint_method: the warm start used (registry name), or None.
        solver_status: CP-SAT's own status name.
        message: why infeasible / unknown, or notes.
    """

    status: str
    schedule: Schedule | None
    makespan: float | None
    lower_bound: float | None
    gap: float | None
    solve_seconds: float
    hint_method: str | None = None
    solver_status: str = ""
    message: str = ""
    stats: dict[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------- helpers
def _direction(inst: Instance, i: int) -> int:
    return 1 if inst.placement == "bidirectional" and i >= inst.m // 2 else 0


def split_fused(schedule: Schedule) -> list[TimedAction]:
    """A schedule's actions with every fused ``B`` of a split instance that is not part of an
    overlapped F&B pair turned into ``I`` then ``W`` back to back (never worse: memory is
    released no later).  Overlapped pairs are kept as they are."""
    inst = schedule.instance
    out: list[TimedAction] = []
    for a in schedule.actions:
        if a.kind == Kind.B and inst.split_backward and a.overlap is None:
            mid = inst.from_ticks(inst.ticks(a.start) + inst.ticks(inst.backward_input[a.stage]))
            out.append(TimedAction(a.device, a.stage, a.microbatch, Kind.I, a.start, mid))
            out.append(TimedAction(a.device, a.stage, a.microbatch, Kind.W, mid, a.end))
        else:
            out.append(a)
    return out


def serialise_overlaps(schedule: Schedule) -> Schedule | None:
    """The schedule with every overlapped F&B pair run as its backward then its forward.

    Only for instances without ``overlap_forward_backward`` (a pair then lasts ``F + B``):
    the backward runs first from the pair's start, the forward ends at the pair's end, so
    every dependency still holds, memory is allocated later and released earlier (never
    higher), and the makespan is unchanged.  Returns None when the instance has an overlap
    cost (the model then covers pairs itself) or the schedule has no pairs.
    """
    inst = schedule.instance
    if inst.overlap_forward_backward is not None:
        return None
    if all(a.overlap is None for a in schedule.actions):
        return None
    pairs: dict[int, list[TimedAction]] = {}
    out: list[TimedAction] = []
    for a in schedule.actions:
        if a.overlap is None:
            out.append(a)
        else:
            pairs.setdefault(a.overlap, []).append(a)
    for members in pairs.values():
        f = next(a for a in members if a.kind == Kind.F)
        b = next(a for a in members if a.kind != Kind.F)
        t = inst.ticks(b.start)
        dur_b = inst.ticks(inst.backward[b.stage] if b.kind == Kind.B
                           else inst.backward_input[b.stage])
        mid = t + dur_b
        end = mid + inst.ticks(inst.forward[f.stage])
        out.append(TimedAction(b.device, b.stage, b.microbatch, b.kind, b.start,
                               inst.from_ticks(mid)))
        out.append(TimedAction(f.device, f.stage, f.microbatch, f.kind, inst.from_ticks(mid),
                               inst.from_ticks(end)))
    return Schedule(inst, out, method=schedule.method)


def fifo_relabel(inst: Instance, actions: Sequence[TimedAction]) -> list[TimedAction]:
    """Relabel microbatches so that each (kind, stage, direction) runs them in index order
    (DESIGN-NOTES 1): the k-th start takes microbatch k.  Keeps makespan, validity, the
    memory profile and overlapped pairs (the ``overlap`` ids stay on the same rows).

    The backward of a (stage, microbatch) is one group whatever its form (``B``, fused or not,
    or ``I``): a fused ``B`` keeps its weight gradient with it, and the ``W`` rows are
    relabelled among the microbatches whose backward is an ``I``, in start order."""
    groups: dict[tuple, list[TimedAction]] = defaultdict(list)
    ws: dict[tuple, list[TimedAction]] = defaultdict(list)
    for a in actions:
        direction = _direction(inst, a.microbatch)
        if a.kind == Kind.W:
            ws[(a.stage, direction)].append(a)
        else:
            groups[(a.kind == Kind.F, a.stage, direction)].append(a)
    out = []
    unfused: dict[tuple, list[int]] = defaultdict(list)
    for (_, stage, direction), acts in groups.items():
        mbs = sorted(a.microbatch for a in acts)
        for a, i in zip(sorted(acts, key=lambda x: (x.start, x.microbatch)), mbs, strict=True):
            out.append(TimedAction(a.device, a.stage, i, a.kind, a.start, a.end, a.overlap))
            if a.kind == Kind.I:
                unfused[(stage, direction)].append(i)
    for key, acts in ws.items():
        mbs = sorted(unfused[key]) if len(unfused[key]) == len(acts) else sorted(
            a.microbatch for a in acts)  # not a complete schedule: keep the W labels' set
        for a, i in zip(sorted(acts, key=lambda x: (x.start, x.microbatch)), mbs, strict=True):
            out.append(TimedAction(a.device, a.stage, i, a.kind, a.start, a.end, a.overlap))
    return out


def sequential_schedule(inst: Instance) -> Schedule:
    """Microbatches one at a time (all forwards, then all backwards): valid under any memory
    limit that one microbatch fits in; the fallback warm start."""
    orders: list[list[Action]] = [[] for _ in range(inst.p)]
    bk = (Kind.I, Kind.W) if inst.split_backward else (Kind.B,)
    for i in range(inst.m):
        for s in range(inst.num_stages):
            orders[inst.device_of(s, i)].append(Action(Kind.F, s, i))
        for s in reversed(range(inst.num_stages)):
            for k in bk:
                orders[inst.device_of(s, i)].append(Action(k, s, i))
    return simulate(inst, orders, method="sequential")


# ------------------------------------------------------- general CP-SAT model
class GraphModel:
    """The CP-SAT model of a :class:`ResourceGraph` at a horizon: an interval per task in its
    ASAP/ALAP window, precedences with lags, ``NoOverlap`` (capacity 1) or ``Cumulative``
    (capacity k) per resource, a ``Cumulative`` per limited pool over the buffers' live
    intervals, and ``makespan`` to minimise.  Builders may add constraints on :attr:`start`
    before solving (the pipeline model adds FIFO order and implied memory precedences).

    Raises:
        ValueError: the horizon is below the critical path.
    """

    def __init__(self, rg: ResourceGraph, horizon: int, lower_bound: int = 0) -> None:
        rg.check()
        self.rg = rg
        self.horizon = horizon
        self.model = cp_model.CpModel()
        self.start: dict[Task, cp_model.IntVar] = {}
        self.interval: dict[Task, cp_model.IntervalVar] = {}
        #: auxiliary variables and their value as a function of (starts, ends)
        self.aux_hint: list[tuple[cp_model.IntVar, Callable[[Mapping[Task, int],
                                                             Mapping[Task, int]], int]]] = []
        self._variables()
        self._precedences()
        self._resources()
        self._pools()
        self._objective(min(lower_bound, horizon))

    def _variables(self) -> None:
        for t, (lo, hi) in windows(self.rg.graph, self.horizon).items():
            d = self.rg.duration(t)
            if hi < lo:
                raise ValueError(f"horizon {self.horizon} is below the critical path")
            s = self.model.new_int_var(lo, hi, f"s_{t}")
            self.start[t] = s
            self.interval[t] = self.model.new_fixed_size_interval_var(s, d, f"i_{t}")

    def end(self, t: Task) -> Any:
        """``start + duration`` of task ``t`` (a linear expression)."""
        return self.start[t] + self.rg.duration(t)

    def _precedences(self) -> None:
        for u, v, d in self.rg.graph.edges(data=True):
            self.model.add(self.start[v] >= self.end(u) + d["lag"])

    def _resources(self) -> None:
        by_res: dict[Hashable, list] = defaultdict(list)
        for t in self.rg.graph:
            r = self.rg.resource(t)
            if r is not None and self.rg.duration(t) > 0:
                by_res[r].append(self.interval[t])
        for r, ivs in by_res.items():
            cap = self.rg.capacity[r]
            if cap == 1:
                self.model.add_no_overlap(ivs)
            elif len(ivs) > cap:
                self.model.add_cumulative(ivs, [1] * len(ivs), cap)

    def _pools(self) -> None:
        by_pool: dict[Hashable, tuple[list, list]] = defaultdict(lambda: ([], []))
        for k, b in enumerate(self.rg.buffers):
            if self.rg.pools[b.pool] is None:
                continue
            size = self.model.new_int_var(0, self.horizon, f"live_{k}")
            self.model.add(size == self.end(b.free) - self.start[b.alloc])
            iv = self.model.new_interval_var(self.start[b.alloc], size, self.end(b.free),
                                             f"buf_{k}")
            self.aux_hint.append((size, lambda st, en, b=b: en[b.free] - st[b.alloc]))
            by_pool[b.pool][0].append(iv)
            by_pool[b.pool][1].append(b.amount)
        for pool, (ivs, amounts) in by_pool.items():
            limit = self.rg.pools[pool]
            assert limit is not None
            if sum(amounts) > limit:
                self.model.add_cumulative(ivs, amounts, limit)

    def _objective(self, lb: int) -> None:
        self.makespan = self.model.new_int_var(lb, self.horizon, "makespan")
        sinks = [t for t in self.rg.graph if self.rg.graph.out_degree(t) == 0]
        self.model.add_max_equality(self.makespan, [self.end(t) for t in sinks])
        self.model.minimize(self.makespan)

    def add_hint(self, starts: Mapping[Task, int],
                 ends: Mapping[Task, int] | None = None) -> None:
        """A complete hint: every start, every auxiliary variable, the makespan (``ends``
        default to start + duration)."""
        if ends is None:
            ends = {t: starts[t] + self.rg.duration(t) for t in self.start}
        for t, var in self.start.items():
            self.model.add_hint(var, starts[t])
        for var, fn in self.aux_hint:
            self.model.add_hint(var, fn(starts, ends))
        self.model.add_hint(self.makespan, max((ends[t] for t in self.start), default=0))

    def read(self, solver: cp_model.CpSolver) -> dict[Task, int]:
        return {t: solver.value(v) for t, v in self.start.items()}


@dataclass
class GraphResult:
    """Outcome of :func:`solve_graph`: ``status`` OPTIMAL / FEASIBLE / INFEASIBLE / UNKNOWN,
    ``starts`` (None without a schedule), ``makespan`` and a proven ``lower_bound``."""

    status: str
    starts: dict[Task, int] | None
    makespan: int | None
    lower_bound: int


def solve_graph(rg: ResourceGraph, *, hint: Mapping[Task, int] | None = None,
                horizon: int | None = None, time_limit: float | None = 30.0,
                workers: int = 1, seed: int = 0) -> GraphResult:
    """Minimise the makespan of ``rg`` with CP-SAT.

    The horizon is the hint's makespan (default hint: :func:`list_schedule`; a hint that
    breaks a constraint is dropped) or, without one, the sum of all durations and lags.
    """
    lb = rg.lower_bound()
    if hint is None:
        try:
            hint = list_schedule(rg)
        except ValueError:
            hint = None
    if hint is not None and check_starts(rg, hint):
        hint = None
    if horizon is None:
        horizon = (max(hint[t] + rg.duration(t) for t in hint) if hint else
                   sum(rg.duration(t) for t in rg.graph)
                   + sum(d["lag"] for _, _, d in rg.graph.edges(data=True)))
    horizon = max(horizon, lb)
    m = GraphModel(rg, horizon, lb)
    if hint is not None:
        m.add_hint(hint)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = seed
    if time_limit is not None:
        solver.parameters.max_time_in_seconds = time_limit
    code = solver.solve(m.model)
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        ms = int(round(solver.objective_value))
        bound = ms if code == cp_model.OPTIMAL else max(lb, int(math.ceil(
            solver.best_objective_bound - 1e-9)))
        return GraphResult("OPTIMAL" if bound >= ms else "FEASIBLE", m.read(solver), ms, bound)
    if code == cp_model.INFEASIBLE:
        return GraphResult("INFEASIBLE", None, None, lb)
    return GraphResult("UNKNOWN", None, None, lb)


# ------------------------------------------------------------------- model
#: Above this many candidate F&B pairs the overlap model keeps only the pairs of the nearest
#: microbatches (and those of the warm start); its optimum is then over that restricted set.
MAX_PAIRS = 20_000


@dataclass
class PairSolution:
    """A solution in the overlap model's terms (ticks): ``start`` and ``end`` of every default
    action (``F, B`` or ``F, I, W``) and the overlapped ``pairs`` ``(F, B)`` or, with split
    backward, ``(F, I)``: a *fused* pair, whose ``I`` and ``W`` both run inside the pair (the
    ``W`` then has ``start == end ==`` the pair's end and no device time)."""

    start: dict[Action, int]
    end: dict[Action, int]
    pairs: list[tuple[Action, Action]]

    @property
    def makespan(self) -> int:
        return max(self.end.values(), default=0)


def pair_solution(inst: Instance, actions: Sequence[TimedAction]) -> PairSolution:
    """The :class:`PairSolution` of a valid schedule's rows (fused ``B`` outside pairs already
    split, :func:`split_fused`).  An overlapped ``I`` alone becomes a fused pair (its ``W``
    dropped into the pair): never worse, as the pair's duration does not change and the
    memory of ``W`` is released no later."""
    start: dict[Action, int] = {}
    end: dict[Action, int] = {}
    pairs: list[tuple[Action, Action]] = []
    groups: dict[int, list[TimedAction]] = defaultdict(list)
    for a in actions:
        if a.overlap is not None:
            groups[a.overlap].append(a)
    bk = Kind.I if inst.split_backward else Kind.B
    in_pair: set[tuple[int, int]] = set()
    for members in groups.values():
        f = next(x for x in members if x.kind == Kind.F)
        b = next(x for x in members if x is not f)
        fa, ba = f.action, Action(bk, b.stage, b.microbatch)
        pairs.append((fa, ba))
        t0, t1 = inst.ticks(f.start), inst.ticks(f.end)
        start[fa] = start[ba] = t0
        end[fa] = end[ba] = t1
        if inst.split_backward:
            w = Action(Kind.W, b.stage, b.microbatch)
            start[w] = end[w] = t1
            in_pair.add((b.stage, b.microbatch))
    for a in actions:
        if a.overlap is not None or (a.kind == Kind.W and (a.stage, a.microbatch) in in_pair):
            continue
        start[a.action], end[a.action] = inst.ticks(a.start), inst.ticks(a.end)
    return PairSolution(start, end, pairs)


class PipelineModel(GraphModel):
    """The CP-SAT model of one pipeline instance at one horizon (ticks): the general
    :class:`GraphModel` of :func:`~cpsched.graph.pipeline_resource_graph`, plus FIFO
    microbatch order and the implied memory precedences.

    With ``overlap_forward_backward`` the model also covers overlapped F&B pairs:

    * every action has a start and an end variable, and a literal ``solo`` (it runs alone:
      an optional interval of its own duration, present iff ``solo``); a ``W`` is present iff
      its ``I`` is solo;
    * one literal per candidate pair ``(F(s, i), B/I(s', j))``: same device, ``i != j`` (same
      microbatch = a path in the task graph), ASAP/ALAP windows that meet, and not dominated
      (a pair lasting at least ``F`` + the full backward is never better than the two back to
      back); present iff an optional interval of ``overlap_forward_backward[s]`` on the
      device, both members start with it; ``solo + sum(pairs of the action) == 1`` and
      ``end == start + duration * solo + sum(pair duration * pair)``;
    * with split backward a pair always takes the fused backward (``I`` and ``W`` inside the
      pair): that dominates pairing the ``I`` alone (same pair, no later ``W`` time, memory
      released no later); the ``W`` then starts and ends with the pair;
    * windows come from :func:`~cpsched.graph.overlap_relaxed_durations`, the bound from
      :func:`~cpsched.graph.overlap_lower_bound`;
    * FIFO order stays valid (pair durations depend on the stage of the F only); for ``W``
      it only binds two consecutive microbatches that both run their ``W`` alone.

    Above ``max_pairs`` candidate pairs only pairs of microbatches at most ``pair_window``
    apart are kept (plus ``pairs``, the warm start's), and :attr:`restricted` is True: CP-SAT's
    own bound is then not a bound over all schedules.
    """

    def __init__(self, inst: Instance, horizon: int, lb: int, *,
                 pairs: Sequence[tuple[Action, Action]] = (), max_pairs: int | None = None,
                 fifo: bool = True) -> None:
        self.inst = inst
        self.overlap = inst.overlap_forward_backward is not None
        self.forced_pairs = set(pairs)
        self.max_pairs = MAX_PAIRS if max_pairs is None else max_pairs
        self.restricted = False
        self.pair_window: int | None = None
        self.candidate_pairs = 0
        self.endv: dict[Action, cp_model.IntVar] = {}
        self.solo: dict[Action, Any] = {}
        self.pair: dict[tuple[Action, Action], Any] = {}
        self.pair_dur: dict[tuple[Action, Action], int] = {}
        self.pair_interval: dict[tuple[Action, Action], cp_model.IntervalVar] = {}
        super().__init__(pipeline_resource_graph(inst), horizon, lb)
        self.dur = {a: self.rg.duration(a) for a in self.rg.graph}
        self.device = {a: self.rg.resource(a) for a in self.rg.graph}
        if fifo:
            self._fifo()
        if inst.memory_limit is not None:
            self._memory_precedences(inst.memory_limit)

    # -------------------------------------------------------- overlap model
    def end(self, t: Task) -> Any:
        if self.overlap:
            return self.endv[t]
        return super().end(t)

    def _variables(self) -> None:
        if not self.overlap:
            super()._variables()
            return
        inst, rg, H, m = self.inst, self.rg, self.horizon, self.model
        rel = overlap_relaxed_durations(inst, rg.graph)
        relaxed = rg.graph.copy()
        for t in relaxed:
            relaxed.nodes[t]["duration"] = rel[t]
        head, tail = heads_and_tails(relaxed)
        for t in rg.graph:
            lo, end_hi = head[t], H - tail[t]
            # a fused W starts at the pair's end: no room to reserve for it
            hi = end_hi if t.kind == Kind.W else end_hi - rel[t]
            if hi < lo:
                raise ValueError(f"horizon {H} is below the critical path")
            self.start[t] = m.new_int_var(lo, hi, f"s_{t}")
            self.endv[t] = m.new_int_var(lo + rel[t], end_hi, f"e_{t}")
        for t in rg.graph:
            if t.kind != Kind.W:
                self.solo[t] = m.new_bool_var(f"solo_{t}")
        for t in rg.graph:
            if t.kind == Kind.W:
                self.solo[t] = self.solo[Action(Kind.I, t.stage, t.microbatch)]
            self.interval[t] = m.new_optional_fixed_size_interval_var(
                self.start[t], rg.duration(t), self.solo[t], f"i_{t}")
        members: dict[Action, list[tuple[Any, int]]] = defaultdict(list)
        for (f, b), dur in self._candidate_pairs(head, tail, rel).items():
            x = m.new_bool_var(f"x_{f}_{b}")
            self.pair[(f, b)] = x
            self.pair_dur[(f, b)] = dur
            self.pair_interval[(f, b)] = m.new_optional_fixed_size_interval_var(
                self.start[f], dur, x, f"p_{f}_{b}")
            m.add(self.start[b] == self.start[f]).only_enforce_if(x)
            members[f].append((x, dur))
            members[b].append((x, dur))
        for t in rg.graph:
            d = rg.duration(t)
            if t.kind == Kind.W:
                i = Action(Kind.I, t.stage, t.microbatch)
                m.add(self.endv[t] == self.start[t] + d * self.solo[t])
                m.add(self.start[t] == self.endv[i]).only_enforce_if(~self.solo[t])
                continue
            m.add_exactly_one([self.solo[t]] + [x for x, _ in members[t]])
            m.add(self.endv[t] == self.start[t] + d * self.solo[t]
                  + sum(dur * x for x, dur in members[t]))

    def _candidate_pairs(self, head: Mapping[Action, int], tail: Mapping[Action, int],
                         rel: Mapping[Action, int]) -> dict[tuple[Action, Action], int]:
        inst, H = self.inst, self.horizon
        ov = inst.overlap_forward_backward
        assert ov is not None
        bk = Kind.I if inst.split_backward else Kind.B
        fs: dict[Any, list[Action]] = defaultdict(list)
        bs: dict[Any, list[Action]] = defaultdict(list)
        for t in self.rg.graph:
            if t.kind == Kind.F:
                fs[self.rg.resource(t)].append(t)
            elif t.kind == bk:
                bs[self.rg.resource(t)].append(t)

        def full(b: Action) -> int:
            d = self.rg.duration(b)
            if inst.split_backward:
                d += self.rg.duration(Action(Kind.W, b.stage, b.microbatch))
            return d

        cands: dict[tuple[Action, Action], int] = {}
        for dev, flist in fs.items():
            for f in flist:
                dur = inst.ticks(ov[f.stage])
                for b in bs[dev]:
                    if f.microbatch == b.microbatch:
                        continue  # F(s, i) precedes every backward of microbatch i
                    if (f, b) not in self.forced_pairs:
                        if dur >= self.rg.duration(f) + full(b):
                            continue  # dominated: the two back to back are never worse
                        lo = max(head[f], head[b])
                        hi = min(H - tail[f] - rel[f], H - tail[b] - rel[b])
                        if lo > hi or lo + dur > H - max(tail[f], tail[b]):
                            continue
                    cands[(f, b)] = dur
        self.candidate_pairs = len(cands)
        if len(cands) > self.max_pairs:
            self.restricted = True
            dist = sorted(abs(f.microbatch - b.microbatch) for f, b in cands)
            k = dist[self.max_pairs]  # the largest window that fits: below that distance
            k = max(1, k - 1)
            self.pair_window = k
            cands = {fb: d for fb, d in cands.items()
                     if abs(fb[0].microbatch - fb[1].microbatch) <= k or fb in self.forced_pairs}
        return cands

    def _resources(self) -> None:
        if not self.overlap:
            super()._resources()
            return
        by_dev: dict[Hashable, list] = defaultdict(list)
        for t in self.rg.graph:
            if self.rg.duration(t) > 0:
                by_dev[self.rg.resource(t)].append(self.interval[t])
        for (f, _), iv in self.pair_interval.items():
            if self.pair_dur[(f, _)] > 0:
                by_dev[self.rg.resource(f)].append(iv)
        for ivs in by_dev.values():
            self.model.add_no_overlap(ivs)

    def add_solution_hint(self, sol: PairSolution) -> None:
        """A complete hint from a :class:`PairSolution`: starts, ends, every literal, every
        auxiliary variable, the makespan."""
        paired = {t for fb in sol.pairs for t in fb}
        chosen = set(sol.pairs)
        for t in self.start:
            self.model.add_hint(self.endv[t], sol.end[t])
            if t.kind != Kind.W:
                self.model.add_hint(self.solo[t], t not in paired)
        for fb, x in self.pair.items():
            self.model.add_hint(x, fb in chosen)
        self.add_hint(sol.start, sol.end)

    def read_solution(self, solver: cp_model.CpSolver) -> PairSolution:
        return PairSolution({t: solver.value(v) for t, v in self.start.items()},
                            {t: solver.value(v) for t, v in self.endv.items()},
                            [fb for fb, x in self.pair.items() if solver.boolean_value(x)])

    def _fifo(self) -> None:
        inst = self.inst
        for a in self.start:
            nxt = Action(a.kind, a.stage, a.microbatch + 1)
            if nxt in self.start and _direction(inst, a.microbatch) == _direction(
                    inst, nxt.microbatch):
                c = self.model.add(self.start[nxt] >= self.end(a))
                if self.overlap and a.kind == Kind.W:
                    # a fused W is tied to its pair: only W's that run alone keep FIFO order
                    c.only_enforce_if([self.solo[a], self.solo[nxt]])

    def _memory_precedences(self, limit: float) -> None:
        """Implied: when F(s, j) starts on device d, microbatch j already holds the stages of
        d before s; each earlier microbatch still live on s holds its activation (or, after
        its I, the part W releases) — so at most k of them can be live (FIFO order)."""
        inst = self.inst
        eps = 1e-9
        for s in range(inst.num_stages):
            a = inst.activation[s]
            if a <= 0:
                continue
            for direction in ((0, 1) if inst.placement == "bidirectional" else (0,)):
                mbs = [i for i in range(inst.m) if _direction(inst, i) == direction]
                d = inst.device_of(s, mbs[0])
                earlier = sum(inst.activation[t] for t in inst.stages_of(d)
                              if t < s and inst.device_of(t, mbs[0]) == d)
                room = limit - earlier
                rels = release_actions(inst, s, mbs[0])
                # live until the first release: holds a; until the last: at least that part
                bounds = [(rels[0][0].kind, math.floor(room / a + eps))]
                # (W ends are not in FIFO order when a pair may fuse the backward)
                if len(rels) == 2 and rels[1][1] > eps and not self.overlap:
                    # others past their I hold at least a * (1 - r) each
                    bounds.append((Kind.W, math.floor((room - a) / (a * rels[1][1]) + eps) + 1))
                for kind, k in bounds:
                    k = max(k, 1)
                    for idx in range(k, len(mbs)):
                        j, i = mbs[idx], mbs[idx - k]
                        self.model.add(self.start[Action(Kind.F, s, j)]
                                       >= self.end(Action(kind, s, i)))
        if inst.placement != "bidirectional":
            self._footprint_precedences(limit)

    def _footprint_precedences(self, limit: float) -> None:
        """Implied, for devices with several stages ``s_1 < ... < s_v``: from the start of
        ``F(s_t, i)`` to the end of the first release of ``s_t`` (``B``/``I``), microbatch i
        holds ``a[s_1] + ... + a[s_t]`` on the device (its earlier stages release later).  Every
        later microbatch that has entered the device by then holds at least ``a[s_1]`` until
        after that moment (FIFO), so at most ``K_t = floor((limit - footprint_t) / a[s_1])``
        can have entered: ``start F(s_1, i + K_t + 1) >= end firstrel(s_t, i)``."""
        inst = self.inst
        eps = 1e-9
        for d in range(inst.p):
            stages = inst.stages_of(d)
            first = stages[0]
            a1 = inst.activation[first]
            if len(stages) < 2 or a1 <= 0:
                continue
            footprint = 0.0
            for st in stages:
                footprint += inst.activation[st]
                if st == first:
                    continue  # the per-stage rule above covers it
                k = math.floor((limit - footprint) / a1 + eps) + 1
                rel_kind = release_actions(inst, st, 0)[0][0].kind
                for i in range(inst.m - k):
                    self.model.add(self.start[Action(Kind.F, first, i + k)]
                                   >= self.end(Action(rel_kind, st, i)))

    def to_schedule(self, solution: Mapping[Action, int] | PairSolution,
                    method: str) -> Schedule:
        """The schedule of a solution: starts (without overlap) or a :class:`PairSolution`
        (paired actions get a shared ``overlap`` id; a pair of a split instance runs a fused
        ``B``)."""
        inst = self.inst
        if not isinstance(solution, PairSolution):
            starts = solution
            rows = [TimedAction(self.device[a], a.stage, a.microbatch, a.kind,
                                inst.from_ticks(starts[a]),
                                inst.from_ticks(starts[a] + self.dur[a]))
                    for a in self.start]
            return Schedule(inst, rows, method=method)
        rows = []
        skip: set[Action] = set()
        for k, (f, b) in enumerate(solution.pairs):
            t0, t1 = inst.from_ticks(solution.start[f]), inst.from_ticks(solution.end[f])
            rows.append(TimedAction(self.device[f], f.stage, f.microbatch, Kind.F, t0, t1, k))
            kind = Kind.B if inst.split_backward else b.kind
            rows.append(TimedAction(self.device[b], b.stage, b.microbatch, kind, t0, t1, k))
            skip.update((f, b))
            if inst.split_backward:
                skip.add(Action(Kind.W, b.stage, b.microbatch))
        for a in self.start:
            if a not in skip:
                rows.append(TimedAction(self.device[a], a.stage, a.microbatch, a.kind,
                                        inst.from_ticks(solution.start[a]),
                                        inst.from_ticks(solution.end[a])))
        return Schedule(inst, rows, method=method)


# ---------------------------------------------------------------- callback
class _Progress(cp_model.CpSolverSolutionCallback):
    def __init__(self, inst: Instance, t0: float, on_progress: ProgressCallback | None,
                 bound0: int, trust_bound: bool = True) -> None:
        super().__init__()
        self.inst, self.t0, self.cb = inst, t0, on_progress
        self.bound = bound0
        self.trust_bound = trust_bound  # False: CP-SAT's bound is over a restricted model
        self.incumbent: int | None = None
        self.solutions = 0

    def on_solution_callback(self) -> None:
        self.solutions += 1
        self.incumbent = int(round(self.objective_value))
        if self.trust_bound:
            self.bound = max(self.bound, int(math.ceil(self.best_objective_bound - 1e-9)))
        self.report()

    def on_bound(self, bound: float) -> None:
        if self.trust_bound:
            self.bound = max(self.bound, int(math.ceil(bound - 1e-9)))
        self.report()

    def report(self) -> None:
        if self.cb is not None:
            inc = None if self.incumbent is None else self.inst.from_ticks(self.incumbent)
            self.cb(time.perf_counter() - self.t0, inc, self.inst.from_ticks(self.bound))


# ------------------------------------------------------------------- solve
def best_warm_start(inst: Instance, candidates: Mapping[str, Schedule] | None = None
                    ) -> tuple[str, list[TimedAction], int]:
    """The best valid (memory-feasible) candidate as FIFO-ordered actions (fused ``B``
    outside overlapped pairs split, :func:`split_fused`).  Without ``overlap_forward_backward``
    the model has no pairs, and a candidate's pairs (each lasting ``F + B``) run back to back
    instead (:func:`serialise_overlaps`, same makespan, never more memory).

    Returns ``(method, actions, makespan_ticks)``; falls back to :func:`sequential_schedule`.
    """
    if candidates is None:
        from cpsched.schedules import run_all

        candidates = run_all(inst)
    best: tuple[str, list[TimedAction], int] | None = None
    best_key: tuple[int, float] | None = None
    pool = dict(candidates)
    pool.setdefault("sequential", sequential_schedule(inst))
    for name, sch in pool.items():
        if inst.overlap_forward_backward is None:
            sch = serialise_overlaps(sch) or sch  # no pair variables: run pairs back to back
        if validate(sch, inst):
            continue
        acts = split_fused(sch)
        key = (inst.ticks(sch.makespan), max(sch.peak_memory))  # ties: less memory
        if best_key is None or key < best_key:
            best, best_key = (name, fifo_relabel(inst, acts), key[0]), key
    assert best is not None  # sequential is always valid
    return best


def solve(
    inst: Instance,
    *,
    time_limit: float | None = 60.0,
    workers: int = 8,
    seed: int = 0,
    candidates: Mapping[str, Schedule] | None = None,
    parameters: Mapping[str, Any] | None = None,
    on_progress: ProgressCallback | None = None,
) -> Result:
    """Optimal schedule for ``inst`` with CP-SAT, warm-started from the best heuristic.

    Args:
        time_limit: wall-clock seconds (None: no limit).  For reproducible tests use
            ``workers=1`` and/or ``parameters={"max_deterministic_time": ...}``.
        workers: CP-SAT ``num_workers``.
        seed: CP-SAT ``random_seed``.
        candidates: warm-start candidates ``{name: schedule}`` (default: every applicable
            registered schedule, timed).
        parameters: any other ``SatParameters`` field, passed through.
        on_progress: called with (elapsed s, incumbent, bound) on every improvement.

    Returns:
        :class:`Result`; never worse than the best valid candidate; never raises on a time
        limit.
    """
    t0 = time.perf_counter()
    if candidates is None:
        from cpsched.schedules import run_all

        candidates = run_all(inst)
    g = build_task_graph(inst)
    overlap = inst.overlap_forward_backward is not None
    # with overlapped pairs only the relaxed bound holds (DESIGN-NOTES 4 assumes no pairs)
    lb = overlap_lower_bound(inst, g) if overlap else lower_bound(inst, g).value
    hint_method, hint_actions, horizon = best_warm_start(inst, candidates)
    hint: Mapping[Action, int] | PairSolution
    if overlap:
        hint = pair_solution(inst, hint_actions)
        horizon = hint.makespan  # fusing an overlapped I alone can only shorten it
        model = PipelineModel(inst, horizon, min(lb, horizon), pairs=hint.pairs)
        model.add_solution_hint(hint)
    else:
        hint = {a.action: inst.ticks(a.start) for a in hint_actions}
        model = PipelineModel(inst, horizon, min(lb, horizon))
        model.add_hint(hint)
    hint_sched = model.to_schedule(hint, hint_method)
    trust = not model.restricted

    solver = cp_model.CpSolver()
    prm = solver.parameters
    prm.num_workers = max(1, int(workers))
    prm.random_seed = int(seed)
    if time_limit is not None:
        prm.max_time_in_seconds = float(time_limit)
    for key, value in (parameters or {}).items():
        if not hasattr(prm, key):
            raise ValueError(f"CP-SAT parameter {key!r}: unknown (see sat_parameters.proto)")
        setattr(prm, key, value)
    cb = _Progress(inst, t0, on_progress, min(lb, horizon), trust_bound=trust)
    solver.best_bound_callback = cb.on_bound
    cb.report()
    code = solver.solve(model.model, cb)
    status_name = solver.status_name(code)

    schedule = hint_sched
    makespan = horizon
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        sol = model.read_solution(solver) if overlap else model.read(solver)
        ms = int(round(solver.objective_value))
        if ms <= makespan:
            schedule, makespan = model.to_schedule(sol, "cpsat"), ms
    bound = max(lb, cb.bound)
    if not trust:
        pass  # a restricted pair set: CP-SAT's bound is not a bound over all schedules
    elif code == cp_model.OPTIMAL:
        bound = max(bound, makespan)  # proven
    elif code in (cp_model.FEASIBLE, cp_model.UNKNOWN):
        bound = max(bound, int(math.ceil(solver.best_objective_bound - 1e-9)))
    if code == cp_model.INFEASIBLE:
        # the hint is feasible by construction, so this means the model rejected it
        raise RuntimeError("CP-SAT reported INFEASIBLE with a valid hint: model bug")
    bound = min(bound, makespan)
    schedule.method = "cpsat"
    message = ""
    if model.restricted:
        message = (f"{model.candidate_pairs} candidate F&B pairs: the model keeps pairs of "
                   f"microbatches at most {model.pair_window} apart, so its optimum is over "
                   "that restricted set; the bound is the combinatorial one")
    status = "OPTIMAL" if bound >= makespan else "FEASIBLE"
    schedule.status = status
    schedule.lower_bound = inst.from_ticks(bound)
    elapsed = time.perf_counter() - t0
    schedule.solve_seconds = elapsed
    schedule.extra = {"warm_start": hint_method, "warm_start_makespan":
                      inst.from_ticks(horizon)}
    if message:
        schedule.extra["note"] = message
    violations = validate(schedule)
    if violations:  # never hand out an invalid schedule
        raise RuntimeError("CP-SAT schedule failed validation: " + "; ".join(violations[:5]))
    return Result(
        status=status, schedule=schedule, makespan=inst.from_ticks(makespan),
        lower_bound=inst.from_ticks(bound), gap=schedule.gap, solve_seconds=elapsed,
        hint_method=hint_method, solver_status=status_name, message=message,
        stats={"conflicts": solver.num_conflicts, "branches": solver.num_branches,
               "wall_time": solver.wall_time, "solutions": cb.solutions,
               "combinatorial_bound": inst.from_ticks(lb),
               "overlap_pairs": len(model.pair), "candidate_pairs": model.candidate_pairs,
               "restricted": model.restricted},
    )
