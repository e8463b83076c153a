"""Large-neighbourhood search over device orders (docs/modelling.md §17).

At p = 16–32 the full model has 10 000–30 000 intervals and CP-SAT rarely improves the warm
start within minutes.  This search improves it one *time window* at a time:

1. the incumbent — device orders of *steps* (an action, or with an overlap cost an overlapped
   F&B pair), re-timed ASAP by the one simulator (:func:`cpsched.engine.run_orders`) — is
   cut at two times ``t1 < t2``: the steps starting before ``t1`` stay where they are, the
   steps starting at or after ``t2`` keep their device order, and the steps in between (the
   *window*, a few hundred) are re-scheduled by a small CP-SAT model
   (:mod:`cpsched.solver.lns_window`);
2. the window model has the window's dependencies, ``NoOverlap`` per device, FIFO, and each
   device's memory limit with what the fixed part holds; with an overlap cost
   (:func:`improve_pairs`) it may form, keep or break pairs among the window's actions; its
   objective is the makespan the whole schedule gets — ``end(a) + q(a)`` with ``q(a)`` the
   longest path from ``a`` through the later part in the incumbent's order graph
   (dependencies and device order), and the longest path that avoids the window;
3. the new device orders (before, window by new start, after) are re-timed by the simulator and
   kept when the makespan is shorter.

The search starts with large windows over the *end* of the schedule (:func:`_drain_windows`:
the cool-down, which sweeps from the start reach last; until a window gains little), then
sweeps windows from the start;
after a sweep without a shorter schedule it sweeps once with *plateau* windows, which keep a
schedule as long as before when nothing after the window gets later and some work earlier
(docs/modelling.md §17).

Every step is exact, not a guess: on a device the window is a contiguous part of its order and
keeps the same actions, so the memory a device holds after the window — which depends on its
own order only (a stage's activation is allocated and freed on its device) — is unchanged; and
no dependency goes back from the later part into the window, so the new orders never deadlock.
A pair is one step, so it is wholly inside a window or outside; an ``I`` may join a pair only
with its ``W`` in the same window (the pair runs the ``W``, as in the full model).
The search only makes the schedule shorter; it proves nothing (the bound is the full model's).

Sources: large-neighbourhood search (Shaw, CP 1998) and time-window relaxation for
scheduling (Pisinger & Ropke, *Large neighborhood search*, 2010); the issue's direction of
fixing most of the incumbent and re-optimising a window with CP-SAT.
"""

from __future__ import annotations

import random
import time
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
from ortools.sat.python import cp_model

from cpsched.actions import Action
from cpsched.forked import usable_cores
from cpsched.instance import Instance
from cpsched.solver.cpsat import full_subsolvers, solve_model
from cpsched.solver.lns_state import Incumbent, Problem, Unit, unit_orders
from cpsched.solver.lns_window import WindowModel, window_model
from cpsched.solver.overlap import PairSolution

