"""Large-neighbourhood search over device orders (docs/modelling.md §17).

At p = 16–32 the full model has 10 000–30 000 intervals and CP-SAT rarely improves the warm
start within minutes.  This search improves it one *time window* at a time:

1. the incumbent, re-timed ASAP by the one simulator (:func:`cpsched.engine.run_orders`), is
   cut at two times ``t1 < t2``: the actions starting before ``t1`` stay where they are, the
   actions starting at or after ``t2`` keep their device order, and the actions in between (the
   *window*, a few hundred) are re-scheduled by a small CP-SAT model;
2. the window model has the window's dependencies, ``NoOverlap`` per device, FIFO, and each
   device's memory limit with what the fixed part holds; its objective is the makespan the
   whole schedule gets — ``end(a) + q(a)`` with ``q(a)`` the longest path from ``a`` through
   the later part in the incumbent's order graph (dependencies and device order), and the
   longest path that avoids the window;
3. the new device orders (before, window by new start, after) are re-timed by the simulator and
   kept when the makespan is no worse.

Every step is exact, not a guess: on a device the window is a contiguous part of its order and
keeps the same actions, so the memory a device holds after the window — which depends on its
own order only (a stage's activation is allocated and freed on its device) — is unchanged; and
no dependency goes back from the later part into the window, so the new orders never deadlock.
The search only makes the schedule shorter; it proves nothing (the bound is the full model's).

Sources: large-neighbourhood search (Shaw, CP 1998) and time-window relaxation for
scheduling (Pisinger & Ropke, *Large neighborhood search*, 2010); the issue's direction of
fixing most of the incumbent and re-optimising a window with CP-SAT.
"""

from __future__ import annotations

import random
import time
from bisect import bisect_left
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import networkx as nx
from ortools.sat.python import cp_model

from cpsched.actions import Action
from cpsched.engine import run_orders
from cpsched.graph import memory_buffers
from cpsched.instance import Instance
from cpsched.solver.constraints import fifo_pairs

#: Fewer actions than this: the full model is small enough, the search is not used.
MIN_ACTIONS = 1500
#: Window size (actions) the search starts from, and its limits while it adapts.
START_WINDOW, MIN_WINDOW, MAX_WINDOW = 400, 120, 2500
#: CP-SAT deterministic time and wall seconds per window.
WINDOW_DETERMINISTIC_TIME, WINDOW_SECONDS = 1.0, 3.0
#: The search ends after this many sweeps over the whole schedule without a shorter one.
MAX_STALE_SWEEPS = 2


@dataclass
class LnsStats:
    """What :func:`improve` did: windows solved, windows that made the schedule shorter,
    seconds, the makespan reached (ticks) and each window's size (actions)."""

    windows: int = 0
    improvements: int = 0
    seconds: float = 0.0
    makespan: int = 0
    sizes: list[int] = field(default_factory=list)


class _Problem:
    """What does not change between windows: durations, devices, dependencies with their
    lags, FIFO successors and memory buffers per device (ticks, the solver's memory units)."""

    def __init__(self, inst: Instance, g: nx.DiGraph) -> None:
        self.inst = inst
        self.dur: dict[Action, int] = nx.get_node_attributes(g, "duration")
        self.dev: dict[Action, int] = nx.get_node_attributes(g, "device")
        self.succ: dict[Action, list[tuple[Action, int]]] = {a: [] for a in g}
        self.pred: dict[Action, list[tuple[Action, int]]] = {a: [] for a in g}
        for u, v, lag in g.edges(data="lag"):
            self.succ[u].append((v, lag))
            self.pred[v].append((u, lag))
        self.fifo_next = dict(fifo_pairs(inst, self.dur))
        self.pool, buffers = memory_buffers(inst)
        self.buffers: dict[int, list[tuple[Action, Action, int]]] = {}
        for f, rel, amount in buffers:
            self.buffers.setdefault(self.dev[f], []).append((f, rel, amount))


