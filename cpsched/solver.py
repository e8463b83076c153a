"""The CP-SAT model: a provably optimal schedule for an instance (SPEC §1, DESIGN-NOTES).

Model (all times in integer ticks, :meth:`Instance.ticks`):

* one fixed-size interval per action (``F`` and ``B``, or ``F``, ``I``, ``W`` with split
  backward; a fused ``B`` is never better than ``I`` then ``W`` back to back, so the model
  splits), its start bounded by the ASAP/ALAP window of the task graph against the horizon;
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

F&B overlap (DualPipe-style pairs) is not part of the model: the optimum and the bound are over
schedules without overlapped pairs.

:func:`solve` never raises on a time limit and never returns something worse than its hint.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ortools.sat.python import cp_model

from cpsched.graph import build_task_graph, heads_and_tails, lower_bound, overlap_lower_bound
from cpsched.instance import Instance
from cpsched.model import Action, Kind, Schedule, TimedAction, default_actions
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


def split_fused(schedule: Schedule) -> list[TimedAction] | None:
    """A schedule's actions with every fused ``B`` of a split instance turned into ``I`` then
    ``W`` back to back (never worse: memory is released no later).  None when the schedule has
    overlapped F&B pairs (outside the model)."""
    inst = schedule.instance
    out: list[TimedAction] = []
    for a in schedule.actions:
        if a.overlap is not None:
            return None
        if a.kind == Kind.B and inst.split_backward:
            mid = inst.from_ticks(inst.ticks(a.start) + inst.ticks(inst.backward_input[a.stage]))
            out.append(TimedAction(a.device, a.stage, a.microbatch, Kind.I, a.start, mid))
            out.append(TimedAction(a.device, a.stage, a.microbatch, Kind.W, mid, a.end))
        else:
            out.append(a)
    return out


def fifo_relabel(inst: Instance, actions: Sequence[TimedAction]) -> list[TimedAction]:
    """Relabel microbatches so that each (kind, stage, direction) runs them in index order
    (DESIGN-NOTES 1): the k-th start takes microbatch k.  Keeps makespan, validity and the
    memory profile."""
    groups: dict[tuple, list[TimedAction]] = defaultdict(list)
    for a in actions:
        groups[(a.kind, a.stage, _direction(inst, a.microbatch))].append(a)
    out = []
    for (_, _, direction), acts in groups.items():
        mbs = sorted(a.microbatch for a in acts)
        for a, i in zip(sorted(acts, key=lambda x: (x.start, x.microbatch)), mbs, strict=True):
            out.append(TimedAction(a.device, a.stage, i, a.kind, a.start, a.end, a.overlap))
        del direction
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


def _memory_scale(inst: Instance) -> int:
    r = inst.released_by_input
    vals = [x for a in inst.activation for x in (a, a * r, a * (1 - r))]
    if inst.memory_limit is not None:
        vals.append(inst.memory_limit)
    for k in range(7):
        sc = 10**k
        if all(abs(x * sc - round(x * sc)) < 1e-6 for x in vals):
            return sc
    return 10**6


# ------------------------------------------------------------------- model
class PipelineModel:
    """The CP-SAT model of one instance at one horizon (ticks).  Build, hint, solve, read."""

    def __init__(self, inst: Instance, horizon: int, lb: int) -> None:
        self.inst = inst
        self.horizon = horizon
        self.model = cp_model.CpModel()
        self.graph = build_task_graph(inst, default_actions(inst))
        self.start: dict[Action, cp_model.IntVar] = {}
        self.interval: dict[Action, cp_model.IntervalVar] = {}
        self.dur = {a: self.graph.nodes[a]["duration"] for a in self.graph}
        self.device = {a: self.graph.nodes[a]["device"] for a in self.graph}
        self.aux_hint: list[tuple[cp_model.IntVar, Callable[[dict[Action, int]], int]]] = []
        self._variables()
        self._dependencies()
        self._no_overlap()
        self._fifo()
        self._memory()
        self._objective(lb)

    # one method per constraint family, called in order
    def _variables(self) -> None:
        head, tail = heads_and_tails(self.graph)
        for a in self.graph:
            lo, hi = head[a], self.horizon - tail[a] - self.dur[a]
            if hi < lo:
                raise ValueError("horizon below the critical path")
            s = self.model.new_int_var(lo, hi, f"s_{a}")
            self.start[a] = s
            self.interval[a] = self.model.new_fixed_size_interval_var(s, self.dur[a], f"i_{a}")

    def _dependencies(self) -> None:
        for u, v, data in self.graph.edges(data=True):
            self.model.add(self.start[v] >= self.start[u] + self.dur[u] + data["lag"])

    def _no_overlap(self) -> None:
        per_dev: dict[int, list] = defaultdict(list)
        for a in self.graph:
            if self.dur[a] > 0:
                per_dev[self.device[a]].append(self.interval[a])
        for ivs in per_dev.values():
            self.model.add_no_overlap(ivs)

    def _fifo(self) -> None:
        inst = self.inst
        for a in self.graph:
            nxt = Action(a.kind, a.stage, a.microbatch + 1)
            if nxt in self.start and _direction(inst, a.microbatch) == _direction(
                    inst, nxt.microbatch):
                self.model.add(self.start[nxt] >= self.start[a] + self.dur[a])

    def _release_actions(self, s: int, i: int) -> list[tuple[Action, float]]:
        """(action whose end releases, fraction released) for (stage, microbatch)."""
        if not self.inst.split_backward:
            return [(Action(Kind.B, s, i), 1.0)]
        r = self.inst.released_by_input
        return [(Action(Kind.I, s, i), r), (Action(Kind.W, s, i), 1.0 - r)]

    def _memory(self) -> None:
        inst = self.inst
        limit = inst.memory_limit
        if limit is None:
            return
        sc = _memory_scale(inst)
        cap = math.floor(limit * sc + 1e-6)
        per_dev: dict[int, tuple[list, list]] = defaultdict(lambda: ([], []))
        for i in range(inst.m):
            for s in range(inst.num_stages):
                fa = Action(Kind.F, s, i)
                d = self.device[fa]
                for rel, frac in self._release_actions(s, i):
                    demand = math.ceil(inst.activation[s] * frac * sc - 1e-6)
                    if demand <= 0:
                        continue
                    end = self.start[rel] + self.dur[rel]
                    size = self.model.new_int_var(0, self.horizon, f"live_{rel}")
                    self.model.add(size == end - self.start[fa])
                    iv = self.model.new_interval_var(self.start[fa], size, end, f"mem_{rel}")
                    self.aux_hint.append(
                        (size, lambda st, fa=fa, rel=rel: st[rel] + self.dur[rel] - st[fa]))
                    per_dev[d][0].append(iv)
                    per_dev[d][1].append(demand)
        for ivs, demands in per_dev.values():
            if sum(demands) > cap:
                self.model.add_cumulative(ivs, demands, cap)
        self._memory_precedences(limit)

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
                rels = self._release_actions(s, mbs[0])
                # live-until-first-release: holds a; live-until-last-release: holds last part
                bounds = [(rels[0][0].kind, math.floor(room / a + eps))]
                if len(rels) == 2 and rels[1][1] > eps:
                    # others past their I hold at least a * (1 - r) each
                    bounds.append((Kind.W, math.floor((room - a) / (a * rels[1][1]) + eps) + 1))
                for kind, k in bounds:
                    k = max(k, 1)
                    for idx in range(k, len(mbs)):
                        j, i = mbs[idx], mbs[idx - k]
                        rel = Action(kind, s, i)
                        self.model.add(self.start[Action(Kind.F, s, j)]
                                       >= self.start[rel] + self.dur[rel])

    def _objective(self, lb: int) -> None:
        self.makespan = self.model.new_int_var(lb, self.horizon, "makespan")
        sinks = [a for a in self.graph if self.graph.out_degree(a) == 0]
        self.model.add_max_equality(self.makespan,
                                    [self.start[a] + self.dur[a] for a in sinks])
        self.model.minimize(self.makespan)

    # hint and read-back
    def add_hint(self, starts: Mapping[Action, int]) -> None:
        """A complete hint: every start, every auxiliary variable, the makespan."""
        for a, var in self.start.items():
            self.model.add_hint(var, starts[a])
        for var, fn in self.aux_hint:
            self.model.add_hint(var, fn(starts))
        self.model.add_hint(self.makespan, max(starts[a] + self.dur[a] for a in self.start))

    def read(self, solver: cp_model.CpSolver) -> dict[Action, int]:
        return {a: solver.value(v) for a, v in self.start.items()}

    def to_schedule(self, starts: Mapping[Action, int], method: str) -> Schedule:
        inst = self.inst
        rows = [TimedAction(self.device[a], a.stage, a.microbatch, a.kind,
                            inst.from_ticks(starts[a]), inst.from_ticks(starts[a] + self.dur[a]))
                for a in self.start]
        return Schedule(inst, rows, method=method)


# ---------------------------------------------------------------- callback
class _Progress(cp_model.CpSolverSolutionCallback):
    def __init__(self, inst: Instance, t0: float, on_progress: ProgressCallback | None,
                 bound0: int) -> None:
        super().__init__()
        self.inst, self.t0, self.cb = inst, t0, on_progress
        self.bound = bound0
        self.incumbent: int | None = None
        self.solutions = 0

    def on_solution_callback(self) -> None:
        self.solutions += 1
        self.incumbent = int(round(self.objective_value))
        self.bound = max(self.bound, int(math.ceil(self.best_objective_bound - 1e-9)))
        self.report()

    def on_bound(self, bound: float) -> None:
        self.bound = max(self.bound, int(math.ceil(bound - 1e-9)))
        self.report()

    def report(self) -> None:
        if self.cb is not None:
            inc = None if self.incumbent is None else self.inst.from_ticks(self.incumbent)
            self.cb(time.perf_counter() - self.t0, inc, self.inst.from_ticks(self.bound))


# ------------------------------------------------------------------- solve
def best_warm_start(inst: Instance, candidates: Mapping[str, Schedule] | None = None
                    ) -> tuple[str, list[TimedAction], int]:
    """The best valid (memory-feasible, overlap-free) candidate as FIFO-ordered split actions.

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
        acts = split_fused(sch)
        if acts is None or validate(sch, inst):
            continue
        key = (inst.ticks(sch.makespan), max(sch.peak_memory))  # ties: less memory
        if best_key is None or key < best_key:
            best, best_key = (name, fifo_relabel(inst, acts), key[0]), key
    assert best is not None  # sequential is always valid
    return best