#: Fewer actions than this: the full model is small enough, the search is not used.
MIN_ACTIONS = 1500
#: The same with an overlap cost: the full model with its candidate pairs finds little from
#: 500 actions on (p8 bidirectional m32 at 1F1B's memory: 127.17 -> 126.24 in 300 s, the
#: window search 120.63 in 55 s; docs/modelling.md §17, *Pairs below 1500 actions*), nor
#: at 384-432 (eleven random bidirectional instances with pairs: nine 0.6-9.2 % longer
#: than with the window search first, none shorter; at 192 actions not, §59).
MIN_ACTIONS_PAIRS = 300
#: The same under a memory limit (no overlap cost): from 500 actions on the full model finds
#: less in 60 s than the window search with half of the time, e.g. 371.14 against 336.95 on
#: a random p12 V m24 instance at half of 1F1B's memory (docs/modelling.md §32).
MIN_ACTIONS_LIMITED = 500
#: Window size (actions) the search starts from, and its limits while it adapts.
START_WINDOW, MIN_WINDOW, MAX_WINDOW = 400, 120, 2500
#: CP-SAT deterministic time and wall seconds per window.
WINDOW_DETERMINISTIC_TIME, WINDOW_SECONDS = 1.0, 3.0
#: CP-SAT's presolve in windows without pairs, and in pair windows.  Off without pairs: in
#: 60 s runs side by side it gave shorter schedules in 8 of 10 (r40-7 of seed 40 745-748 ->
#: 715-730, lim8 1677.7 -> 1670.2, r39-3 693 -> 689, V-Min 878.4 / 877.2 -> 876.3 / 876.3;
#: limit 24 2320 -> 2330 and r40-0 1574.9 -> 1576.1, within their spread), and it never meets
#: OR-Tools' presolve error on a hinted model.  On with pairs: DualPipe limit 10 202.15 ->
#: 204.17 without it (docs/modelling.md §44).
WINDOW_PRESOLVE, WINDOW_PRESOLVE_PAIRS = False, True
#: Sweep windows run with the shorter limits below while at least ADAPT_SHARE of the last
#: ADAPT_RECENT sweep windows made the schedule shorter (:func:`_sweep_limits`): when nearly
#: every window gains, more windows gain more (memory-paced random V p16 m128, `-t 120`: a
#: quarter unit and 0.75 s 1555.25 / 1549.32, half a unit and 1.5 s 1568.57–1575.49, the full
#: limits always 1583.19–1594.29); where gains are rare and come late in a window (limit 24)
#: the full limits stay (docs/modelling.md §38).
ADAPT_RECENT, ADAPT_SHARE = 8, 0.75
SHORT_DETERMINISTIC_TIME, SHORT_SECONDS = 0.25, 0.75
#: The search ends after this many sweeps in a row over the whole schedule that changed nothing
#: (no shorter schedule, no plateau move); with
#: pairs more (their windows mostly end at their time limit unproven, so sweeps at other
#: offsets still find shorter ones: DualPipe p16 m32 stopped at 97.5 after 2, 97.0 with 6).
MAX_STALE_SWEEPS, MAX_STALE_SWEEPS_WITH_PAIRS = 2, 6
#: After a sweep without a shorter schedule, sweep once with plateau windows: moves that keep
#: the makespan and leave nothing after the window later, some of it earlier
#: (docs/modelling.md §17, *Plateau sweeps*).
PLATEAU = True
#: Seconds a window's wall limit keeps from the deadline (beyond 0.1 s): CP-SAT with two
#: workers overran a window's ``max_time_in_seconds`` by up to 1.07 s (r50-6 of seed 50;
#: mostly under 0.2 s), which took `solve -t 60` to 60.66 s when it was the last window
#: (docs/modelling.md §61).  Only a window that the deadline cuts short keeps it, and the
#: search ends when no window of a quarter of a second is left.
END_MARGIN = 0.75
#: The cool-down first (:func:`_drain_windows`): share of the budget, first window size
#: (actions), CP-SAT deterministic time and wall seconds per window, windows in a row
#: without a shorter schedule before the sweeps start.
DRAIN_SHARE = 0.4
DRAIN_WINDOW, DRAIN_DETERMINISTIC_TIME, DRAIN_SECONDS, DRAIN_TRIES = 1000, 8.0, 15.0, 3
#: A cool-down window that shortens the schedule by less than this share of its makespan ends
#: the phase: the cool-down's large waits are gone and the sweeps find more per second
DRAIN_MIN_GAIN = 0.005
#: pair windows too (off: on the DualPipe rows they gave the same results as the sweeps)
DRAIN_WITH_PAIRS = False
#: With an overlap cost and a pair-free start: share of the time to the deadline for the
#: pair-free windows; the pair windows get the rest (with all of it the pair-free windows
#: left the pair windows next to nothing: capped DualPipe 208.25 at 120 s; with half 201.25)
PAIR_FREE_SHARE = 0.5


@dataclass
class LnsStats:
    """What :func:`improve` did: windows solved, windows that made the schedule shorter,
    plateau moves (as long, work earlier), seconds, the makespan reached (ticks), each
    window's size (actions) and the makespan it started from (ticks: the incumbent's, ASAP,
    when :func:`search` began; over :func:`improve_overlap`'s two parts the first's)."""

    windows: int = 0
    improvements: int = 0
    plateau_moves: int = 0
    seconds: float = 0.0
    makespan: int = 0
    sizes: list[int] = field(default_factory=list)
    first: int = 0


