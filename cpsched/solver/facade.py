"""``solve``: the one entry point from an instance to its best schedule (docs/modelling.md).

Steps: the combinatorial lower bound (docs/modelling.md §4) → the best valid known schedule as
a complete hint with its makespan as horizon (§5, §6) → on large models, the window search
shortens it (§17; :mod:`cpsched.solver.prelude`, which also holds the methods) → the pipeline
model → CP-SAT →
the better of hint and solution, with a status that is OPTIMAL only when the makespan equals a
bound cpsched can stand behind (docs/spec.md §5).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
from ortools.sat.python import cp_model

from cpsched.bounds import area_bound, fill_drain_bound, pair_fill_drain_bound
from cpsched.gate_bound import gate_bound
from cpsched.graph import (
    heads_and_tails,
    lower_bound,
    overlap_heads_tails,
    overlap_lower_bound,
    task_graph,
)
from cpsched.instance import Instance
from cpsched.model import Schedule, Status
from cpsched.solver import count_beside, isolated, lns
from cpsched.solver.constraints import ordered_heads_tails
from cpsched.solver.overlap import PairSolution, pair_solution
from cpsched.solver.pipeline_model import PipelineModel, solution_schedule
from cpsched.solver.prelude import (
    check_method,
    count,
    modulo_candidate,
    pair_relaxation,
    pair_windows,
    search_and_family,
    search_share,
    span,
    tent,
    window_stats,
)
from cpsched.solver.progress import Progress, ProgressCallback
from cpsched.solver.relaxation import DeviceRelaxation, relaxation_bound, relaxed_devices
from cpsched.solver.search_run import (
    TrackedStop,
    finish_seconds,
    run_search,
    sat_parameters,
    seconds_left,
    time_to_resume,
)
from cpsched.solver.warm_start import best_warm_start
from cpsched.validate import validate


@dataclass
class Result:
    """Outcome of :func:`solve`: the schedule and how it was found.

    Attributes:
        schedule: the best schedule, validated (None only when no schedule exists).
        solve_seconds: wall time of the whole call.
        warm_start: registry name of the schedule CP-SAT started from.
        solver_status: CP-SAT's own status name (not a proof; see :attr:`status`).
        message: why infeasible / unknown, or notes.
        stats: solver statistics (conflicts, branches, solutions, bounds, pairs).

    ``status``, ``makespan``, ``lower_bound`` and ``gap`` are the schedule's (instance units).
    """

    schedule: Schedule | None
    solve_seconds: float
    warm_start: str | None = None
    solver_status: str = ""
    message: str = ""
    stats: dict[str, Any] = field(default_factory=dict)
    no_schedule_status: Status = Status.UNKNOWN

    @property
    def status(self) -> Status:
        """The schedule's :class:`~cpsched.model.Status`."""
        return self.schedule.status if self.schedule else self.no_schedule_status

    @property
    def makespan(self) -> float | None:
        """The schedule's makespan."""
        return self.schedule.makespan if self.schedule else None

    @property
    def lower_bound(self) -> float | None:
        """The proven lower bound on the optimal makespan."""
        return self.schedule.lower_bound if self.schedule else None

    @property
    def gap(self) -> float | None:
        """``(makespan - lower_bound) / makespan``."""
        return self.schedule.gap if self.schedule else None


def combinatorial_bound(inst: Instance) -> int:
    """The best bound (ticks) proven before any search: with overlapped pairs the relaxed
    bound and the pair fill/drain bound (docs/modelling.md §4.3, §16.1); else the plain
    bound and the memory-aware fill/drain, area and gate bounds (docs/modelling.md §11, §16,
    §26)."""
    return _bounds(inst)[0]


#: Seconds per action the heads and tails with the implied orders take (measured 0.33 s at
#: 24 576 actions on 2 cores), and how many times that must be left before the deadline
#: for them to be computed: they only pay when a bound or a search runs after them.
ORDERED_SECONDS_PER_ACTION, ORDERED_MARGIN = 1.5e-5, 5.0


def _time_for_ordered(inst: Instance, deadline: float | None) -> bool:
    """Whether the heads and tails with the implied orders (docs/modelling.md §30) fit
    before ``deadline`` (:data:`ORDERED_MARGIN`): a time limit bounds the whole command."""
    return deadline is None or seconds_left(inst, deadline) >= (
        ORDERED_MARGIN * ORDERED_SECONDS_PER_ACTION * inst.n_actions)