def _best_overlapped(inst: Instance, candidates: Mapping[str, Schedule]) -> Schedule | None:
    """The best valid candidate that uses overlapped F&B pairs, as a copy."""
    best = None
    for sch in candidates.values():
        if any(a.overlap is not None for a in sch.actions) and not validate(sch, inst) and (
                best is None or sch.makespan < best.makespan):
            best = sch
    if best is None:
        return None
    return Schedule(inst, list(best.actions), method=best.method)


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
    lb = lower_bound(inst, g).value
    hint_method, hint_actions, horizon = best_warm_start(inst, candidates)
    hint_starts = {a.action: inst.ticks(a.start) for a in hint_actions}
    model = PipelineModel(inst, horizon, min(lb, horizon))
    model.add_hint(hint_starts)
    hint_sched = model.to_schedule(hint_starts, hint_method)

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
    cb = _Progress(inst, t0, on_progress, min(lb, horizon))
    solver.best_bound_callback = cb.on_bound
    cb.report()
    code = solver.solve(model.model, cb)
    status_name = solver.status_name(code)

    schedule = hint_sched
    makespan = horizon
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        starts = model.read(solver)
        ms = int(round(solver.objective_value))
        if ms <= makespan:
            schedule, makespan = model.to_schedule(starts, "cpsat"), ms
    bound = max(lb, cb.bound)
    if code == cp_model.OPTIMAL:
        bound = max(bound, makespan)  # proven
    elif code in (cp_model.FEASIBLE, cp_model.UNKNOWN):
        bound = max(bound, int(math.ceil(solver.best_objective_bound - 1e-9)))
    if code == cp_model.INFEASIBLE:
        # the hint is feasible by construction, so this means the model rejected it
        raise RuntimeError("CP-SAT reported INFEASIBLE with a valid hint: model bug")
    bound = min(bound, makespan)
    schedule.method = "cpsat"
    message = ""
    if inst.overlap_forward_backward is not None:
        # The model has no F&B pairs: its bound does not hold for overlapped schedules.
        bound = min(bound, overlap_lower_bound(inst, g))
        best_ov = _best_overlapped(inst, candidates)
        if best_ov is not None and best_ov.makespan < schedule.makespan:
            schedule, makespan = best_ov, inst.ticks(best_ov.makespan)
            message = (f"the best schedule found is {best_ov.method}, which overlaps F&B "
                       "pairs; the CP-SAT model covers schedules without overlap")
        else:
            message = ("bound weakened for F&B overlap, which the CP-SAT model does not "
                       "cover")
    bound = min(bound, makespan)
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
               "combinatorial_bound": inst.from_ticks(lb)},
    )