def improve(inst: Instance, g: nx.DiGraph, starts: Mapping[Action, int], **kw: Any
            ) -> tuple[dict[Action, int], LnsStats]:
    """Shorten a valid schedule by re-scheduling one time window at a time (module docstring).

    Args:
        inst, g: the instance and its task graph (:func:`cpsched.graph.build_task_graph`).
        starts: a valid schedule ``{action: start tick}`` over the graph's actions, fitting
            the model's integer memory units (the warm start does).
        kw: the search's options (:func:`search`).

    Returns:
        ``(starts, stats)``: the best schedule found — never longer than ``starts`` — as
        ASAP start ticks, and :class:`LnsStats`.

    With an overlap cost this search does not form pairs (every action keeps running alone:
    valid, pairs are allowed, never required, docs/spec.md §1); :func:`improve_pairs` does.
    """
    pb = Problem(inst, g, pairs=False)
    inc, stats = search(pb, unit_orders(pb, starts, {a: t + pb.dur[a] for a, t in starts.items()},
                                   []), **kw)
    return dict(inc.start), stats


def improve_pairs(inst: Instance, g: nx.DiGraph, solution: PairSolution, **kw: Any
                  ) -> tuple[PairSolution, LnsStats]:
    """:func:`improve` for an instance with an overlap cost, forming, keeping and breaking
    overlapped F&B pairs inside each window (docs/modelling.md §15, §17).

    Args:
        solution: a valid solution in the overlap model's terms (its pairs may be none).
        kw: the search's options (:func:`search`).

    Returns:
        ``(solution, stats)``: the best found, never longer, ASAP.
    """
    pb = Problem(inst, g, pairs=True)
    inc, stats = search(pb, unit_orders(pb, solution.start, solution.end, solution.pairs), **kw)
    pairs = [(u[0], u[1]) for row in inc.orders for u in row if len(u) > 1]
    return PairSolution(dict(inc.start), dict(inc.end), pairs), stats


def improve_overlap(inst: Instance, g: nx.DiGraph, solution: PairSolution, *,
                    deadline: float | None = None, stop: Callable[[], bool] | None = None,
                    **kw: Any) -> tuple[PairSolution, LnsStats]:
    """The window search with an overlap cost: from a start with pairs :func:`improve_pairs`;
    from a pair-free one (e.g. the modulo pattern under a cap) first the cheaper pair-free
    windows (:func:`improve`) for :data:`PAIR_FREE_SHARE` of the time to ``deadline``, then
    the pair windows with the rest.  Arguments as :func:`search`."""
    if solution.pairs:
        return improve_pairs(inst, g, solution, deadline=deadline, stop=stop, **kw)
    until = None if deadline is None else (
        time.perf_counter() + PAIR_FREE_SHARE * (deadline - time.perf_counter()))
    starts, first = improve(inst, g, solution.start, deadline=until, stop=stop, **kw)
    dur: dict[Action, int] = nx.get_node_attributes(g, "duration")
    sol = PairSolution(starts, {a: t + dur[a] for a, t in starts.items()}, [])
    if (stop is not None and stop()) or (
            deadline is not None and deadline - time.perf_counter() < 1.0):
        return sol, first
    sol, more = improve_pairs(inst, g, sol, deadline=deadline, stop=stop, **kw)
    return sol, LnsStats(first.windows + more.windows, first.improvements + more.improvements,
                         first.plateau_moves + more.plateau_moves, first.seconds + more.seconds,
                         more.makespan, first.sizes + more.sizes, first.first)