def _bounds(inst: Instance, implied: bool = True) -> tuple[int, Any, Any, Any, Any]:
    """:func:`combinatorial_bound`, the task graph, its heads and tails, with an overlap
    cost its pair-relaxed durations, heads and tails (:func:`overlap_heads_tails`; None
    without one), and under a memory limit the heads and tails with the implied orders
    (:func:`ordered_heads_tails`, docs/modelling.md §30; pair-relaxed with an overlap cost;
    else the plain ones): per-action values, for the critical path and per-device bound and
    for the one-device relaxations only (§30 says where not).  With ``implied`` False the
    implied orders are left out (the plain heads and tails returned in their place; the
    bound is the one without them)."""
    g = task_graph(inst)  # the one the known schedules' lower-bound check built, if any
    ht = heads_and_tails(g)  # once for the three bounds (~0.2 s at 50k actions)
    implied = implied and inst.memory_limit is not None
    if inst.overlap_forward_backward is not None:
        relaxed = overlap_heads_tails(inst, g)  # once for the pair bounds, §28's too
        ordered = ordered_heads_tails(inst, g, relaxed[0]) if implied else relaxed[1]
        return max(overlap_lower_bound(inst, g, relaxed=(relaxed[0], ordered)),
                   pair_fill_drain_bound(inst, g, relaxed=relaxed)), g, ht, relaxed, ordered
    ordered = ordered_heads_tails(inst, g) if implied else ht
    return max(lower_bound(inst, g, ht=ordered).value, fill_drain_bound(inst, g, ht=ht)[0],
               area_bound(inst, g, ht=ht), gate_bound(inst)), g, ht, None, ordered


#: share of the remaining time, and at most this many seconds, for the one-device relaxation
_RELAX_SHARE, _RELAX_MAX_SECONDS = 0.3, 30.0
#: CP-SAT deterministic time for the relaxation when there is no time limit (reproducible)
RELAX_DETERMINISTIC_TIME = 20.0


def _relax_reserve(inst: Instance, g: Any, ht: Any, deadline: float, open_gap: bool) -> float:
    """Seconds kept from the search for the one-device relaxation: its share of the time
    left when there is a gap to close and a device to relax (:func:`relaxed_devices`)."""
    if not open_gap or not relaxed_devices(inst, g, ht):
        return 0.0
    return min(_RELAX_SHARE * (deadline - time.perf_counter()), _RELAX_MAX_SECONDS)


def _relaxed(inst: Instance, lb: int, upper: int, g: Any, ht: Any, deadline: float | None,
             params: Any, stop: TrackedStop) -> tuple[int, list[DeviceRelaxation]]:
    """The one-device relaxation bound (docs/modelling.md §21) in the time left, if a gap
    is open and no stop was asked for; without a deadline deterministic, within
    :data:`RELAX_DETERMINISTIC_TIME` and at most the search's own deterministic limit
    (``params``, its ``SatParameters``); with a deadline and more than one search worker two
    relaxations run side by side (§36)."""
    if lb >= upper or stop.requested:
        return lb, []
    if deadline is None:
        dt = min(RELAX_DETERMINISTIC_TIME, params.max_deterministic_time)
        return relaxation_bound(inst, g, ht, lb, upper, deterministic_time=dt,
                                on_solver=stop.give, stopped=lambda: stop.requested)
    wall = seconds_left(inst, deadline)
    if wall < 0.2:
        return lb, []
    return relaxation_bound(inst, g, ht, lb, upper, deterministic_time=4 * wall,
                            time_limit=wall, on_solver=stop.give,
                            stopped=lambda: stop.requested, parallel=params.num_workers > 1)


#: Above this many actions the default is fewer CP-SAT workers (memory: each worker's copies).
LARGE_MODEL_ACTIONS = 20_000


def default_workers(inst: Instance) -> int:
    """CP-SAT workers when none are asked for: 8, or 4 above :data:`LARGE_MODEL_ACTIONS`
    actions.  Measured on 2 cores, p=32 v=2 m=256 (32768 actions), 120 s: the search
    process peaks at 4.7 GB with 8 workers and 2.8 GB with 4, same result (1647, bound 1629);
    p=32 m=256 split (24576 actions) is proven optimal in 40 s with 4 and 50 s with 8."""
    return 4 if inst.n_actions > LARGE_MODEL_ACTIONS else 8