class _Incumbent:
    """A schedule as device orders with ASAP starts, its makespan, each action's tail in
    its order graph (longest path from the action's end to the makespan, ticks) and the
    actions in start order."""

    def __init__(self, pb: _Problem, orders: list[list[Action]]) -> None:
        run = run_orders(pb.inst, orders)
        if run.stuck or run.suspect:
            raise ValueError("orders do not run")  # never for orders built here
        self.orders = orders
        self.start: dict[Action, int] = {}
        for d, row in enumerate(orders):
            self.start.update(zip(row, run.starts[d], strict=True))
        self.makespan = max((e for ends in run.ends for e in ends), default=0)
        self.pos = {a: (d, k) for d, row in enumerate(orders) for k, a in enumerate(row)}
        self.tail = self._tails(pb)
        #: every action by start (windows are cut from it)
        self.by_start = sorted(self.start, key=self.start.__getitem__)

    def _tails(self, pb: _Problem) -> dict[Action, int]:
        """Longest path from each action's end to the makespan in the order graph
        (dependencies with their lags, and each device's next action), in reverse
        topological order (Kahn's algorithm: zero durations make time order ambiguous)."""
        nxt: dict[Action, Action] = {}
        for row in self.orders:
            nxt.update(zip(row, row[1:], strict=False))
        waiting = {a: len(pb.succ[a]) + (a in nxt) for a in self.start}
        preds_in_order = {b: a for a, b in nxt.items()}
        ready = [a for a, n in waiting.items() if n == 0]
        tail: dict[Action, int] = {}
        while ready:
            a = ready.pop()
            best = 0
            if a in nxt:
                best = pb.dur[nxt[a]] + tail[nxt[a]]
            for b, lag in pb.succ[a]:
                best = max(best, lag + pb.dur[b] + tail[b])
            tail[a] = best
            for p, _ in pb.pred[a]:
                waiting[p] -= 1
                if waiting[p] == 0:
                    ready.append(p)
            p = preds_in_order.get(a)
            if p is not None:
                waiting[p] -= 1
                if waiting[p] == 0:
                    ready.append(p)
        return tail


def _window_model(pb: _Problem, inc: _Incumbent, window: set[Action], before: set[Action],
                  ) -> tuple[cp_model.CpModel, dict[Action, cp_model.IntVar],
                             cp_model.IntVar] | None:
    """The CP-SAT model of one window (see the module docstring): ``before`` stays where
    it is, the rest keeps its device order.  None when the window cannot shorten the
    schedule or the incumbent does not fit the model's integer memory."""
    ub = inc.makespan
    dur, dev, start = pb.dur, pb.dev, inc.start
    free = [0] * pb.inst.p  # when each device is free of the fixed part
    for a in before:
        free[dev[a]] = max(free[dev[a]], start[a] + dur[a])
    first_after: dict[int, Action] = {}
    for a in window:
        d, k = inc.pos[a]
        row = inc.orders[d]
        if k + 1 < len(row) and row[k + 1] not in window:
            first_after[d] = row[k + 1]
    m = cp_model.CpModel()
    s: dict[Action, cp_model.IntVar] = {}
    q: dict[Action, int] = {}
    for a in window:
        lo = free[dev[a]]
        for b, lag in pb.pred[a]:
            if b not in window:
                lo = max(lo, start[b] + dur[b] + lag)
        qa, hi = 0, ub
        for b, lag in pb.succ[a]:
            if b in before:  # a fixed successor (on a device outside the window)
                hi = min(hi, start[b] - lag)
            elif b not in window:
                qa = max(qa, lag + dur[b] + inc.tail[b])
        nxt = first_after.get(dev[a])
        if nxt is not None:
            qa = max(qa, dur[nxt] + inc.tail[nxt])
        q[a] = qa
        hi = min(hi, ub - qa) - dur[a]
        if hi < start[a] or lo > start[a]:
            return None  # cannot happen for an ASAP incumbent; be safe
        s[a] = m.new_int_var(lo, hi, "")
        m.add_hint(s[a], start[a])
    by_dev: dict[int, list[Action]] = {}
    for a in window:
        by_dev.setdefault(dev[a], []).append(a)
        for b, lag in pb.succ[a]:
            if b in window:
                m.add(s[b] >= s[a] + dur[a] + lag)
        nxt_fifo = pb.fifo_next.get(a)
        if nxt_fifo is not None and nxt_fifo in window:
            m.add(s[nxt_fifo] >= s[a] + dur[a])
    for acts in by_dev.values():
        m.add_no_overlap([m.new_fixed_size_interval_var(s[a], dur[a], "") for a in acts])
    if pb.pool is not None and not _memory(pb, m, s, window, before, ub):
        return None
    # the longest path avoiding the window: from the fixed part straight into the later part
    c0 = 0
    for a in start:
        if a in before or a in window:
            continue
        for b, lag in pb.pred[a]:
            if b in before:
                c0 = max(c0, start[b] + dur[b] + lag + dur[a] + inc.tail[a])
    for d in range(pb.inst.p):
        row = inc.orders[d]
        if d not in by_dev:  # a device without window actions: its later part follows on
            nxt = next((a for a in row if a not in before), None)
            if nxt is not None:
                c0 = max(c0, free[d] + dur[nxt] + inc.tail[nxt])
    if c0 >= ub:
        return None
    makespan = m.new_int_var(c0, ub, "makespan")
    for a in window:
        m.add(makespan >= s[a] + dur[a] + q[a])
    m.add_hint(makespan, ub)
    m.minimize(makespan)
    return m, s, makespan