def search(pb: Problem, orders: list[list[Unit]], *, deadline: float | None = None,
           deterministic_time: float = 30.0, seed: int = 0, lower: int = 0,
           stop: Callable[[], bool] | None = None,
           on_improve: Callable[[int], None] | None = None,
           on_solver: Callable[[cp_model.CpSolver], None] | None = None,
           workers: int = 1) -> tuple[Incumbent, LnsStats]:
    """The window search from device ``orders`` of steps (module docstring): first large
    windows over the end of the schedule (:func:`_drain_windows`), then sweeps of windows
    from its start.

    Args:
        deadline: ``time.perf_counter()`` value to stop by (None: only the deterministic
            budget counts).
        deterministic_time: CP-SAT deterministic time over all windows (reproducible when
            ``deadline`` does not bind: one worker, fixed seed).
        lower: a proven lower bound (ticks); the search stops when it reaches it.
        stop: polled between windows; True ends the search (Ctrl-C).
        on_improve: called with each shorter makespan (ticks).
        on_solver: called with each window's ``CpSolver`` before it solves (its
            ``stop_search()`` ends that window at once).
        workers: CP-SAT workers per window with a ``deadline`` (without one always 1:
            reproducible).  Two on a 2-core machine: the second core is otherwise idle
            while the search runs, and two workers gave a shorter schedule on every row
            measured (docs/modelling.md §17, *Two workers per window*).
    """
    run = _Search(pb, Incumbent(pb, orders), deadline, deterministic_time, seed, lower, stop,
                  on_improve, on_solver, max(1, workers) if deadline is not None else 1)
    run.stats.first = run.inc.makespan
    _drain_windows(run)
    _sweeps(run)
    run.stats.seconds = time.perf_counter() - run.t_begin
    run.stats.makespan = run.inc.makespan
    return run.inc, run.stats


@dataclass
class _Search:
    """The search's state and options (arguments as :func:`search`)."""

    pb: Problem
    inc: Incumbent
    deadline: float | None
    deterministic_time: float
    seed: int
    lower: int
    stop: Callable[[], bool] | None
    on_improve: Callable[[int], None] | None
    on_solver: Callable[[cp_model.CpSolver], None] | None
    workers: int = 1
    used: float = 0.0
    t_begin: float = field(default_factory=time.perf_counter)
    stats: LnsStats = field(default_factory=LnsStats)

    def left(self) -> float | None:
        """Seconds to the deadline (None without one)."""
        return None if self.deadline is None else self.deadline - time.perf_counter()

    def over(self) -> bool:
        """Budget spent, bound reached, Ctrl-C, or too little time to the deadline for a
        window (:data:`END_MARGIN` and a quarter of a second more)."""
        left = self.left()
        return (self.used >= self.deterministic_time or self.inc.makespan <= self.lower
                or (self.stop is not None and self.stop())
                or (left is not None and left < END_MARGIN + 0.35))

    def window(self, window: set[Action], before: set[Action], deterministic_time: float,
               seconds: float, plateau: bool = False) -> tuple[int, float, float] | None:
        """Solve one window and keep a shorter schedule (with ``plateau`` also one that
        moves work earlier at the same makespan).  Returns ``(CP-SAT status, deterministic
        time, wall seconds when they count)``, or None when the window has no model or
        Ctrl-C came first."""
        wm = window_model(self.pb, self.inc, window, before, plateau)
        self.stats.windows += 1
        self.stats.sizes.append(len(window))
        if wm is None:
            return None
        left = self.left()
        solver = _window_solver(self.seed + self.stats.windows,
                                min(deterministic_time, self.deterministic_time - self.used),
                                left, seconds, self.workers,
                                WINDOW_PRESOLVE if self.pb.overlap is None
                                else WINDOW_PRESOLVE_PAIRS)
        if self.on_solver is not None:
            self.on_solver(solver)
        if self.stop is not None and self.stop():
            return None
        code = solve_model(solver, wm.model)
        self.used += solver.deterministic_time
        cand = _candidate(self.pb, self.inc, solver, code, wm, window, plateau)
        inc = self.inc
        if cand is not None and cand.makespan < inc.makespan:
            self.inc = cand
            self.stats.improvements += 1
            if self.on_improve is not None:
                self.on_improve(cand.makespan)
        elif (cand is not None and plateau
              and sum(cand.end.values()) < sum(inc.end.values())):
            self.inc = cand
            self.stats.plateau_moves += 1
        # pair windows presolve long for little deterministic time: with a deadline their
        # wall time counts too (without one only deterministic measures: reproducible)
        wall = solver.wall_time if left is not None and self.pb.overlap is not None else 0.0
        return code, solver.deterministic_time, wall


