"""What :func:`cpsched.solver.facade.solve` runs before the full model: the modulo schedule
as one more warm-start candidate on large instances (docs/modelling.md §22), the tent bound
where memory sets the pace (§24), the span bound where a device holds the turns of only a few
microbatches (§53), the counting bound where a device's memory paces its turns (§55), the
pair window bound where F&B pairs may overlap (§28), and the window search that shortens the
warm start (§17) — after it, under bidirectional placement, DualPipe's family (§40) — with
the shares of the time limit they get.

Which of them run is the solve *method* (:data:`METHODS`): ``auto`` decides by the model's
size, ``model`` skips the window search, ``search`` gives it the time the full model would
have had and builds no model.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from cpsched.instance import Instance
from cpsched.model import Schedule
from cpsched.pair_window_bound import pair_window_bound
from cpsched.schedules import modulo
from cpsched.solver import count_beside, lns, modulo_exact
from cpsched.solver.count_bound import applies as count_applies
from cpsched.solver.count_bound import count_bound
from cpsched.solver.family import (
    FAMILY_SHARE,
    TARGET_SHARE,
    family_applies,
    family_candidate,
    fitted_start,
    target_applies,
    target_candidate,
)
from cpsched.solver.overlap import PairSolution, pair_solution
from cpsched.solver.relaxation import (
    may_follow_search,
    pressured_devices,
    relaxation_bound,
    relaxed_devices,
)
from cpsched.solver.search_run import seconds_left
from cpsched.solver.span_bound import applies as span_applies
from cpsched.solver.span_bound import span_bound
from cpsched.solver.warm_start import best_warm_start
from cpsched.tent_bound import applies, tent_bound

#: The solve methods: ``auto`` — on models of :data:`cpsched.solver.lns.MIN_ACTIONS` or more
#: actions (:data:`cpsched.solver.lns.MIN_ACTIONS_PAIRS` with an overlap cost,
#: :data:`cpsched.solver.lns.MIN_ACTIONS_LIMITED` under a memory limit) the window search,
#: then the full model with the time left (:func:`search_share`); below that the full model
#: alone;
#: ``model`` — the full model from the best warm start, whatever the size; ``search`` — the
#: window search with all of the time and no full model (the bound is then the combinatorial
#: one, docs/modelling.md §4, §11, §16).
METHODS = ("auto", "model", "search")

#: share of the time left that the window search gets on models of lns.MIN_ACTIONS or more
#: when the one-device relaxation may follow it (:func:`search_share`; without it the search
#: gets all of the time: at that size the full model after it never shortened its schedule or
#: raised the bound in 120 s, docs/modelling.md §17, §33), and its deterministic budget
#: without a time limit (CP-SAT units, reproducible)
WINDOW_SHARE, WINDOW_DETERMINISTIC_TIME = 0.8, 30.0
#: its share on models below lns.MIN_ACTIONS (with an overlap cost or a memory limit): the
#: full model there can still prove an optimum the search found (p16 bidirectional m16: with
#: 0.8 it did not in 30 s, with 0.5 it did; docs/modelling.md §17, *Pairs below 1500
#: actions*, and §32)
WINDOW_SHARE_SMALL = 0.5
#: share of the time left that the modulo period scan may take, and the model size from
#: which it runs (as the window search; docs/modelling.md §22) — without a memory limit;
#: with one, from MODULO_MIN_ACTIONS_LIMITED (every size: on small memory-capped
#: bidirectional models the pattern beats the list scheduler and what the full model finds
#: in 60 s, e.g. 257 against 285 on p4 m64 at limit 2, §27)
MODULO_SHARE, MODULO_MIN_ACTIONS, MODULO_MIN_ACTIONS_LIMITED = 0.2, 1500, 0
#: share of the time left that CP-SAT's shorter periods may take after the scan
#: (docs/modelling.md §41)
EXACT_SHARE = 0.08
#: the window search is not set up with less time left than this plus the set-up: 0.95 s
#: for 24 576 actions on 2 cores loaded by two other processes (session 19)
MIN_WINDOW_SECONDS, WINDOW_SETUP_SECONDS_PER_ACTION = 0.5, 4e-5
#: share of the time left, and at most this many seconds, for the tent bound's LPs
TENT_SHARE, TENT_MAX_SECONDS = 0.1, 15.0
#: at most this many seconds for the one-device relaxation with pairs (within the tent
#: bound's share), and its CP-SAT deterministic units without a time limit (reproducible)
PAIR_RELAX_MAX_SECONDS, PAIR_RELAX_DETERMINISTIC_TIME = 5.0, 2.0


def check_method(method: str) -> None:
    """Raises:
        ValueError: ``method`` is not one of :data:`METHODS` (the message names them)."""
    if method not in METHODS:
        raise ValueError(f"method = {method!r}: must be one of {', '.join(METHODS)}")


def window_search(inst: Instance, g: Any, hint: Any, horizon: int, lb: int,
                  deadline: float | None, seed: int, parameters: Mapping[str, Any] | None,
                  cb: Any, stop: Any, workers: int = 1, method: str = "auto"
                  ) -> tuple[Any, int, lns.LnsStats | None]:
    """The warm start shortened by the window search (docs/modelling.md §17) when a gap is
    open and the method asks for it: ``(hint, horizon, stats)``; unchanged (stats None)
    otherwise.  With ``auto`` it runs on large models (:func:`search_applies`) for
    :func:`search_share` of the time left, with ``search`` on any model until the
    ``deadline`` (less what is kept back for the end), with ``model`` never.  With an
    overlap cost the hint is a :class:`PairSolution` and the windows form, keep and break
    pairs.  With a deadline each window runs ``workers`` CP-SAT workers, at most one per core
    (:func:`cpsched.solver.lns.window_workers`).

    Args:
        cb: the solve's :class:`cpsched.solver.progress.Progress` (``cb.improved``).
        stop: the solve's stop handle (``stop.requested``, ``stop.give``).
    """
    if method == "model" or lb >= horizon or (method == "auto" and not search_applies(inst)):
        return hint, horizon, None
    budget = WINDOW_DETERMINISTIC_TIME
    if parameters and "max_deterministic_time" in parameters:
        budget = min(budget, float(parameters["max_deterministic_time"]))
    until = None
    if deadline is not None:
        until = time.perf_counter() + search_share(inst, method) * seconds_left(inst, deadline)
        budget = math.inf
        if until - time.perf_counter() < window_setup_seconds(inst):
            return hint, horizon, None  # it could not run a window: do not set it up
    opts: dict[str, Any] = {"deadline": until, "deterministic_time": budget, "seed": seed,
                            "lower": lb, "stop": lambda: stop.requested,
                            "on_improve": cb.improved, "on_solver": stop.give,
                            "workers": lns.window_workers(workers)}
    if not isinstance(hint, PairSolution):
        better, stats = lns.improve(inst, g, hint, **opts)
    else:
        better, stats = lns.improve_overlap(inst, g, hint, **opts)
    if stats.makespan >= horizon:
        return hint, horizon, stats
    return better, stats.makespan, stats


def search_applies(inst: Instance) -> bool:
    """Whether ``auto`` runs the window search: from :data:`cpsched.solver.lns.MIN_ACTIONS`
    actions, :data:`cpsched.solver.lns.MIN_ACTIONS_PAIRS` with an overlap cost, or
    :data:`cpsched.solver.lns.MIN_ACTIONS_LIMITED` under a memory limit."""
    if inst.overlap_forward_backward is not None:
        return inst.n_actions >= lns.MIN_ACTIONS_PAIRS
    if inst.memory_limit is not None:
        return inst.n_actions >= lns.MIN_ACTIONS_LIMITED
    return inst.n_actions >= lns.MIN_ACTIONS


def search_share(inst: Instance, method: str = "auto") -> float:
    """The share of the time left (after what is kept back for the end,
    :func:`cpsched.solver.search_run.seconds_left`) the window search gets: all of it with
    ``search``; with ``auto`` :data:`WINDOW_SHARE_SMALL` below
    :data:`cpsched.solver.lns.MIN_ACTIONS` actions (the full model may still prove what the
    search found); from there on all of it — the full model runs only when the search ends
    early, after sweeps that change nothing — unless the one-device relaxation may follow
    (:func:`cpsched.solver.relaxation.may_follow_search`): then :data:`WINDOW_SHARE`
    (docs/modelling.md §33)."""
    if method == "search":
        return 1.0
    if inst.n_actions < lns.MIN_ACTIONS:
        return WINDOW_SHARE_SMALL
    return WINDOW_SHARE if may_follow_search(inst) else 1.0


def window_setup_seconds(inst: Instance) -> float:
    """The least time left for the window search to start: setting it up (its problem and
    the incumbent, :data:`WINDOW_SETUP_SECONDS_PER_ACTION`) and one short window
    (:data:`MIN_WINDOW_SECONDS`)."""
    return MIN_WINDOW_SECONDS + WINDOW_SETUP_SECONDS_PER_ACTION * inst.n_actions


def modulo_candidate(inst: Instance, deadline: float | None, stop: Any, workers: int = 1,
                     upper: int | None = None) -> Schedule | None:
    """The modulo schedule (:mod:`cpsched.schedules.modulo`) of a large model
    (:data:`MODULO_MIN_ACTIONS`) or of a memory-capped one of any size
    (:data:`MODULO_MIN_ACTIONS_LIMITED`), scanning periods for at most :data:`MODULO_SHARE`
    of the time left; None when no pattern fits.  Without a memory limit it matters where no
    registered schedule fits the instance well.

    Then, when a pattern at the smallest period could be shorter than ``upper`` (ticks, the
    best warm start; its estimate with the greedy's shortest span) and the pattern has at
    most :data:`cpsched.solver.modulo_exact.MAX_PATTERN_ACTIONS` actions, CP-SAT is asked for
    shorter periods than the greedy's (:func:`cpsched.solver.modulo_exact.descend`,
    docs/modelling.md §41) for at most :data:`EXACT_SHARE` of the time left — with a deadline
    at most one worker per core of ``workers``, without one a single worker within
    deterministic limits.  ``stop.requested`` ends either (Ctrl-C).  The schedule's ``extra``
    also gives ``exact_periods``, the periods CP-SAT was asked (0: it did not run)."""
    least = MODULO_MIN_ACTIONS if inst.memory_limit is None else MODULO_MIN_ACTIONS_LIMITED
    if inst.n_actions < least:
        return None
    until = None
    if deadline is not None:
        until = time.perf_counter() + MODULO_SHARE * (deadline - time.perf_counter())
    found = modulo.scan_patterns(inst, until, lambda: stop.requested)
    best = modulo.modulo_schedule(inst, until, lambda: stop.requested, found)
    if best is None:
        return None
    best.extra["exact_periods"] = 0
    start = min(found, key=lambda pat: (pat.period, pat.span))
    reach = replace(start, period=modulo.min_period(inst),
                    span=min(pat.span for pat in found)).estimate(inst.m)
    # descend itself asks nothing when the greedy is already at the smallest period
    if (upper is not None and reach >= upper) or (
            len(start.offsets) > modulo_exact.MAX_PATTERN_ACTIONS):
        return best
    if deadline is not None:
        until = time.perf_counter() + EXACT_SHARE * (deadline - time.perf_counter())
    exact, stats = modulo_exact.descend(
        inst, start, until, lambda: stop.requested,
        1 if until is None else lns.window_workers(workers), stop.give)
    if exact is not None and exact.makespan < best.makespan:
        best = exact
    best.extra["exact_periods"] = stats["periods"]
    return best


def search_and_family(inst: Instance, g: Any, start: tuple[Any, int, int],
                      deadline: float | None, seed: int, parameters: Mapping[str, Any] | None,
                      cb: Any, stop: Any, workers: int, method: str,
                      known: tuple[Mapping[str, Schedule], dict[str, Any]],
                      ) -> tuple[Any, int, lns.LnsStats | None]:
    """The window search (:func:`window_search`), then DualPipe's family where it applies
    (:mod:`cpsched.solver.family`: :func:`~cpsched.solver.family.family_applies`,
    :func:`~cpsched.solver.family.family_candidate`; not with the method ``model``, which
    runs the full model from the best warm start) with
    :data:`~cpsched.solver.family.FAMILY_SHARE` of the time left before the search, kept
    from it; the shorter schedule is the hint (an improvement is reported to ``cb``).  Run
    after the search, the family never replaces a shorter schedule: as a warm start it led
    the search on the p = 16 row to 97.5, not 96.5 (§40).  Before the search, where
    :func:`~cpsched.solver.family.target_applies`, the tight middle asked for a schedule
    within 1 % of ``lb`` (:func:`~cpsched.solver.family.target_candidate`, §48) with
    :data:`~cpsched.solver.family.TARGET_SHARE` of the time left; when it finds one, that
    is the search's hint and the family does not run.  Where the window search keeps the
    time (:func:`search_share`), DualPipe is over the memory limit and fitted to it is a
    little longer than the hint (:func:`~cpsched.solver.family.fitted_start`, §62), the
    window search starts from the fitted DualPipe; its result replaces the hint only when
    shorter.

    Args:
        start: ``(hint, horizon, lb)`` as for :func:`window_search`.
        known: the candidates and the ``Result.stats`` so far, which get
            ``"target"``, ``"dualpipe_fitted"`` and ``"dualpipe_family"`` (None when they
            did not run).

    Returns:
        ``(hint, horizon, the window search's stats)``.
    """
    hint, horizon, lb = start
    candidates, stats = known
    runs = method != "model" and family_applies(inst, candidates, lb)
    stats["target"] = None
    if runs and target_applies(inst) and not stop.requested:
        seconds = None if deadline is None else TARGET_SHARE * seconds_left(inst, deadline)
        if seconds is None or seconds >= MIN_WINDOW_SECONDS:
            hit, stats["target"] = target_candidate(inst, candidates["dualpipe"], lb, seconds,
                                                    stop, workers)
            runs = hit is None  # within the target: the search gets the family's time
            if hit is not None and inst.ticks(hit.makespan) < horizon:
                hint, horizon = _adopt(inst, hit, cb)
    seconds = None
    if runs and deadline is not None:
        seconds = FAMILY_SHARE * seconds_left(inst, deadline)
        runs = seconds >= MIN_WINDOW_SECONDS
    until = deadline - seconds if runs and seconds is not None else deadline
    base = hint, horizon
    # §62: only where the window search keeps the time (on small instances, where the full
    # model follows it, the fitted start did not help: p8 m16 limit 8 49.5 against 49)
    fit = None if search_share(inst, method) < 1.0 or method == "model" else fitted_start(
        inst, candidates, horizon)
    stats["dualpipe_fitted"] = None
    if fit is not None:  # §62: the search starts from DualPipe fitted to the limit
        hint = pair_solution(inst, best_warm_start(inst, {"dualpipe-fitted": fit})[1])
        horizon = hint.makespan
    hint, horizon, windows = window_search(inst, g, hint, horizon, lb, until, seed,
                                           parameters, _Below(cb, base[1]), stop, workers,
                                           method)
    if fit is not None:
        stats["dualpipe_fitted"] = None if windows is None else {
            "makespan": fit.makespan, "shorter": horizon < base[1]}
    if horizon >= base[1]:  # never worse than the warm start
        hint, horizon = base
    stats["dualpipe_family"] = None
    if runs and horizon > lb and not stop.requested:
        fam, stats["dualpipe_family"] = family_candidate(inst, candidates["dualpipe"], lb,
                                                         seconds, stop, workers)
        if fam is not None and inst.ticks(fam.makespan) < horizon:
            hint, horizon = _adopt(inst, fam, cb)
    return hint, horizon, windows


class _Below:
    """``cb`` (:class:`cpsched.solver.progress.Progress`) told of the window search's
    improvements only below ``best`` (ticks): the search may start from a longer schedule
    than the warm start (DualPipe fitted to the limit, §62)."""

    def __init__(self, cb: Any, best: int) -> None:
        self.cb, self.best = cb, best

    def improved(self, makespan: int) -> None:
        """A shorter schedule (ticks), passed on when below the best so far."""
        if makespan < self.best:
            self.best = makespan
            self.cb.improved(makespan)


def _adopt(inst: Instance, found: Schedule, cb: Any) -> tuple[PairSolution, int]:
    """``found`` (a family schedule shorter than the hint) as the new hint and horizon
    (ticks), reported to ``cb``."""
    hint = pair_solution(inst, best_warm_start(inst, {"dualpipe-family": found})[1])
    cb.improved(hint.makespan)
    return hint, hint.makespan


def _bound_seconds(deadline: float | None, share: float = TENT_SHARE,
                   most: float = TENT_MAX_SECONDS) -> float | None:
    """Seconds for a bound: ``share`` of the time left, at most ``most`` (default the tent
    bound's :data:`TENT_SHARE`, :data:`TENT_MAX_SECONDS`; None without a deadline)."""
    if deadline is None:
        return None
    return min(share * (deadline - time.perf_counter()), most)


def tent(inst: Instance, g: Any, ht: Any, lb: int, upper: int, deadline: float | None,
         stop: Any, relaxed: Any = None) -> tuple[int, dict[str, Any] | None]:
    """The tent bound (:mod:`cpsched.tent_bound`, docs/modelling.md §24) when it applies and
    a gap to ``upper`` (a known makespan, ticks) is open, within :data:`TENT_SHARE` of the
    time left (at most :data:`TENT_MAX_SECONDS`; the LPs are deterministic without a limit):
    the bound (ticks, at least ``lb``) and ``Result.stats["tent"]`` (None when it did not
    run).  ``relaxed``: with an overlap cost the graph's pair-relaxed durations, heads and
    tails (:func:`cpsched.graph.overlap_heads_tails`), or None to compute them."""
    if not applies(inst) or lb >= upper or stop.requested:
        return lb, None
    wall = _bound_seconds(deadline)
    if wall is not None and wall < 0.2:
        return lb, None
    r = tent_bound(inst, g, ht, lb, upper, time_limit=wall, stopped=lambda: stop.requested,
                   relaxed=relaxed)
    return r.bound, {"bound": inst.from_ticks(r.bound), "before": inst.from_ticks(lb),
                     "devices": list(r.devices), "cell": inst.from_ticks(r.cell),
                     "complete": r.complete, "seconds": round(r.seconds, 2)}


#: share of the time left the span bound may take, and its most seconds (docs/modelling.md
#: §53: the p = 8 analog of the limit-8 row took 12 s for its three small models)
SPAN_SHARE, SPAN_MAX_SECONDS = 0.15, 20.0


def span(inst: Instance, g: Any, ordered: Any, lb: int, upper: int, deadline: float | None,
         stop: Any, workers: int = 1) -> tuple[int, dict[str, Any] | None]:
    """The span bound (:mod:`cpsched.solver.span_bound`, docs/modelling.md §53) when it
    applies and a gap to ``upper`` (a known makespan, ticks) is open, within
    :data:`SPAN_SHARE` of the time left (at most :data:`SPAN_MAX_SECONDS`; without a
    deadline each small model within its deterministic limit): the bound (ticks, at least
    ``lb``) and ``Result.stats["span"]`` (None when it did not run).  ``ordered``: the heads
    and tails of every FIFO schedule (with the implied orders, docs/modelling.md §30)."""
    if not span_applies(inst) or lb >= upper or stop.requested:
        return lb, None
    wall = _bound_seconds(deadline, SPAN_SHARE, SPAN_MAX_SECONDS)
    if wall is not None and wall < 0.2:
        return lb, None
    r = span_bound(inst, ordered, lambda a: g.nodes[a]["duration"], lb, upper,
                   time_limit=wall, workers=workers, stopped=lambda: stop.requested,
                   on_solver=stop.give)
    return r.bound, {"bound": inst.from_ticks(r.bound), "before": inst.from_ticks(lb),
                     "stage": r.stage, "spans": [inst.from_ticks(v) for v in r.spans],
                     "solved": list(r.solved), "seconds": round(r.seconds, 2)}


#: share of the time left the counting bound may take, and its most seconds (docs/modelling.md
#: §55: a device LP of 10 000 variables solves in about 1.5 s, 5-15 of them a bound)
COUNT_SHARE, COUNT_MAX_SECONDS = 0.12, 15.0


def count(inst: Instance, g: Any, ordered: Any, lb: int, upper: int, deadline: float | None,
          stop: Any, workers: int = 1) -> tuple[int, dict[str, Any] | None]:
    """The counting bound (:mod:`cpsched.solver.count_bound`, docs/modelling.md §55) of the
    most pressured device when it applies and a gap to ``upper`` (a known makespan, ticks)
    is open, within :data:`COUNT_SHARE` of the time left (at most
    :data:`COUNT_MAX_SECONDS`; with a deadline the integer program may follow the LP when
    its share allows, docs/modelling.md §56; with more than one search ``workers`` it runs
    instead in a child beside the search, :mod:`cpsched.solver.count_beside`, §57): the
    bound (ticks, at least ``lb``) and ``Result.stats["count"]`` (None when it did not run;
    the child's handle under ``"beside"`` until :func:`~cpsched.solver.count_beside.collect`).
    ``ordered``: the heads and tails of every FIFO schedule (docs/modelling.md §30)."""
    if not count_applies(inst) or lb >= upper or stop.requested:
        return lb, None
    wall = _bound_seconds(deadline, COUNT_SHARE, COUNT_MAX_SECONDS)
    if wall is not None and wall < 0.5:
        return lb, None
    devices = pressured_devices(inst, g, ordered, 1)
    beside = count_beside.applies(deadline, workers) and bool(devices)
    # the integer program (§56) only with a deadline: its time is not known in advance
    r = count_bound(inst, g, ordered, lb, upper, devices, time_limit=wall,
                    stopped=lambda: stop.requested, integer=deadline is not None and not beside)
    stats = {"bound": inst.from_ticks(r.bound), "before": inst.from_ticks(lb),
             "device": r.device, "grid": inst.from_ticks(r.grid), "lps": r.lps,
             "programs": r.programs, "complete": r.complete, "seconds": round(r.seconds, 2)}
    if beside and deadline is not None:  # §57
        stats[count_beside.KEY] = count_beside.start(inst, g, ordered, devices[0], r, upper,
                                                     deadline, stop)
    return r.bound, stats


def pair_windows(inst: Instance, g: Any, relaxed: Any, lb: int, upper: int,
                 deadline: float | None, stop: Any) -> tuple[int, dict[str, Any] | None]:
    """The pair window bound (:mod:`cpsched.pair_window_bound`, docs/modelling.md §28) with
    an overlap cost and a gap to ``upper`` (a known makespan, ticks) open, within the tent
    bound's share of the time left (:func:`_bound_seconds`; deterministic without a limit):
    the bound (ticks, at least ``lb``) and ``Result.stats["pair_windows"]`` (None when it
    did not run).  ``relaxed``: the graph's pair-relaxed durations, heads and tails
    (:func:`cpsched.graph.overlap_heads_tails`), or None to compute them."""
    if inst.overlap_forward_backward is None or lb >= upper or stop.requested:
        return lb, None
    t = time.perf_counter()
    wall = _bound_seconds(deadline)
    if wall is not None and wall < 0.2:
        return lb, None
    bound = pair_window_bound(inst, g, lower=lb, upper=upper, relaxed=relaxed,
                              deadline=None if wall is None else t + wall,
                              stopped=lambda: stop.requested)
    return bound, {"bound": inst.from_ticks(bound), "before": inst.from_ticks(lb),
                   "seconds": round(time.perf_counter() - t, 2)}


def pair_relaxation(inst: Instance, g: Any, relaxed: Any, lb: int, upper: int,
                    deadline: float | None, stop: Any, *, parallel: bool = False,
                    ) -> tuple[int, dict[str, Any] | None]:
    """The one-device relaxation with overlapped pairs (docs/modelling.md §29) of the
    devices holding a first stage (:func:`cpsched.solver.relaxation.pressured_devices`) with
    at most :data:`cpsched.solver.relaxation.MAX_PAIR_ACTIONS` actions, with an overlap cost and
    a gap to ``upper`` (a known makespan, ticks) open, within the tent bound's share of the
    time left and at most :data:`PAIR_RELAX_MAX_SECONDS` (without a limit
    :data:`PAIR_RELAX_DETERMINISTIC_TIME` units, one worker: reproducible): the bound
    (ticks, at least ``lb``) and ``Result.stats["pair_relaxation"]`` (None when it did not
    run).  ``relaxed``: the graph's pair-relaxed durations, heads and tails
    (:func:`cpsched.graph.overlap_heads_tails`).  With ``parallel`` and a limit, devices 0
    and ``p - 1`` of bidirectional placement run side by side, each with the whole time
    (docs/modelling.md §36)."""
    if inst.overlap_forward_backward is None or lb >= upper or stop.requested:
        return lb, None
    ht = relaxed[1]
    top = 2 if inst.placement == "bidirectional" else 1
    if not relaxed_devices(inst, g, ht, top, pairs=True):
        return lb, None
    t = time.perf_counter()
    wall = _bound_seconds(deadline)
    if wall is not None:
        wall = min(wall, PAIR_RELAX_MAX_SECONDS)
        if wall < 0.2:
            return lb, None
    units = PAIR_RELAX_DETERMINISTIC_TIME if wall is None else 4 * wall
    bound, devices = relaxation_bound(inst, g, ht, lb, upper, deterministic_time=units,
                                      time_limit=wall, top=top, on_solver=stop.give,
                                      stopped=lambda: stop.requested, pairs=True,
                                      parallel=parallel)
    return bound, {"bound": inst.from_ticks(bound), "before": inst.from_ticks(lb),
                   "devices": [(r.device, inst.from_ticks(r.bound), r.solved)
                               for r in devices],
                   "seconds": round(time.perf_counter() - t, 2)}


def window_stats(inst: Instance, stats: lns.LnsStats | None) -> dict[str, Any] | None:
    """``Result.stats["window_search"]``: windows solved, improvements, plateau moves,
    seconds, makespan, and the makespan it started from (``from``: the warm start's, or the
    target run's, docs/modelling.md §48)."""
    if stats is None:
        return None
    return {"windows": stats.windows, "improvements": stats.improvements,
            "plateau_moves": stats.plateau_moves,
            "seconds": round(stats.seconds, 2), "makespan": inst.from_ticks(stats.makespan),
            "from": inst.from_ticks(stats.first)}


__all__ = ["METHODS",
           "MIN_WINDOW_SECONDS", "MODULO_MIN_ACTIONS", "PAIR_RELAX_DETERMINISTIC_TIME",
           "PAIR_RELAX_MAX_SECONDS",
           "MODULO_MIN_ACTIONS_LIMITED", "MODULO_SHARE", "EXACT_SHARE",
           "TENT_MAX_SECONDS", "TENT_SHARE", "WINDOW_DETERMINISTIC_TIME",
           "WINDOW_SETUP_SECONDS_PER_ACTION", "WINDOW_SHARE", "WINDOW_SHARE_SMALL",
           "COUNT_MAX_SECONDS", "COUNT_SHARE", "check_method", "count", "modulo_candidate",
           "pair_relaxation", "pair_windows", "search_and_family", "search_applies",
           "search_share", "tent", "window_search", "window_setup_seconds", "window_stats"]
