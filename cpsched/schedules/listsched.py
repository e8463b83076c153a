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

**Priority rules** (:mod:`cpsched.schedules.listsched_rules`: ``dfs`` → 1F1B, ``bfs`` →
GPipe, ``ilv`` → interleaved 1F1B, ``cp``, ``due``) give every task a key; smaller first.

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

**Portfolio** (default in memory-aware mode; the runs are listed by
:mod:`~cpsched.schedules.listsched_configs`): the requested rule, then a few ``ilv`` runs,
then ``dfs``, ``bfs`` and ``due`` with several periods, slacks and windows, then ``restarts``
runs of the best three of those with seeded random offsets on their keys, then
:func:`_loose`: for ``due0.4``, ``dfs`` and ``ilv`` a search over a loose admission slack
(:mod:`~cpsched.schedules.listsched_slack`, 4-25 largest stage activations: a device
fills its limit while it waits for its first backward; where memory sets the pace these are the
best runs — limit 24 2515 -> 2380, random p32 loop v4 m128 2902.79 -> 2778.01, docs/modelling.md
§37, §42). The smallest makespan wins (ties: the earlier run). It stops when a run reaches the
lower bound, and spends at most ``budget`` action starts on the configurations and restarts (the
``ilv`` runs come on top, as many as the budget has runs, and the loose ones within
:data:`LOOSE_BUDGET` times the budget): when they do not all fit, an evenly spread subset of the
configurations runs and a quarter of the budget goes to restarts (deterministic for ``seed``).

**Without a memory limit** a device holding several stages (``v > 1``) gets a short portfolio
by default: the requested rule, then ``ilv`` under :func:`interleaved_cap` (interleaved 1F1B's
own peak as the admission target) and ``ilv`` with no memory test.  Measured on the loop grid
p = 4/8/16, v = 2/4, m = 2p..4p, F:B = 1:2 and 5:10 (36 points), ``dfs`` alone was 14-49 %
longer than interleaved 1F1B on every point; this portfolio equals it (the lower bound there)
at the same peak memory, and is never longer on 216 points with p2p latency 0 or 0.3, uneven
costs and split backward (p = 2/4/8, v = 2/3/4, m = p..3p).  With ``v = 1`` ``dfs`` is 1F1B and
runs alone, as before.

**Overlapped pairs** (with ``costs.overlap_forward_backward``): every portfolio run also runs
once forming pairs as it dispatches — when a device starts a forward and a backward of another
microbatch is available there, the two run as one pair if that saves at least a tenth of a
mean forward (:mod:`cpsched.schedules.listsched_pairs`, docs/modelling.md §25); the smallest
makespan still wins, so pairs are used only where they pay.  The portfolio then never stops
early at the pair-free bound (pairs can beat it).

**Bidirectional placement** (DualPipe's shape) has its own admission, a reservation along the
microbatch's path, since two directions can deadlock under the banker's rule:
:mod:`cpsched.schedules.listsched_bidi` (docs/modelling.md §23); :func:`pipeline_list_schedule`
hands such instances to it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cpsched.actions import Action, DeviceOrders, Kind, Overlap, Step
from cpsched.engine import DispatchResult, dispatch, paused_gc
from cpsched.instance import Instance
from cpsched.schedules.listsched_bidi import bidi_list_schedule
from cpsched.schedules.listsched_configs import Config, ilv_configs, portfolio_configs, spread
from cpsched.schedules.listsched_pairs import Pairing, pair_modes
from cpsched.schedules.listsched_rules import (
    PRIORITY_RULES,
    RULES,
    ListSchedulerError,
    Problem,
    bfs,
    cp,
    default_window,
    dfs,
    due,
    group_size,
    ilv,
    interleaved_cap,
    interleaved_warmup,
    rule_function,
    task_keys,
    w_last,
)
from cpsched.schedules.listsched_slack import LOOSE_RULES, slack_search
from cpsched.schedules.registry import deadline, register

_EPS = 1e-9

#: Portfolio budget in action starts (~12 runs at p=32 v=2 m=256); run_all's deadline too.
BUDGET = 600_000
#: The loose runs' own budget, in multiples of ``budget``: the whole slack search (33 runs)
#: up to 54 000 actions (docs/modelling.md §42).
LOOSE_BUDGET = 3


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
             jitter: Sequence[float] | None = None, *, cap: float | None = None,
             pairs: str | None = None) -> _Run:
    """One non-delay list-scheduling pass (times in ticks); see the module docstring.

    Args:
        window: in-flight microbatches per device, or None.
        memory: enforce the instance's memory limit (banker's rule + admission slack).
        slack: admission slack over the strict reservation (None: banker's rule only).
        w_policy: ``"lazy"`` (W last) or ``"eager"`` (W ranked like its input gradient).
        jitter: offsets added to the rule's main key, per task.
        cap: with ``memory``, enforce this limit (memory units, at least
            :meth:`~cpsched.instance.Instance.min_memory_limit`) instead of the instance's
            (which may be unset): a target the admission test aims at.
        pairs: form overlapped F&B pairs (a
            :class:`~cpsched.schedules.listsched_pairs.Pairing` mode; needs an overlap cost),
            or None.

    Raises:
        ListSchedulerError: stuck (admission is designed never to let that happen).
    """
    keys = task_keys(pb, rule, w_policy, jitter)
    limit = (pb.inst.memory_limit if cap is None else cap) if memory else None
    hook = None if pairs is None else Pairing(pb, pairs)
    if window is None and limit is None:
        res = dispatch(pb.table, keys, pair=hook)
    else:
        adm = _Admission(pb, window, limit, slack)
        res = dispatch(pb.table, keys, admit=adm.admit, on_start=adm.start,
                       on_finish=adm.finish, hooked=pb.hooked, pair=hook)
    if not res.complete:
        left = sum(1 for x in res.starts if x < 0)
        raise ListSchedulerError(f"list scheduler ({rule}) stuck with {left} actions left")
    win = "None" if window is None else "(" + ",".join(map(str, window)) + ")"
    mem = (f" slack={slack}" if memory else "") + ("" if cap is None else f" cap={cap:g}")
    paired = "" if pairs is None else f" pairs={pairs}"
    return _Run(res, res.makespan, f"{rule}{mem} window={win} {w_policy}{paired}")