def solve(inst: Instance, *, time_limit: float | None = 60.0, workers: int | None = None,
          seed: int = 0, candidates: Mapping[str, Schedule] | None = None,
          parameters: Mapping[str, Any] | None = None,
          on_progress: ProgressCallback | None = None, started: float | None = None,
          on_solver: Callable[[Any], None] | None = None, method: str = "auto") -> Result:
    """Optimal schedule for ``inst`` with CP-SAT, warm-started from the best known schedule
    (on large models first shortened by the window search, docs/modelling.md §17).

    Args:
        time_limit: wall-clock seconds for the whole call — known schedules, bounds, window
            search, model and search — counted from ``started`` (None: no limit).  With a
            limit the search runs in a child process ended at the deadline (CP-SAT's own
            limit can overrun).  For reproducible results use ``workers=1`` and/or
            ``parameters={"max_deterministic_time": ...}``.
        workers: CP-SAT ``num_workers`` (None: :func:`default_workers`).
        seed: CP-SAT ``random_seed``.
        candidates: warm-start candidates ``{name: schedule}`` (default: every applicable
            registered schedule, timed).
        parameters: any other ``SatParameters`` field, passed through.
        on_progress: called with (elapsed s, incumbent, bound) on every improvement.
        on_solver: called once, before the window search, with an object whose
            ``stop_search()`` ends the solve, keeping the best schedule so far (the CLI
            calls it on Ctrl-C).
        started: ``time.perf_counter()`` value the time limit counts from (default: now;
            the CLI passes its own start so the limit bounds the whole command).
        method: ``auto``, ``model`` or ``search`` (:data:`cpsched.solver.prelude.METHODS`):
            whether the window search and the full model run.

    Returns:
        :class:`Result`, never worse than the best valid candidate; a time limit is not an
        error.

    Raises:
        ValueError: an unknown CP-SAT parameter or method.
        RuntimeError: CP-SAT rejected a valid hint or produced an invalid schedule (a bug in
            the model, never a property of the instance).
    """
    check_method(method)
    t0 = time.perf_counter() if started is None else started
    workers = default_workers(inst) if workers is None else workers
    sat_parameters(None, workers, seed, parameters)  # rejects a bad one even if no model runs
    deadline = None if time_limit is None else t0 + float(time_limit)
    candidates = _known(inst, deadline, t0, workers) if candidates is None else candidates
    lb, g, _, _, ht = bounds = _bounds(inst, _time_for_ordered(inst, deadline))  # §30
    stop = TrackedStop(on_solver)
    stop.give(None)  # Ctrl-C during the modulo scan and the window search
    warm, hint, horizon, lb, pre = _before_search(inst, candidates, bounds, deadline, stop,
                                                  workers)
    cb, start_horizon = Progress(inst, t0, on_progress, min(lb, horizon)), horizon
    hint, horizon, windows = search_and_family(inst, g, (hint, horizon, lb), deadline, seed,
                                               parameters, cb, stop, workers, method,
                                               (candidates, pre))  # §17, §40
    skip = _skip_model(inst, deadline, windows, stop.requested, method, done=lb >= horizon)
    if skip is not None:
        return _without_model(inst, g, hint, lb, horizon, t0, warm, start_horizon, windows,
                              pre, skip)
    model = _model(inst, hint, horizon, lb)
    # the search leaves the relaxation its share of the time (used only if the gap stays open)
    search_deadline = None if deadline is None else deadline - _relax_reserve(
        inst, g, ht, deadline, lb < horizon) - finish_seconds(inst)
    params = sat_parameters(search_deadline, workers, seed, parameters)
    # a restricted pair set, or parameters that fix variables, make CP-SAT's bound one of a
    # smaller model: then only the combinatorial bound is proven
    trust = not model.restricted and not params.fix_variables_to_their_hinted_value
    cb.trust_bound = trust
    cb.report()
    out = isolated.Outcome() if stop.requested else run_search(
        model.model, params, search_deadline, cb, stop.give)
    schedule, makespan, bound, best = _outcome(model, out, hint, horizon, lb, cb.bound, trust)
    bound, relaxed = _relaxed(inst, bound, makespan, g, ht, deadline, params, stop)  # §21
    resumed = time_to_resume(inst, deadline, bound < makespan and not stop.requested,
                             parameters)
    if resumed:  # the relaxation ended before its share of the time: the search goes on
        out, (schedule, makespan, bound, best) = _resume(
            model, best, makespan, bound, deadline, (workers, seed, parameters), cb, stop, trust)
    bound = min(count_beside.collect(pre, bound, deadline), makespan)  # §57
    _certify(schedule, bound, t0, warm, start_horizon, message := _restricted_message(model))
    return Result(schedule=schedule, solve_seconds=schedule.solve_seconds, warm_start=warm,
                  solver_status=out.status_name, message=message,
                  stats=_stats(model, out, cb, lb, resumed, relaxed, windows) | pre)


