"""The list scheduler on ``bidirectional`` placement (DualPipe's shape): memory-aware, so a
known schedule that fits a limit below DualPipe's own peak (docs/modelling.md §23).

The loop/V list scheduler (:mod:`cpsched.schedules.listsched`) admits a forward by the
banker's rule on its own device: there the oldest microbatch can always proceed, because all
microbatches flow the same way.  With two directions that argument fails: device ``d`` full of
direction-0 microbatches that wait for device ``d + 1``, while ``d + 1`` is full of
direction-1 microbatches that wait for ``d``, is a deadlock.  Here a microbatch therefore
**reserves its activation on every device of its path when it enters** (its forward of stage
0) and gives each part back where docs/spec.md §1 releases it.  An admitted microbatch never
waits for memory, so the non-delay dispatch (:func:`cpsched.engine.dispatch`) never
deadlocks and the limit holds at every instant (what a device holds is at most what is
reserved on it).  A microbatch enters only when its whole reservation fits, and, with a
*window* ``w``, only while fewer than ``w`` microbatches of its direction are in flight.

The reservation is pessimistic on the devices far from a direction's entry (their share is
taken before their forward runs), which is why the window runs and the loose ``overbook``
runs exist: ``overbook`` lets the reservations exceed the limit by that much while every
forward still checks the memory actually held on its device; such a run can get stuck, and
is then dropped (it is a portfolio candidate, never the only one).

Priority rules are the loop scheduler's (:mod:`cpsched.schedules.listsched_rules`), with the
microbatch index counted within its direction, so the two directions interleave; FIFO order
holds per (kind, stage, direction) (docs/modelling.md §1).  With an overlap cost every
configuration also runs forming overlapped F&B pairs as it dispatches
(:class:`~cpsched.schedules.listsched_pairs.Pairing`, docs/modelling.md §25).
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence

from cpsched.actions import Kind
from cpsched.engine import DispatchResult, TaskTable, dispatch, paused_gc
from cpsched.instance import Instance
from cpsched.schedules.listsched_pairs import Pairing, pair_modes
from cpsched.schedules.listsched_rules import (
    ListSchedulerError,
    Problem,
    rule_function,
    task_keys,
)
from cpsched.schedules.registry import deadline

_EPS = 1e-9
#: Rules of the portfolio, in order (``dueX``: see :func:`~cpsched.schedules.listsched_rules.due`).
_RULES: tuple[str, ...] = ("dfs", "due0.2", "due0.3", "due0.4", "due0.5", "due1.0", "bfs", "cp")
#: Entry windows tried, in multiples of ``p`` microbatches per direction (None: no window).
_WINDOWS: tuple[float | None, ...] = (None, 0.5)
#: Overbooking tried, in units of the largest stage activation (0: the strict reservation).
#: Measured (docs/modelling.md §23): the strict reservation is the worst, 4-6 the best.
_OVERBOOK: tuple[float, ...] = (0.0, 2.0, 4.0, 6.0, 8.0)


class BidiProblem(Problem):
    """:class:`~cpsched.schedules.listsched_rules.Problem` of a ``bidirectional`` instance:
    FIFO queues per (kind, stage, direction), and per direction the device of each stage."""

    def __init__(self, inst: Instance) -> None:
        if inst.placement != "bidirectional":
            raise ValueError(f'placement = "{inst.placement}": needs "bidirectional"')
        super().__init__(inst)
        m, S, half = self.m, self.S, inst.m // 2
        self.half = half
        nq = len(self.kinds) * S
        queues = [q for n in range(nq)
                  for q in (list(range(n * m, n * m + half)), list(range(n * m + half, n * m + m)))]
        by_dev: list[list[int]] = [[] for _ in range(inst.p)]
        for k, q in enumerate(queues):
            by_dev[self.dev_of[q[0]]].append(k)
        old = self.table
        self.table = TaskTable(old.duration, old.resource, old.capacity, old.succ, queues,
                               [*by_dev, []])
        # rules rank by the index within the direction; the direction breaks ties
        self.rank_of = [i - self.direction(i) * half for i in range(m)]
        self.tie_of = [(self.direction(i),) for i in range(m)]
        self.queue_tie = False
        #: reserve[r][d]: what a microbatch of direction r reserves on device d when it enters
        self.reserve: list[list[float]] = [[0.0] * inst.p, [0.0] * inst.p]
        for r, first in enumerate((0, half)):
            for s in range(S):
                self.reserve[r][inst.device_of(s, first)] += self.act[s]

    def direction(self, i: int) -> int:
        """0 for microbatches ``< m // 2``, else 1."""
        return 0 if i < self.half else 1