def _result(pb: Problem, run: _Run) -> ListResult:
    acts, res = pb.acts, run.result
    fused = {t - pb.S * pb.m for t in res.fused}  # the I whose W rode in its pair: a B

    def back(t: int) -> Action:
        a = acts[t]
        return Action(Kind.B, a.stage, a.microbatch) if t in fused else a

    def step(t: int) -> Step:
        u = res.pairs.get(t)
        if u is None:
            return acts[t]
        f, b = (t, u) if acts[t].kind == Kind.F else (u, t)
        return Overlap(acts[f], back(b))

    orders: DeviceOrders = [[step(t) for t in ts] for ts in res.order]
    starts = res.starts
    return ListResult(orders, run.makespan, run.config,
                      {back(t): starts[t] for t in res.sequence if t not in res.fused})


# ----------------------------------------------------------------------------- portfolio
def _run_config(pb: Problem, cfg: Config, memory: bool,
                jitter: Sequence[float] | None = None) -> _Run:
    rule, w, sl, wp, cap, pm = cfg
    return run_rule(pb, rule, w, memory or cap is not None, sl, wp, jitter, cap=cap, pairs=pm)


def _portfolio(pb: Problem, best: _Run, memory: bool, restarts: int, seed: int,
               budget: int | None, full: bool = True) -> _Run:
    """The best of the portfolio runs (see the module docstring), starting from ``best``:
    the :func:`ilv` runs (:func:`~cpsched.schedules.listsched_configs.ilv_configs`), then
    (``full``) the other configurations
    (:func:`~cpsched.schedules.listsched_configs.portfolio_configs`) within ``budget`` and
    the restarts of their best three."""
    inst = pb.inst
    n = len(pb.table.duration)
    runs_left = None if budget is None else max(0, budget // max(1, n) - 1)
    configs = portfolio_configs(inst, memory) if full else []
    modes = pair_modes(inst)  # each configuration runs once per pairing mode
    restarts = restarts if full else 0
    if runs_left is not None and runs_left < len(configs) * len(modes) + restarts:
        # a quarter of what is left goes to restarts (they find the last few per cent)
        restarts = min(restarts, runs_left // 4)
        configs = spread(configs, (runs_left - restarts) // len(modes))
    configs = [(*cfg[:5], pm) for cfg in configs for pm in modes]
    stop = deadline()

    def done() -> bool:
        return best.makespan <= pb.bound or (stop is not None and time.perf_counter() >= stop)

    ilv_runs = ilv_configs(pb, memory)
    for cfg in ilv_runs if runs_left is None else ilv_runs[:runs_left]:
        if done():
            return best
        res = _run_config(pb, cfg, memory)
        if res.makespan < best.makespan:
            best = res
    tried: list[tuple[int, int, Config]] = []
    for k, cfg in enumerate(configs):
        if done():
            return best
        res = _run_config(pb, cfg, memory)
        tried.append((res.makespan, k, cfg))
        if res.makespan < best.makespan:
            best = res
    tried.sort(key=lambda x: (x[0], x[1]))
    top = [cfg for _, _, cfg in tried[:3]]
    rng = random.Random(seed)
    noise = 4.0 * max(1.0, sum(pb.dur[Kind.F]) / len(pb.dur[Kind.F]))
    for k in range(restarts if top else 0):
        if done():
            break
        jitter = [rng.random() * noise for _ in range(n)]
        res = _run_config(pb, top[k % len(top)], memory, jitter)
        if res.makespan < best.makespan:
            best = res
            best.config += f" jitter(seed={seed}, run {k})"
    if full and memory:
        best = _loose(pb, best, modes, done,
                      None if budget is None else LOOSE_BUDGET * budget // max(1, n))
    return best


def _loose(pb: Problem, best: _Run, modes: Sequence[str | None], done: Callable[[], bool],
           runs: int | None) -> _Run:
    """The best of ``best`` and the loose-admission runs: per rule of
    :data:`~cpsched.schedules.listsched_slack.LOOSE_RULES` and pairing mode, no window, ``W``
    lazy, the slack searched by :func:`~cpsched.schedules.listsched_slack.slack_search`; at
    most ``runs`` runs (None: no limit)."""
    amax = max(pb.inst.activation)
    for rule in LOOSE_RULES:
        for pm in modes:
            def run(k: int, rule: str = rule, pm: str | None = pm) -> int | None:
                nonlocal best, runs
                if done() or runs == 0:
                    return None
                runs = None if runs is None else runs - 1
                res = _run_config(pb, (rule, None, k * amax, "lazy", None, pm), True)
                if res.makespan < best.makespan:
                    best = res
                return res.makespan

            slack_search(run)
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
            ``"ilv"`` (interleaved-1F1B-like), ``"cp"``, ``"due"``, ``"dueX"``.
        window: microbatches in flight per device: ``"auto"``, an int for every device, one
            int per device, or None.
        memory_aware: enforce ``memory.limit`` (default: when the instance has one).
        slack: admission slack over the strict reservation, in the instance's memory units
            (None: the banker's rule alone).
        portfolio: also try the other rules, slacks and windows and ``restarts`` randomised
            runs, keep the best (default: in memory-aware mode; without a limit, when a device
            holds several stages, the short ``ilv`` portfolio of the module docstring).
        restarts: randomised runs of the best configurations (portfolio only).
        seed: seed of those runs.
        budget: most action starts the portfolio's configurations and restarts spend (None:
            no limit; the ``ilv`` runs come on top); the default covers the full portfolio up
            to ~1400 actions.

    On ``bidirectional`` placement this is
    :func:`~cpsched.schedules.listsched_bidi.bidi_list_schedule`: its own portfolio, with
    ``tie_break`` first and ``restarts // 2`` restarts, always memory-aware when there is a
    limit; ``window``, ``memory_aware``, ``slack`` and ``portfolio`` do not apply there.

    Returns:
        A :class:`ListResult` (orders, makespan in ticks, configuration, start ticks).

    Raises:
        ValueError: unknown rule or a window below 1.
        ListSchedulerError: the scheduler got stuck (a bug).
    """
    rule_function(tie_break)
    if inst.placement == "bidirectional":  # reservation along the path: listsched_bidi
        res, bpb, name = bidi_list_schedule(inst, tie_break, restarts=restarts // 2,
                                            seed=seed, budget=budget)
        return _result(bpb, _Run(res, res.makespan, name))
    memory = (inst.memory_limit is not None) if memory_aware is None else memory_aware
    memory = memory and inst.memory_limit is not None
    # the full portfolio when asked for or with a limit; else by default, when a device holds
    # several stages, the two ilv runs alone (see the module docstring)
    full = bool(portfolio) or (portfolio is None and memory)
    if portfolio is None:
        portfolio = memory or inst.num_stages > inst.p
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
            best = _portfolio(pb, best, memory, restarts, seed, budget, full)
        return _result(pb, best)


@register("list", summary="list scheduler: non-delay priority rule + tie-breakers; "
                          "memory-aware (never over the limit) when a limit is set; forms "
                          "overlapped F&B pairs when they have a cost",
          preconditions="any placement (bidirectional: reservation along the path, "
                        "docs/modelling.md §23)",
          source="list scheduling (HLS); pipeline-scheduling article (dfs -> 1F1B, "
                 "bfs -> AFAB); Zero Bubble greedy W placement (arXiv:2401.10241); "
                 "Megatron-LM interleaved order as the ilv rule (arXiv:2104.04473)",
          check=lambda inst: None, expensive=True)
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
    "cp", "default_window", "dfs", "due", "group_size", "ilv", "interleaved_cap",
    "interleaved_warmup", "list_scheduler", "pipeline_list_schedule", "rule_function",
    "run_rule", "task_keys", "w_last",
]