#: seconds per action to build the full model (measured 2.1 s for 24576 actions on a slow
#: 2-core machine): with less time left after the window search, the model is not built
MODEL_SECONDS_PER_ACTION = 1e-4
#: the same with an overlap cost, where up to ``MAX_PAIRS`` candidate pairs come on top
#: (measured 2.6-3.8e-4 s per action on 1536-6144 actions with 15 872-19 432 pairs, 0.6-1.9 s;
#: a 4608-action pair model took 7 s beside another solve, after a -t 10 window search had
#: left 0.9 s: the plain estimate let it start)
MODEL_SECONDS_PER_ACTION_PAIRS = 4e-4
#: after the window search the model is built only with at least this many seconds to search
MIN_MODEL_SECONDS = 1.0
NO_TIME_MESSAGE = ("too little time left to build the full model after the window search: "
                   "its schedule, with the bounds proven without the model")
NO_TIME_WARM_MESSAGE = ("too little time left for the window search or the full model: the "
                        "warm start, with the bounds proven without the model")
SEARCH_TIME_MESSAGE = ("the window search ran to the time limit (at this size the full model "
                       "after it finds nothing in minutes, docs/modelling.md §33): its "
                       "schedule, with the bounds proven without the model")
SEARCH_MESSAGE = "method search: the window search's schedule, bounds proven without the model"
SEARCH_DONE_MESSAGE = "method search: the warm start meets the bound, nothing to search"


def _skip_model(inst: Instance, deadline: float | None, windows: lns.LnsStats | None,
                stopped: bool, method: str, done: bool = False) -> str | None:
    """Why the full model is not built — the message of the result (empty after Ctrl-C or
    when ``done``, the schedule at hand meeting the bound) — or None to build it: method
    ``search``, a Ctrl-C after the window search, or too little time left
    (:func:`_no_time_for_model`; then the window search did not run either when it had no
    time, :func:`cpsched.solver.prelude.window_search`)."""
    if stopped and (windows is not None or method == "search"):
        return ""
    if method == "search":
        if windows is not None:
            return SEARCH_MESSAGE
        return SEARCH_DONE_MESSAGE if done else NO_TIME_WARM_MESSAGE
    if done:  # the warm start meets the bound: a model could only prove it again
        return ""
    if _no_time_for_model(inst, deadline, windows is not None):
        if windows is None:
            return NO_TIME_WARM_MESSAGE
        return SEARCH_TIME_MESSAGE if search_share(inst, method) == 1.0 else NO_TIME_MESSAGE
    return None


def _no_time_for_model(inst: Instance, deadline: float | None, searched: bool = False
                       ) -> bool:
    """Whether building the model would run past ``deadline`` (the time limit) — after the
    window search (``searched``) also whether it would have less than
    :data:`MIN_MODEL_SECONDS` to search: then the model is not built, and the best schedule
    so far is the result."""
    if deadline is None:
        return False
    per_action = (MODEL_SECONDS_PER_ACTION if inst.overlap_forward_backward is None
                  else max(MODEL_SECONDS_PER_ACTION, MODEL_SECONDS_PER_ACTION_PAIRS))
    if searched:
        return seconds_left(inst, deadline) < per_action * inst.n_actions + MIN_MODEL_SECONDS
    return deadline - time.perf_counter() < per_action * inst.n_actions


def _without_model(inst: Instance, g: Any, hint: Any, lb: int, horizon: int,
                   t0: float, warm: str, start_horizon: int, windows: lns.LnsStats | None,
                   pre: dict[str, Any], message: str) -> Result:
    """The window search's best schedule (or the warm start when it did not run), validated,
    when the model is not built (method ``search``, Ctrl-C in the window search, or too little
    time left for it); ``hint`` is ``{action: start}`` or, with an overlap cost, a
    :class:`PairSolution`; ``pre``: the stats of the steps before the search."""
    schedule = solution_schedule(inst, nx.get_node_attributes(g, "device"),
                                 nx.get_node_attributes(g, "duration"), hint, "cpsat")
    _certify(schedule, min(count_beside.collect(pre, lb, None), horizon), t0, warm,
             start_horizon, message)
    return Result(schedule, schedule.solve_seconds, warm, "UNKNOWN", message=message, stats={
        "window_search": window_stats(inst, windows), "combinatorial_bound": inst.from_ticks(lb)
    } | pre)