class _Reservation:
    """Entry admission by reservation along the path (module docstring): the engine's
    ``admit`` / ``on_start`` / ``on_finish`` hooks."""

    def __init__(self, pb: BidiProblem, limit: float | None, window: int | None,
                 overbook: float) -> None:
        self.pb, self.limit, self.window, self.overbook = pb, limit, window, overbook
        p = pb.inst.p
        self.reserved = [0.0] * p
        self.held = [0.0] * p
        self.flight = [0, 0]
        self.open = [0] * pb.m  # stages of a microbatch not yet released
        self.need = pb.reserve

    def admit(self, t: int) -> bool:
        """May forward ``t`` start now?"""
        pb = self.pb
        i, s, d = pb.mb_of[t], pb.stage_of[t], pb.dev_of[t]
        if s == 0:
            r = pb.direction(i)
            if self.window is not None and self.flight[r] >= self.window:
                return False
            if self.limit is not None:
                top = self.limit + self.overbook + _EPS
                if any(self.reserved[x] + n > top for x, n in enumerate(self.need[r]) if n):
                    return False
        if self.limit is not None and self.overbook:
            return self.held[d] + pb.act[s] <= self.limit + _EPS
        return True

    def start(self, t: int, now: int) -> None:
        """A forward takes its activation; a microbatch entering reserves its path."""
        pb = self.pb
        i, s = pb.mb_of[t], pb.stage_of[t]
        if s == 0:
            r = pb.direction(i)
            self.flight[r] += 1
            self.open[i] = pb.S
            for x, n in enumerate(self.need[r]):
                self.reserved[x] += n
        self.held[pb.dev_of[t]] += pb.release_of[t]

    def finish(self, t: int, end: int) -> None:
        """A backward gives memory back (docs/spec.md §1); the last one ends the flight."""
        pb = self.pb
        d, rel, i = pb.dev_of[t], pb.release_of[t], pb.mb_of[t]
        self.held[d] -= rel
        self.reserved[d] -= rel
        if pb.closes[t]:
            self.open[i] -= 1
            if self.open[i] == 0:
                self.flight[pb.direction(i)] -= 1


#: One run: (rule, window in microbatches per direction or None, overbook, W policy,
#: pairing mode or None: :class:`~cpsched.schedules.listsched_pairs.Pairing`).
Config = tuple[str, int | None, float, str, str | None]


def _configs(inst: Instance, first: str) -> list[Config]:
    amax = max(inst.activation)
    windows = list(dict.fromkeys(None if w is None else max(1, round(w * inst.p))
                                 for w in _WINDOWS))
    books = _OVERBOOK if inst.memory_limit is not None else (0.0,)
    policies = ("lazy", "eager") if inst.split_backward else ("lazy",)
    rules = [first] + [r for r in _RULES if r != first]
    return [(r, w, b * amax, wp, None) for r in rules for w in windows for b in books
            for wp in policies]


def run_bidi(pb: BidiProblem, cfg: Config, jitter: Sequence[float] | None = None
             ) -> DispatchResult | None:
    """One run of ``cfg`` (times in ticks); None when an overbooked run got stuck."""
    rule, window, overbook, wp, pairs = cfg
    adm = _Reservation(pb, pb.inst.memory_limit, window, overbook)
    res = dispatch(pb.table, task_keys(pb, rule, wp, jitter), admit=adm.admit,
                   on_start=adm.start, on_finish=adm.finish, local=False, hooked=pb.hooked,
                   pair=None if pairs is None else Pairing(pb, pairs))
    if not res.complete:
        if not overbook:  # a strict reservation cannot get stuck (module docstring)
            raise ListSchedulerError(f"bidirectional list scheduler stuck ({cfg})")
        return None
    return res