def _memory(pb: _Problem, m: cp_model.CpModel, s: Mapping[Action, cp_model.IntVar],
            window: set[Action], before: set[Action], horizon: int) -> bool:
    """Each device's memory over the window: what the fixed part still holds is a constant
    or lasts until a window release; False if the incumbent does not fit the integer units."""
    dur = pb.dur
    devices = {pb.dev[a] for a in window}
    for d in devices:
        held = 0
        ivs, amounts = [], []
        for f, rel, amount in pb.buffers.get(d, ()):
            if f in before:
                if rel in before:
                    continue
                if rel in window:
                    ivs.append(m.new_interval_var(0, s[rel] + dur[rel], s[rel] + dur[rel], ""))
                    amounts.append(amount)
                else:
                    held += amount
            elif f in window:
                if rel in window:
                    end = s[rel] + dur[rel]
                    size = m.new_int_var(0, horizon, "")
                    m.add(size == end - s[f])
                    ivs.append(m.new_interval_var(s[f], size, end, ""))
                else:
                    ivs.append(m.new_interval_var(s[f], horizon - s[f], horizon, ""))
                amounts.append(amount)
        cap = pb.pool - held
        if cap < 0:
            return False
        if sum(amounts) > cap:
            m.add_cumulative(ivs, amounts, cap)
    return True


def _orders_from_starts(pb: _Problem, starts: Mapping[Action, int]) -> list[list[Action]]:
    orders: list[list[Action]] = [[] for _ in range(pb.inst.p)]
    for a in sorted(starts, key=lambda x: (starts[x], starts[x] + pb.dur[x])):
        orders[pb.dev[a]].append(a)
    return orders