def _known(inst: Instance, deadline: float | None, t0: float, workers: int
           ) -> dict[str, Schedule]:
    """Every applicable known schedule, timed; expensive searches among them stop after a
    third of the budget and run side by side on up to ``workers`` cores (§45)."""
    from cpsched.schedules import run_all

    return run_all(inst, None if deadline is None else t0 + (deadline - t0) / 3,
                   processes=lns.window_workers(workers))


def _model_stats(model: PipelineModel) -> dict[str, Any]:
    """The model's pair statistics for ``Result.stats``."""
    return {"overlap_pairs": len(model.pair), "candidate_pairs": model.candidate_pairs,
            "restricted": model.restricted}


def _outcome(model: PipelineModel, out: isolated.Outcome, hint: Any, horizon: int, lb: int,
             progress_bound: int, trust: bool) -> tuple[Schedule, int, int, Any]:
    """The better of hint and CP-SAT's solution, its makespan and the bound proven so far
    (ticks), and that solution (the model's terms, a hint for a further search).

    Raises:
        RuntimeError: CP-SAT reported the hinted model infeasible (a model bug).
    """
    if out.code == cp_model.INFEASIBLE:
        # the hint is feasible by construction, so this means the model rejected it
        raise RuntimeError("CP-SAT reported INFEASIBLE with a valid hint: model bug")
    best, makespan = hint, horizon
    if out.solution is not None and out.objective is not None and (
            round(out.objective) <= makespan):
        best, makespan = model.read(out), round(out.objective)
    bound = lb
    if trust and out.bound is not None:
        # CP-SAT's proven bound; its OPTIMAL status alone is no proof (gap limits stop early)
        bound = max(bound, progress_bound, int(math.ceil(out.bound - 1e-9)))
    return model.to_schedule(best, "cpsat"), makespan, bound, best


def _stats(model: PipelineModel, out: isolated.Outcome, cb: Progress, lb: int, resumed: bool,
           relaxed: list[DeviceRelaxation], windows: lns.LnsStats | None) -> dict[str, Any]:
    """:attr:`Result.stats` of a run with the full model (CP-SAT's own, then cpsched's)."""
    inst = model.inst
    return dict(out.stats) | {
        "solutions": cb.solutions, "combinatorial_bound": inst.from_ticks(lb),
        "resumed": resumed,
        "relaxed_devices": [(r.device, inst.from_ticks(r.bound), r.solved) for r in relaxed],
        "window_search": window_stats(inst, windows)} | _model_stats(model)


def _resume(model: PipelineModel, best: Any, makespan: int, bound: int, deadline: float,
            setup: tuple[int, int, Mapping[str, Any] | None], cb: Progress, stop: TrackedStop,
            trust: bool) -> tuple[isolated.Outcome, tuple[Schedule, int, int, Any]]:
    """The second search on the same model until ``deadline`` (:func:`time_to_resume`),
    hinted with ``best`` (of makespan ``makespan``, ticks), with ``setup`` = (workers, seed,
    the user's CP-SAT parameters): its outcome and :func:`_outcome`'s result, never worse
    than ``best`` nor below ``bound``."""
    model.model.clear_hints()
    model.add_hint(best)
    end = deadline - finish_seconds(model.inst)
    out = run_search(model.model, sat_parameters(end, *setup), end, cb, stop.give)
    return out, _outcome(model, out, best, makespan, bound, cb.bound, trust)


def _restricted_message(model: PipelineModel) -> str:
    if not model.restricted:
        return ""
    return (f"{model.candidate_pairs} candidate F&B pairs: the model keeps pairs of "
            f"microbatches at most {model.pair_window} apart, so its optimum is over that "
            "restricted set; the bound is the combinatorial one")