def bidi_portfolio(pb: BidiProblem, first: str = "dfs", restarts: int = 12, seed: int = 0,
                   budget: int | None = None) -> tuple[DispatchResult, str]:
    """The best run (smallest makespan; ties: the earlier run) of the portfolio: every rule
    (``first`` first), entry window, overbooking and ``W`` policy, then ``restarts`` runs of
    the best three with seeded random offsets on their keys, then those three with one step
    less and more overbooking (:func:`_neighbours`); at most ``budget`` action starts
    (an evenly spread subset of the configurations when they do not all fit) and the
    registry's deadline.  Returns the dispatch result and its configuration's name.

    Raises:
        ListSchedulerError: a strict run got stuck (a bug).
    """
    n = len(pb.table.duration)
    configs = _configs(pb.inst, first)
    modes = pair_modes(pb.inst)  # each configuration runs once per pairing mode
    if budget is not None:
        runs = max(1, budget // max(1, n))
        restarts = min(restarts, runs // 4)
        if runs - restarts < len(configs) * len(modes):
            k = max(1, (runs - restarts) // len(modes))
            configs = [configs[(j * len(configs)) // k] for j in range(k)]
    configs = [(*cfg[:4], pm) for cfg in configs for pm in modes]
    stop = deadline()
    tried: list[tuple[int, int, Config]] = []
    best: tuple[DispatchResult, str] | None = None
    for k, cfg in enumerate(configs):
        if best is not None and _finished(pb, best, stop):
            return best
        res = run_bidi(pb, cfg)
        if res is None:
            continue
        tried.append((res.makespan, k, cfg))
        if best is None or res.makespan < best[0].makespan:
            best = res, _name(cfg)
    assert best is not None  # the first configuration is strict
    tried.sort(key=lambda x: (x[0], x[1]))
    top = [cfg for _, _, cfg in tried[:3]]
    rng = random.Random(seed)
    noise = 4.0 * max(1.0, sum(pb.dur[Kind.F]) / len(pb.dur[Kind.F]))
    for k in range(restarts):
        if _finished(pb, best, stop):
            break
        cfg = top[k % len(top)]
        res = run_bidi(pb, cfg, [rng.random() * noise for _ in range(n)])
        if res is not None and res.makespan < best[0].makespan:
            best = res, f"{_name(cfg)} jitter(seed={seed}, run {k})"
    return _neighbours(pb, top, best, stop)


def _finished(pb: BidiProblem, best: tuple[DispatchResult, str], stop: float | None) -> bool:
    """Whether the portfolio stops: ``best`` is at the lower bound, or the deadline passed."""
    return best[0].makespan <= pb.bound or (stop is not None and time.perf_counter() >= stop)


def _neighbours(pb: BidiProblem, top: list[Config], best: tuple[DispatchResult, str],
                stop: float | None) -> tuple[DispatchResult, str]:
    """The best of ``best`` and the runs of each ``top`` configuration with one largest stage
    activation less and more overbooking (the odd steps between :data:`_OVERBOOK`'s; under a
    memory limit only, after the restarts, so the runs before are unchanged): p12
    bidirectional m48 fused at V-Half's memory 370.84 -> 361.98, p16-dualpipe-m64-lim10
    217.144 -> 214.67 (docs/modelling.md §42)."""
    if pb.inst.memory_limit is None:
        return best
    amax = max(pb.inst.activation)
    seen = set(top)
    for rule, window, book, wp, pm in top:
        for b in (book - amax, book + amax):
            cfg = (rule, window, b, wp, pm)
            if b < -_EPS or cfg in seen:
                continue
            seen.add(cfg)
            if _finished(pb, best, stop):
                return best
            res = run_bidi(pb, cfg)
            if res is not None and res.makespan < best[0].makespan:
                best = res, _name(cfg)
    return best


def _name(cfg: Config) -> str:
    rule, window, overbook, wp, pairs = cfg
    paired = "" if pairs is None else f" pairs={pairs}"
    return f"{rule} bidirectional window={window} overbook={overbook:g} {wp}{paired}"


def bidi_list_schedule(inst: Instance, tie_break: str = "dfs", *, restarts: int = 12,
                       seed: int = 0, budget: int | None = None
                       ) -> tuple[DispatchResult, BidiProblem, str]:
    """List-schedule a ``bidirectional`` instance (module docstring): the portfolio's best
    run, its problem (to read the actions) and its configuration.

    Raises:
        ValueError: not bidirectional, or an unknown rule.
        ListSchedulerError: a strict run got stuck (a bug).
    """
    rule_function(tie_break)
    with paused_gc():
        pb = BidiProblem(inst)
        res, name = bidi_portfolio(pb, tie_break, restarts, seed, budget)
    return res, pb, name


__all__ = ["BidiProblem", "bidi_list_schedule", "bidi_portfolio", "run_bidi"]