def _drain_windows(run: _Search) -> None:
    """Large windows over the end of the schedule first, for :data:`DRAIN_SHARE` of the
    budget: sweeps from the start reach the cool-down last, often not within the budget at
    p = 16–32, and its waits are where a known schedule built for uniform costs loses most
    (docs/modelling.md §17, *The cool-down first*).  The window keeps its size after a
    shorter schedule, grows after a proof and shrinks after a time-out; the phase ends
    after :data:`DRAIN_TRIES` windows in a row without a shorter schedule."""
    if run.pb.overlap is not None and not DRAIN_WITH_PAIRS:
        return
    budget = run.used + DRAIN_SHARE * run.deterministic_time
    until = None if run.deadline is None else (
        time.perf_counter() + DRAIN_SHARE * (run.deadline - time.perf_counter()))
    size, fails = min(DRAIN_WINDOW, MAX_WINDOW, len(run.inc.by_start) // 2), 0
    while fails < DRAIN_TRIES and run.used < budget and not run.over() and (
            until is None or until - time.perf_counter() > 1.0):
        n = len(run.inc.by_start)
        if size > min(MAX_WINDOW, n // 2):
            break  # grown to its limit: the sweeps take over
        size = max(MIN_WINDOW, size)
        before = run.inc.makespan
        window, fixed = _choose(run.inc, n - size, size)
        seconds = DRAIN_SECONDS if until is None else min(DRAIN_SECONDS,
                                                          until - time.perf_counter())
        out = run.window(window, fixed, min(DRAIN_DETERMINISTIC_TIME, budget - run.used),
                         seconds)
        if run.inc.makespan < before:
            if before - run.inc.makespan < DRAIN_MIN_GAIN * before:
                break
            fails = 0
            continue
        fails += 1
        size = int(size * (1.4 if out is None or out[0] == cp_model.OPTIMAL else 0.75))


def _sweeps(run: _Search) -> None:
    """Windows sweeping the schedule from its start, each half a window after the previous
    one (plus a random offset), resized after each (:func:`_resize`), with the short limits
    while nearly every recent window made the schedule shorter (:func:`_sweep_limits`);
    after a sweep without a shorter schedule, a plateau sweep (:data:`PLATEAU`); ends after
    :data:`MAX_STALE_SWEEPS` sweeps in a row that changed nothing."""
    rng = random.Random(run.seed)
    size, cursor, stale = START_WINDOW, 0, 0
    plateau = shorter = moved = False  # this sweep's kind; what it achieved
    limit = MAX_STALE_SWEEPS if run.pb.overlap is None else MAX_STALE_SWEEPS_WITH_PAIRS
    recent: deque[bool] = deque(maxlen=max(1, ADAPT_RECENT))  # did each window shorten it?
    while not run.over():
        n = len(run.inc.by_start)
        if cursor >= n:  # a sweep over the schedule ended
            cursor, stale = 0, 0 if moved else stale + 1
            if stale > limit:
                break
            # after a sweep that found no shorter schedule, one that moves work earlier
            plateau, shorter, moved = PLATEAU and not shorter, False, False
        window, before = _choose(run.inc, cursor, min(size, n))
        cursor += max(1, size // 2) + rng.randrange(max(1, size // 4))
        makespan, plateau_moves = run.inc.makespan, run.stats.plateau_moves
        limits = _sweep_limits(recent)
        out = run.window(window, before, *limits, plateau)
        if out is None:
            if run.stop is not None and run.stop():
                break
            continue
        size = _resize(size, *out, *limits)
        gained = run.inc.makespan < makespan
        recent.append(gained)
        shorter |= gained
        moved |= gained or run.stats.plateau_moves > plateau_moves


def _sweep_limits(recent: deque[bool]) -> tuple[float, float]:
    """A sweep window's CP-SAT deterministic limit and wall seconds: the short ones
    (:data:`SHORT_DETERMINISTIC_TIME`, :data:`SHORT_SECONDS`) when ``recent`` — whether each
    of the last sweep windows made the schedule shorter — is full (:data:`ADAPT_RECENT`) and
    at least :data:`ADAPT_SHARE` of it is True, else the full ones."""
    if (ADAPT_RECENT > 0 and len(recent) >= ADAPT_RECENT
            and sum(recent) >= ADAPT_SHARE * len(recent)):
        return SHORT_DETERMINISTIC_TIME, SHORT_SECONDS
    return WINDOW_DETERMINISTIC_TIME, WINDOW_SECONDS


def window_workers(workers: int) -> int:
    """CP-SAT workers per window with a deadline: ``workers``, at most one per core this
    process may use.  A window is small and mostly proven: workers beyond the cores only
    share them (on 2 cores, 4 workers per window gave the same schedules as 2)."""
    return usable_cores(workers)


def _window_solver(seed: int, deterministic_time: float, left: float | None,
                   seconds: float = WINDOW_SECONDS, workers: int = 1,
                   presolve: bool = True) -> cp_model.CpSolver:
    """``workers`` CP-SAT workers (:func:`search` gives one without a deadline), the seed,
    the window's deterministic limit and — only with a deadline, ``left`` seconds away — a
    wall limit of at most ``seconds`` that ends :data:`END_MARGIN` before it; CP-SAT's
    presolve on or off (:data:`WINDOW_PRESOLVE`); its SIGINT handler off (Ctrl-C is the
    caller's)."""
    solver = cp_model.CpSolver()
    prm = solver.parameters
    prm.num_workers = max(1, workers)
    prm.cp_model_presolve = presolve
    prm.random_seed = seed
    prm.catch_sigint_signal = False
    prm.max_deterministic_time = max(0.0, deterministic_time)
    full_subsolvers(prm)  # two workers or more: no interleaved fj/ls (docs/modelling.md §48)
    if left is not None:  # without a deadline only deterministic limits (reproducible)
        prm.max_time_in_seconds = max(0.05, min(seconds, left - 0.1 - END_MARGIN))
    return solver


def _resize(size: int, code: int, deterministic_time: float, wall: float, limit: float,
            seconds: float) -> int:
    """The next window size: larger after a proof within 30 % of the window's limits
    (``limit`` deterministic units, ``seconds``), smaller after a time-out."""
    quick = deterministic_time < 0.3 * limit and wall < 0.3 * seconds
    if code == cp_model.OPTIMAL and quick:
        return min(MAX_WINDOW, int(size * 1.25) + 1)
    if code != cp_model.OPTIMAL:
        return max(MIN_WINDOW, int(size * 0.8))
    return size


def _candidate(pb: Problem, inc: Incumbent, solver: cp_model.CpSolver, code: int,
               wm: WindowModel, window: set[Action], plateau: bool = False
               ) -> Incumbent | None:
    """The re-timed schedule with the window's new order and pairs, when the window model
    found a shorter makespan (re-timing gives that makespan or less), or with ``plateau`` a
    makespan no longer; else None."""
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    if solver.value(wm.makespan) > inc.makespan or (
            not plateau and solver.value(wm.makespan) == inc.makespan):
        return None
    start = {a: solver.value(v) for a, v in wm.start.items()}
    end = {a: solver.value(v) for a, v in wm.end.items()}
    mid = unit_orders(pb, start, end,
                      [fb for fb, x in wm.pair.items() if solver.boolean_value(x)])
    orders = []
    for d, row in enumerate(inc.orders):
        idx = [k for k, u in enumerate(row) if u[0] in window]
        orders.append(row[:idx[0]] + mid[d] + row[idx[-1] + 1:] if idx else list(row))
    return Incumbent(pb, orders)


def _choose(inc: Incumbent, cursor: int, size: int) -> tuple[set[Action], set[Action]]:
    """The window of ``size`` steps from the ``cursor``-th start on (every device, all
    steps starting in ``[t1, t2)``) and the actions before it, which stay; as actions."""
    order = inc.by_start
    size = min(size, len(order))  # pairs formed or broken change the number of steps
    lo_idx = max(0, min(cursor, len(order) - size))
    t1 = order[lo_idx][0]
    t2 = order[lo_idx + size - 1][0] + 1
    first = bisect_left(order, t1, key=lambda x: x[0])
    last = bisect_left(order, t2, key=lambda x: x[0])

    def actions(steps: list[tuple[int, int, int]]) -> set[Action]:
        return {a for _, d, k in steps for a in inc.orders[d][k]}

    return actions(order[first:last]), actions(order[:first])


__all__ = ["MIN_ACTIONS", "MIN_ACTIONS_LIMITED", "MIN_ACTIONS_PAIRS", "WINDOW_PRESOLVE",
           "WINDOW_PRESOLVE_PAIRS", "LnsStats", "improve", "improve_overlap", "improve_pairs",
           "search", "window_workers"]