def improve(inst: Instance, g: nx.DiGraph, starts: Mapping[Action, int], *,
            deadline: float | None = None, deterministic_time: float = 30.0,
            seed: int = 0, lower: int = 0, stop: Callable[[], bool] | None = None,
            on_improve: Callable[[int], None] | None = None,
            on_solver: Callable[[cp_model.CpSolver], None] | None = None,
            ) -> tuple[dict[Action, int], LnsStats]:
    """Shorten a valid schedule by re-scheduling one time window at a time (module docstring).

    Args:
        inst, g: the instance and its task graph (:func:`cpsched.graph.build_task_graph`).
        starts: a valid schedule ``{action: start tick}`` over the graph's actions, fitting
            the model's integer memory units (the warm start does).
        deadline: ``time.perf_counter()`` value to stop by (None: only the deterministic
            budget counts).
        deterministic_time: CP-SAT deterministic time over all windows (reproducible when
            ``deadline`` does not bind: one worker, fixed seed).
        lower: a proven lower bound (ticks); the search stops when it reaches it.
        stop: polled between windows; True ends the search (Ctrl-C).
        on_improve: called with each shorter makespan (ticks).
        on_solver: called with each window's ``CpSolver`` before it solves (its
            ``stop_search()`` ends that window at once).

    Returns:
        ``(starts, stats)``: the best schedule found — never longer than ``starts`` — as
        ASAP start ticks, and :class:`LnsStats`.

    With an overlap cost the search does not form pairs: ``starts`` must have none, and every
    action keeps running alone (valid: pairs are allowed, never required, docs/spec.md §1).
    """
    t_begin = time.perf_counter()
    pb = _Problem(inst, g)
    inc = _Incumbent(pb, _orders_from_starts(pb, starts))
    stats = LnsStats(makespan=inc.makespan)
    rng = random.Random(seed)
    size, used, cursor, stale = START_WINDOW, 0.0, 0, 0
    n = len(inc.start)
    while used < deterministic_time and inc.makespan > lower:
        if stop is not None and stop():
            break
        left = None if deadline is None else deadline - time.perf_counter()
        if left is not None and left < 0.2:
            break
        if cursor >= n:  # a sweep over the schedule ended
            cursor, stale = 0, stale + 1
            if stale > MAX_STALE_SWEEPS:
                break
        window, before = _choose(inc, cursor, min(size, n))
        cursor += max(1, size // 2) + rng.randrange(max(1, size // 4))
        built = _window_model(pb, inc, window, before)
        stats.windows += 1
        stats.sizes.append(len(window))
        if built is None:
            continue
        m, s, mk = built
        solver = _window_solver(seed + stats.windows,
                                min(WINDOW_DETERMINISTIC_TIME, deterministic_time - used), left)
        if on_solver is not None:
            on_solver(solver)
        if stop is not None and stop():
            break
        code = solver.solve(m)
        used += solver.deterministic_time
        size = _resize(size, code, solver.deterministic_time)
        cand = _candidate(pb, inc, solver, code, s, mk, window)
        if cand is not None and cand.makespan < inc.makespan:
            inc, stale = cand, 0
            stats.improvements += 1
            if on_improve is not None:
                on_improve(inc.makespan)
    stats.seconds = time.perf_counter() - t_begin
    stats.makespan = inc.makespan
    return dict(inc.start), stats


def _window_solver(seed: int, deterministic_time: float, left: float | None
                   ) -> cp_model.CpSolver:
    """One worker, the seed, the window's deterministic limit and — only with a deadline,
    ``left`` seconds away — a wall limit; CP-SAT's SIGINT handler off (Ctrl-C is the
    caller's)."""
    solver = cp_model.CpSolver()
    prm = solver.parameters
    prm.num_workers = 1
    prm.random_seed = seed
    prm.catch_sigint_signal = False
    prm.max_deterministic_time = deterministic_time
    if left is not None:  # without a deadline only deterministic limits (reproducible)
        prm.max_time_in_seconds = max(0.05, min(WINDOW_SECONDS, left - 0.1))
    return solver


def _resize(size: int, code: int, deterministic_time: float) -> int:
    """The next window size: larger after a quick proof, smaller after a time-out."""
    if code == cp_model.OPTIMAL and deterministic_time < 0.3 * WINDOW_DETERMINISTIC_TIME:
        return min(MAX_WINDOW, int(size * 1.25) + 1)
    if code != cp_model.OPTIMAL:
        return max(MIN_WINDOW, int(size * 0.8))
    return size


def _candidate(pb: _Problem, inc: _Incumbent, solver: cp_model.CpSolver, code: int,
               s: Mapping[Action, cp_model.IntVar], mk: cp_model.IntVar,
               window: set[Action]) -> _Incumbent | None:
    """The re-timed schedule with the window's new order, when the window model found a
    shorter makespan (re-timing gives that makespan or less); else None."""
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE) or solver.value(mk) >= inc.makespan:
        return None
    new = dict(inc.start)
    for a, var in s.items():
        new[a] = solver.value(var)
    return _Incumbent(pb, _reorder(pb, inc, window, new))


def _choose(inc: _Incumbent, cursor: int, size: int) -> tuple[set[Action], set[Action]]:
    """The window of ``size`` actions from the ``cursor``-th start on (every device, all
    actions starting in ``[t1, t2)``) and the actions before it, which stay."""
    order = inc.by_start
    lo_idx = max(0, min(cursor, len(order) - size))
    t1 = inc.start[order[lo_idx]]
    t2 = inc.start[order[lo_idx + size - 1]] + 1
    first = bisect_left(order, t1, key=inc.start.__getitem__)
    window = {a for a in order[first:] if inc.start[a] < t2}
    return window, {a for a in order[:first]}


def _reorder(pb: _Problem, inc: _Incumbent, window: set[Action],
             new: Mapping[Action, int]) -> list[list[Action]]:
    """Device orders: the fixed part, the window by its new starts, the later part."""
    out = []
    for row in inc.orders:
        idx = [k for k, a in enumerate(row) if a in window]
        if not idx:
            out.append(list(row))
            continue
        lo, hi = idx[0], idx[-1] + 1
        mid = sorted(row[lo:hi], key=lambda a: (new[a], new[a] + pb.dur[a]))
        out.append(row[:lo] + mid + row[hi:])
    return out


__all__ = ["MIN_ACTIONS", "LnsStats", "improve"]
