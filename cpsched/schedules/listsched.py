"""The pipeline list scheduler: event-driven, non-delay, a named priority rule plus
lexicographic tie-breakers, run by the event engine (:func:`cpsched.engine.dispatch`).

Sources: list scheduling as in high-level synthesis, and the pipeline-scheduling article
(docs/references.md#pipeline-scheduling-article): "1F1B emerges from depth-first
tie-breaking", AFAB (GPipe) from breadth-first; the treatment of ``W`` (fill bubbles with
weight gradients while memory allows, postpone them otherwise) is the greedy idea of the Zero
Bubble paper (docs/references.md#zero-bubble, section 3).

**Time** advances from event to event (an action ends, or its output arrives after the p2p
latency).  At each event every idle device starts the best *available* action: its
predecessors have ended (plus lag), it is the next of its (kind, stage) in microbatch order
(FIFO, free by docs/modelling.md §1), and a forward passes the admission tests below.
Warm-up, steady state and cool-down are not counted: they emerge from the rule.

**Priority rules** are named functions (:data:`PRIORITY_RULES`; smaller key first).  A task's
key is ``(w_last, rule + jitter, ..., queue position)``: :func:`w_last` ranks ``W`` last, so it
fills bubbles, is postponed while forwards and input gradients can run, and runs as soon as a
forward waits for memory; the device's (stage, kind) order breaks the remaining ties.
:func:`dfs`: lowest microbatch, then furthest along its chain (``F`` of stage ``s`` has
progress ``s``, its backward ``2S - 1 - s``) — with the window below, 1F1B on ``v = 1``.
:func:`bfs`: forwards first, then least progress, then lowest microbatch — GPipe on ``v = 1``.
:func:`cp`: longest tail first.  :func:`due`: ``i * T - tail - duration``, a due date for
microbatch ``i`` when one enters every ``T = 0.4 x`` the largest per-microbatch work of a
device (``dueX``: ``X`` times it).

**Admission** of a forward on device ``d``: a *window* — at most ``window[d]`` microbatches
in flight on ``d`` (``"auto"``: ``ceil((S - first stage of d) / v)`` for ``dfs`` without a
memory limit, i.e. ``p - d`` with ``v = 1``, else none); and, in **memory-aware mode**
(automatic with ``memory.limit``), the banker's rule: memory is taken at each forward's start
and given back as docs/spec.md §1 says (:mod:`cpsched.rules`); a forward starts only if, taking
the microbatches in flight oldest first, each one's remaining forwards fit in what is free
once the older ones have finished.  The oldest microbatch can always proceed, so the scheduler
never deadlocks and never exceeds the limit.  A microbatch is also admitted only if all it
will need there fits next to what admitted ones hold or still need, plus ``slack`` (0: a
strict reservation; None: the banker's rule alone).

**Portfolio** (default in memory-aware mode): the requested rule, then ``dfs``, ``bfs`` and
``due`` with several periods, slacks and windows, then ``restarts`` runs of the best ones
with seeded random offsets on their keys; the smallest makespan wins (ties: the earlier run).
It stops when a run reaches the lower bound, and spends at most ``budget`` action starts:
when the whole portfolio does not fit, an evenly spread subset of the configurations runs
and a quarter of the budget goes to restarts (deterministic for a given ``seed``).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from cpsched.actions import Action, DeviceOrders, Kind, Step
from cpsched.engine import ADMIT, FINISH, START, DispatchResult, TaskTable, dispatch, paused_gc
from cpsched.instance import Instance
from cpsched.rules import default_tasks, released_fraction
from cpsched.schedules.registry import deadline, register

_EPS = 1e-9

#: Public rule names (``dueX`` with a number ``X`` is accepted too).
RULES = ("dfs", "bfs", "cp", "due")

#: ``due`` periods tried by the portfolio, as fractions of a device's work per microbatch.
_DUE_FRACTIONS = (0.2, 0.3, 0.4, 0.5, 1.0)
#: Admission slacks tried by the portfolio, in units of the largest stage activation.
_SLACKS: tuple[float | None, ...] = (0.0, 1.0, 2.0, None)
#: Windows tried by the portfolio: ``round(a * p + b * (p - 1 - d))`` for device d.
_WINDOWS: tuple[tuple[float, float] | None, ...] = (None, (1.0, 1.0), (2.0, 2.0))
#: Portfolio budget in action starts (~12 runs at p=32 v=2 m=256); run_all's deadline too.
BUDGET = 600_000

Key = tuple[float, ...]


class ListSchedulerError(RuntimeError):
    """The list scheduler got stuck (a bug: admission is designed never to deadlock)."""


@dataclass
class ListResult:
    """One list-scheduling result.

    Attributes:
        orders: per-rank action orders (to be timed by :func:`cpsched.simulate.simulate`).
        makespan: in ticks (equals the simulated makespan).
        config: the run that produced it, e.g. ``"due0.3 slack=None window=(15,..) lazy"``.
        starts: start tick of every action.
    """

    orders: DeviceOrders
    makespan: int
    config: str
    starts: dict[Action, int]


def default_window(inst: Instance) -> tuple[int, ...]:
    """The ``dfs`` window per device: ``ceil((S - first stage of d) / v)``."""
    S, v = inst.num_stages, inst.v
    return tuple(math.ceil((S - min(inst.stages_of(d))) / v) for d in range(inst.p))


class Problem:
    """Static data shared by every run on one instance: the pipeline's default tasks
    (:func:`cpsched.rules.default_tasks`: ticks, tails, the lower bound) as the engine's
    :class:`~cpsched.engine.TaskTable`, and the memory needs of each device."""

    def __init__(self, inst: Instance) -> None:
        self.inst = inst
        tasks = default_tasks(inst)
        self.action, self.bound = tasks.action, tasks.bound
        self.S, self.m, self.kinds, self.bk = inst.num_stages, inst.m, tasks.kinds, tasks.kinds[1]
        nk, S, m = len(tasks.kinds), self.S, self.m
        self.stages = [inst.stages_of(d) for d in range(inst.p)]
        self.table = TaskTable(tasks.duration, tasks.device, [1] * inst.p, tasks.succ,
                               [list(range(q * m, q * m + m)) for q in range(nk * S)],
                               [*([kk * S + s for s in st for kk in range(nk)]
                                  for st in self.stages), []])
        self.dev = [inst.device_of(s) for s in range(self.S)]
        self.first = [min(st) for st in self.stages]
        self.nstages = [len(st) for st in self.stages]
        self.dur, self.tail = tasks.dur, tasks.tail
        self.act = inst.activation
        self.need = [sum(self.act[s] for s in st) for st in self.stages]
        self.work = max(sum(self.dur[k][s] for s in st for k in self.kinds)
                        for st in self.stages)
        self._keys: dict[tuple[str, str], list[Key]] = {}
        nf = S * m  # forwards are admitted and take memory, the rest release it
        self.hooked = [ADMIT | START] * nf + [FINISH] * (len(self.table.duration) - nf)
        act = partial(tuple.__new__, Action)  # Action((k, s, i)), C speed
        #: the action of every task, its stage, microbatch and device
        self.acts = [act((k, s, i)) for k in self.kinds for s in range(S) for i in range(m)]
        self.stage_of = [s for _ in self.kinds for s in range(S) for _ in range(m)]
        self.mb_of = list(range(m)) * (S * nk)
        self.dev_of = tasks.device
        #: activation taken (F) or given back (the rest) by each task; closes: B and W
        frac = [1.0 if k == Kind.F else released_fraction(inst, k) for k in self.kinds]
        self.release_of = [self.act[s] * frac[kk] for kk in range(nk) for s in range(S)
                           for _ in range(m)]
        self.closes = [k in (Kind.B, Kind.W) for k in self.kinds for _ in range(S * m)]


# ---------------------------------------------------------------------- priority rules
Rule = Callable[[Problem, Kind, int, int], tuple[float, ...]]


def w_last(pb: Problem, k: Kind, s: int, i: int) -> tuple[float, ...]:
    """``W`` after everything else (the Zero Bubble greedy placement of weight gradients)."""
    return (k == Kind.W,)


def _progress(pb: Problem, k: Kind, s: int) -> int:
    return s if k == Kind.F else 2 * pb.S - 1 - s


def dfs(pb: Problem, k: Kind, s: int, i: int) -> tuple[float, ...]:
    """Depth first: lowest microbatch, then furthest along its chain (→ 1F1B)."""
    return (i, -_progress(pb, k, s))


def bfs(pb: Problem, k: Kind, s: int, i: int) -> tuple[float, ...]:
    """Breadth first: forwards, then least progress, then lowest microbatch (→ GPipe)."""
    return (k != Kind.F, _progress(pb, k, s), i)


def cp(pb: Problem, k: Kind, s: int, i: int) -> tuple[float, ...]:
    """Critical path: longest tail first, then lowest microbatch."""
    return (-pb.tail[k][s], i)


def due(pb: Problem, k: Kind, s: int, i: int, fraction: float = 0.4) -> tuple[float, ...]:
    """Due date ``i * T - tail - duration`` with ``T = fraction x`` the largest work per
    microbatch of a device, then lowest microbatch."""
    return (i * (fraction * pb.work) - pb.tail[k][s] - pb.dur[k][s], i)


#: Named priority rules (``dueX`` is :func:`due` with ``fraction = X``).
PRIORITY_RULES: dict[str, Rule] = {"dfs": dfs, "bfs": bfs, "cp": cp, "due": due}


def rule_function(name: str) -> Rule:
    """The rule called ``name`` (``dfs``, ``bfs``, ``cp``, ``due`` or ``dueX``, X >= 0).

    Raises:
        ValueError: unknown name.
    """
    if name in PRIORITY_RULES:
        return PRIORITY_RULES[name]
    if name.startswith("due"):
        try:
            frac = float(name[3:])
        except ValueError:
            frac = -1.0
        if frac >= 0:
            return partial(due, fraction=frac)
    raise ValueError(f"tie_break = {name!r}: one of {', '.join(RULES)} (or dueX, X >= 0)")


def task_keys(pb: Problem, rule: str, w_policy: str = "lazy",
              jitter: Sequence[float] | None = None) -> list[Key]:
    """Key of every task: ``(w_last, rule (its first part + jitter[task]), queue position)``.

    ``w_policy="eager"`` ranks ``W`` like its input gradient (so not last).  Keys without
    jitter are cached per (rule, policy).
    """
    cached = pb._keys.get((rule, w_policy)) if jitter is None else None
    if cached is not None:
        return cached
    fn = rule_function(rule)
    S, m, bk = pb.S, pb.m, pb.bk
    qpos = {(k, s): n for st in pb.stages for n, (s, k) in enumerate(
        (s, k) for s in st for k in pb.kinds)}
    keys: list[Key] = []
    for k in pb.kinds:
        rk = bk if (k == Kind.W and w_policy == "eager") else k
        for s in range(S):
            w, qp = w_last(pb, rk, s, 0), (qpos[(k, s)],)
            if jitter:
                t0 = len(keys)
                keys += [w + (kk[0] + jitter[t0 + i], *kk[1:]) + qp
                         for i, kk in enumerate(fn(pb, rk, s, i) for i in range(m))]
            else:
                keys += [w + fn(pb, rk, s, i) + qp for i in range(m)]
    if jitter is None:
        pb._keys[(rule, w_policy)] = keys
    return keys


# ------------------------------------------------------------------------------ one run
class _Admission:
    """Window and memory admission of forwards (banker's rule) for one run: the engine's
    ``admit`` / ``on_start`` / ``on_finish`` hooks.  ``flight[d]``: microbatch -> [held, still
    to allocate, stages not released], oldest first (microbatches enter a device in order)."""

    def __init__(self, pb: Problem, window: Sequence[int] | None, limit: float | None,
                 slack: float | None) -> None:
        self.pb, self.window, self.limit, self.slack = pb, window, limit, slack
        p = len(pb.stages)
        self.flight: list[dict[int, list[float]]] = [{} for _ in range(p)]
        self.held = [0.0] * p
        self.total = [0.0] * p  # sum of held + still to allocate over the flight

    def admit(self, t: int) -> bool:
        """May forward ``t`` start now?"""
        pb, limit = self.pb, self.limit
        s, i, d = pb.stage_of[t], pb.mb_of[t], pb.dev_of[t]
        fl = self.flight[d]
        if s == pb.first[d]:
            if self.window is not None and len(fl) >= self.window[d]:
                return False
            if limit is not None and self.slack is not None:
                top = limit + self.slack + _EPS
                x = self.total[d] + pb.need[d]
                if x > top + 1e-6 or (x > top - 1e-6 and sum(  # exact near the threshold
                        h + f for h, f, _ in fl.values()) + pb.need[d] > top):
                    return False
        if limit is None:
            return True
        a = pb.act[s]
        avail = limit - self.held[d] - a
        if avail < -_EPS:
            return False
        if pb.nstages[d] == 1:  # one stage here: every f is 0 and every h >= 0, so safe
            return True
        if self.total[d] - self.held[d] + 1e-6 <= avail and (
                i in fl or pb.need[d] - a + 1e-6 <= avail):
            return True  # all that is still to allocate fits now: every step below passes
        for j, (h, f, _) in fl.items():
            if j == i:
                h, f = h + a, f - a
            if f > avail + _EPS:
                return False
            avail += h
        return i in fl or pb.need[d] - a <= avail + _EPS

    def start(self, t: int, now: int) -> None:
        """Forward ``t`` takes its stage's activation."""
        pb = self.pb
        i, d, a = pb.mb_of[t], pb.dev_of[t], pb.release_of[t]
        rec = self.flight[d].get(i)
        if rec is None:
            rec = self.flight[d][i] = [0.0, pb.need[d], float(pb.nstages[d])]
            self.total[d] += pb.need[d]
        rec[0] += a
        rec[1] -= a
        self.held[d] += a

    def finish(self, t: int, end: int) -> None:
        """Backward ``t`` gives memory back (docs/spec.md §1); the last one closes the stage."""
        pb = self.pb
        d, rel = pb.dev_of[t], pb.release_of[t]
        rec = self.flight[d][pb.mb_of[t]]
        rec[0] -= rel
        self.held[d] -= rel
        self.total[d] -= rel
        if pb.closes[t]:
            rec[2] -= 1
            if rec[2] == 0:
                self.held[d] -= rec[0]  # rounding leftovers
                self.total[d] -= rec[0] + rec[1]
                del self.flight[d][pb.mb_of[t]]


@dataclass
class _Run:
    result: DispatchResult
    makespan: int
    config: str


def run_rule(pb: Problem, rule: str, window: Sequence[int] | None, memory: bool,
             slack: float | None = 0.0, w_policy: str = "lazy",
             jitter: Sequence[float] | None = None) -> _Run:
    """One non-delay list-scheduling pass (times in ticks); see the module docstring.

    Args:
        window: in-flight microbatches per device, or None.
        memory: enforce the instance's memory limit (banker's rule + admission slack).
        slack: admission slack over the strict reservation (None: banker's rule only).
        w_policy: ``"lazy"`` (W last) or ``"eager"`` (W ranked like its input gradient).
        jitter: offsets added to the rule's main key, per task.

    Raises:
        ListSchedulerError: stuck (admission is designed never to let that happen).
    """
    keys = task_keys(pb, rule, w_policy, jitter)
    limit = pb.inst.memory_limit if memory else None
    if window is None and limit is None:
        res = dispatch(pb.table, keys)
    else:
        adm = _Admission(pb, window, limit, slack)
        res = dispatch(pb.table, keys, admit=adm.admit, on_start=adm.start,
                       on_finish=adm.finish, hooked=pb.hooked)
    if not res.complete:
        left = sum(1 for x in res.starts if x < 0)
        raise ListSchedulerError(f"list scheduler ({rule}) stuck with {left} actions left")
    win = "None" if window is None else "(" + ",".join(map(str, window)) + ")"
    mem = f" slack={slack}" if memory else ""
    return _Run(res, res.makespan, f"{rule}{mem} window={win} {w_policy}")


def _result(pb: Problem, run: _Run) -> ListResult:
    acts = pb.acts
    orders: DeviceOrders = [[acts[t] for t in ts] for ts in run.result.order]
    starts = run.result.starts
    return ListResult(orders, run.makespan, run.config,
                      {acts[t]: starts[t] for t in run.result.sequence})


# ----------------------------------------------------------------------------- portfolio
def _window_of(inst: Instance, spec: tuple[float, float] | None) -> tuple[int, ...] | None:
    if spec is None:
        return None
    a, b = spec
    return tuple(max(1, int(round(a * inst.p + b * (inst.p - 1 - d)))) for d in range(inst.p))


Config = tuple[str, tuple[int, ...] | None, float | None, str]


def _configs(inst: Instance, memory: bool) -> list[Config]:
    """The portfolio's (rule, window, slack, W policy) runs, in order."""
    amax = max(inst.activation)
    rules = ["dfs", "bfs", *(f"due{x}" for x in _DUE_FRACTIONS)]
    windows = [_window_of(inst, w) for w in _WINDOWS]
    if not memory:
        windows.append(default_window(inst))
    slacks = [None if x is None else x * amax for x in _SLACKS] if memory else [None]
    w_policies = ("lazy", "eager") if inst.split_backward else ("lazy",)
    return [(r, w, sl, wp) for r in rules for w in windows for sl in slacks
            for wp in w_policies if wp == "lazy" or w is None]


def _spread(items: list[Config], k: int) -> list[Config]:
    """``k`` of ``items`` evenly spread (all of them when ``k >= len(items)``)."""
    if k >= len(items):
        return items
    return [items[(j * len(items)) // k] for j in range(k)]


def _portfolio(pb: Problem, best: _Run, memory: bool, restarts: int, seed: int,
               budget: int | None) -> _Run:
    """The best of the portfolio runs (see the module docstring), starting from ``best``."""
    inst = pb.inst
    n = len(pb.table.duration)
    runs_left = None if budget is None else max(0, budget // max(1, n) - 1)
    configs = _configs(inst, memory)
    if runs_left is not None and runs_left < len(configs) + restarts:
        # a quarter of what is left goes to restarts (they find the last few per cent)
        restarts = min(restarts, runs_left // 4)
        configs = _spread(configs, runs_left - restarts)
    tried: list[tuple[int, int, Config]] = []
    stop = deadline()
    for k, cfg in enumerate(configs):
        if best.makespan <= pb.bound or (stop is not None and time.perf_counter() >= stop):
            return best
        res = run_rule(pb, cfg[0], cfg[1], memory, cfg[2], cfg[3])
        tried.append((res.makespan, k, cfg))
        if res.makespan < best.makespan:
            best = res
    tried.sort(key=lambda x: (x[0], x[1]))
    top = [cfg for _, _, cfg in tried[:3]]
    rng = random.Random(seed)
    noise = 4.0 * max(1.0, sum(pb.dur[Kind.F]) / len(pb.dur[Kind.F]))
    for k in range(restarts if top else 0):
        if best.makespan <= pb.bound or (stop is not None and time.perf_counter() >= stop):
            break
        rule, w, sl, wp = top[k % len(top)]
        jitter = [rng.random() * noise for _ in range(n)]
        res = run_rule(pb, rule, w, memory, sl, wp, jitter)
        if res.makespan < best.makespan:
            best = res
            best.config += f" jitter(seed={seed}, run {k})"
    return best


def pipeline_list_schedule(inst: Instance, tie_break: str = "dfs", *,
                           window: Sequence[int] | int | str | None = "auto",
                           memory_aware: bool | None = None, slack: float | None = 0.0,
                           portfolio: bool | None = None, restarts: int = 24,
                           seed: int = 0, budget: int | None = BUDGET) -> ListResult:
    """List-schedule ``inst`` (see the module docstring); the pipeline counterpart of
    :func:`cpsched.core.list_schedule` (which schedules a general ResourceGraph).

    Args:
        tie_break: the priority rule: ``"dfs"`` (1F1B-like) or ``"bfs"`` (GPipe-like); also
            ``"cp"``, ``"due"``, ``"dueX"``.
        window: microbatches in flight per device: ``"auto"``, an int for every device, one
            int per device, or None.
        memory_aware: enforce ``memory.limit`` (default: when the instance has one).
        slack: admission slack over the strict reservation, in the instance's memory units
            (None: the banker's rule alone).
        portfolio: also try the other rules, slacks and windows and ``restarts`` randomised
            runs, keep the best (default: in memory-aware mode).
        restarts: randomised runs of the best configurations (portfolio only).
        seed: seed of those runs.
        budget: most action starts the portfolio spends over all its runs (None: no limit);
            the default covers the full portfolio up to ~1400 actions.

    Returns:
        A :class:`ListResult` (orders, makespan in ticks, configuration, start ticks).

    Raises:
        ValueError: unknown rule or a window below 1.
        ListSchedulerError: the scheduler got stuck (a bug).
    """
    rule_function(tie_break)
    memory = (inst.memory_limit is not None) if memory_aware is None else memory_aware
    memory = memory and inst.memory_limit is not None
    if portfolio is None:
        portfolio = memory
    if isinstance(window, str):
        if window != "auto":
            raise ValueError(f'window = {window!r}: "auto", an int, a list of ints or None')
        win = default_window(inst) if tie_break == "dfs" and not memory else None
    elif isinstance(window, int):
        win = (window,) * inst.p
    else:
        win = None if window is None else tuple(int(w) for w in window)
    if win is not None and (len(win) != inst.p or min(win) < 1):
        raise ValueError(f"window = {win}: one int >= 1 per device ({inst.p})")
    with paused_gc():
        pb = Problem(inst)
        best = run_rule(pb, tie_break, win, memory, slack)
        if portfolio:
            best = _portfolio(pb, best, memory, restarts, seed, budget)
        return _result(pb, best)


def _list_check(inst: Instance) -> str | None:
    if inst.placement == "bidirectional":
        return 'pipeline.placement = "bidirectional": list needs "loop" or "v"'
    return None


@register("list", summary="list scheduler: non-delay priority rule + tie-breakers; "
                          "memory-aware (never over the limit) when a limit is set",
          preconditions='placement "loop" or "v"',
          source="list scheduling (HLS); pipeline-scheduling article (dfs -> 1F1B, "
                 "bfs -> AFAB); Zero Bubble greedy W placement (arXiv:2401.10241)",
          check=_list_check, expensive=True)
def list_scheduler(inst: Instance, tie_break: str = "dfs",
                   window: Sequence[int] | int | str | None = "auto",
                   memory_aware: bool | None = None, slack: float | None = 0.0,
                   portfolio: bool | None = None, restarts: int = 24,
                   seed: int = 0) -> DeviceOrders:
    """Per-rank orders of :func:`pipeline_list_schedule` (same arguments, same defaults)."""
    res = pipeline_list_schedule(inst, tie_break, window=window, memory_aware=memory_aware,
                                 slack=slack, portfolio=portfolio, restarts=restarts,
                                 seed=seed)
    return [list[Step](ops) for ops in res.orders]


__all__ = [
    "BUDGET", "PRIORITY_RULES", "RULES", "ListResult", "ListSchedulerError", "Problem", "bfs",
    "cp", "default_window", "dfs", "due", "list_scheduler", "pipeline_list_schedule",
    "rule_function", "run_rule", "task_keys", "w_last",
]