def _warm_start(inst: Instance, candidates: Mapping[str, Schedule], lb: int,
                deadline: float | None, stop: TrackedStop, workers: int = 1,
                ) -> tuple[str, Any, int, dict[str, Any] | None]:
    """The warm start: name, hint in the model's terms (with an overlap cost a
    :class:`PairSolution`), horizon (ticks), and ``Result.stats["modulo"]``.
    While a gap to ``lb`` is open, the modulo schedule (docs/modelling.md §22) joins the
    candidates when shorter; its stats (makespan, period, min_period, seconds, whether it
    is the warm start) are None when it did not run or found no pattern."""
    warm, hint_rows, horizon = best_warm_start(inst, candidates)
    pattern = None
    if horizon > lb:
        t = time.perf_counter()
        extra = modulo_candidate(inst, deadline, stop, workers, horizon)
        if extra is not None:
            if inst.ticks(extra.makespan) < horizon:  # then it wins if valid: check it alone
                found = best_warm_start(inst, {"modulo": extra})
                if found[0] == "modulo":
                    warm, hint_rows, horizon = found
            pattern = {"makespan": extra.makespan, **extra.extra,
                       "warm_start": warm == "modulo",
                       "seconds": round(time.perf_counter() - t, 2)}
    if inst.overlap_forward_backward is not None:
        hint = pair_solution(inst, hint_rows)
        # fusing an overlapped I alone can only shorten it
        return warm, hint, hint.makespan, pattern
    return warm, {a.action: inst.ticks(a.start) for a in hint_rows}, horizon, pattern


def _before_search(inst: Instance, candidates: Mapping[str, Schedule],
                   bounds: tuple[int, Any, Any, Any, Any], deadline: float | None,
                   stop: TrackedStop, workers: int = 1,
                   ) -> tuple[str, Any, int, int, dict[str, Any]]:
    """The warm start (:func:`_warm_start`: name, hint, horizon), then the tent, span,
    counting and pair window bounds and the one-device relaxation with pairs against that
    horizon (docs/modelling.md §24, §53, §55, §28, §29): also the bound (ticks) and the
    ``Result.stats`` of these steps (``modulo``, ``tent``, ``span``, ``count``,
    ``pair_windows``, ``pair_relaxation``).  ``bounds``: :func:`_bounds`; with more than one search
    ``workers`` the relaxations run side by side (§36)."""
    lb, g, ht, pair_ht, ordered = bounds
    warm, hint, horizon, pattern = _warm_start(inst, candidates, lb, deadline, stop, workers)
    lb, tents = tent(inst, g, ht, lb, horizon, deadline, stop, pair_ht)
    lb, spans = span(inst, g, ordered, lb, horizon, deadline, stop, workers)  # §53
    lb, counts = count(inst, g, ordered, lb, horizon, deadline, stop, workers)  # §55, §57
    lb, windows = pair_windows(inst, g, pair_ht, lb, horizon, deadline, stop)
    lb, relaxed = pair_relaxation(inst, g, pair_ht and (pair_ht[0], ordered), lb, horizon,
                                  deadline, stop, parallel=workers > 1)
    return warm, hint, horizon, lb, {"modulo": pattern, "tent": tents, "pair_windows": windows,
                                     "pair_relaxation": relaxed, "span": spans,
                                     "count": counts}


def _model(inst: Instance, hint: Any, horizon: int, lb: int) -> PipelineModel:
    """The pipeline model at ``horizon`` with the hint added (its pairs always allowed)."""
    pairs = hint.pairs if isinstance(hint, PairSolution) else ()
    model = PipelineModel(inst, horizon, min(lb, horizon), pairs=pairs)
    model.add_hint(hint)
    return model


def _certify(schedule: Schedule, bound: int, t0: float, warm: str, horizon: int,
             message: str) -> None:
    """Give ``schedule`` its bound (ticks), status, time and provenance, and validate it.

    Raises:
        RuntimeError: the schedule is invalid (a model bug).
    """
    inst = schedule.instance
    makespan = inst.ticks(schedule.makespan)
    schedule.status = Status.OPTIMAL if bound >= makespan else Status.FEASIBLE
    schedule.lower_bound = inst.from_ticks(bound)
    schedule.solve_seconds = time.perf_counter() - t0
    schedule.extra = {"warm_start": warm, "warm_start_makespan": inst.from_ticks(horizon)}
    if message:
        schedule.extra["note"] = message
    violations = validate(schedule)
    if violations:  # never hand out an invalid schedule
        raise RuntimeError("CP-SAT schedule failed validation: " + "; ".join(violations[:5]))
