"""A list scheduler: event-driven, non-delay, a priority rule plus lexicographic tie-breakers.

Sources: list scheduling as in high-level synthesis, and the pipeline-scheduling article
(``reference/pipeline_scheduling_article.txt``): "1F1B emerges from depth-first tie-breaking",
AFAB (GPipe) from breadth-first; the treatment of ``W`` (fill bubbles with weight gradients
while memory allows, postpone them otherwise) is the greedy idea of the Zero Bubble paper
(Qi et al. 2023, arXiv:2401.10241, section 3).

**Time** advances from event to event (an action ends, or its output arrives after the p2p
latency).  At each event every idle device starts the best *available* action (non-delay):
its predecessors have ended (plus lag), it is the next of its (kind, stage) in microbatch
order (FIFO, free by DESIGN-NOTES 1), and a forward passes the admission tests below.  There
are no warm-up/steady/cool-down phases to count: they emerge from the rule.

**Priority rules** (smaller key first; ``W`` always ranks last, so it fills bubbles, is
postponed while forwards and input gradients can run, and runs as soon as a forward waits
for memory):

* ``dfs``: lowest microbatch, then furthest along its chain (``F`` of stage ``s`` has
  progress ``s``, its backward ``2S - 1 - s``) — with the window below this is 1F1B on
  ``v = 1``;
* ``bfs``: forwards first, then least progress (lowest stage), then lowest microbatch —
  GPipe / all-forward-all-backward on ``v = 1``;
* ``cp``: longest tail (critical path still to run after the action) first;
* ``due``: ``i * T - tail - duration`` (a due date for microbatch ``i`` in a pipeline that
  accepts one microbatch every ``T``; ``T = 0.4 x`` the largest per-microbatch work of a
  device, or ``dueX`` for ``X`` times it).

**Admission** of a forward on device ``d``:

* a *window*: at most ``window[d]`` microbatches in flight on ``d`` (from their first
  forward there until all their memory there is released).  ``window="auto"`` uses
  ``ceil((S - first stage of d) / v)`` for ``dfs`` without a memory limit (``p - d`` with
  ``v = 1``: the 1F1B warm-up plus one) and no window otherwise;
* **memory-aware mode** (automatic when the instance has ``memory.limit``): memory is taken
  at each forward's start and released as SPEC §1 says (all at the end of ``B``; with split
  backward the fraction ``released_by_input`` at the end of ``I``, the rest at the end of
  ``W``).  A forward may start only if the device stays *safe* (banker's rule): taking the
  microbatches in flight there oldest first, each one's remaining forwards fit in what is
  free once the older ones have finished.  The oldest unfinished microbatch can therefore
  always proceed on every device, so the scheduler never deadlocks and never exceeds the
  limit.  In addition a microbatch is admitted on ``d`` only if everything it will need
  there fits next to what admitted microbatches hold or still need, plus ``slack`` (0: a
  strict reservation; None: the banker's rule alone).

**Portfolio** (default in memory-aware mode): the requested rule first, then the rules
``dfs``, ``bfs`` and ``due`` with several periods, slacks and windows, then ``restarts``
runs of the best one with seeded random offsets on its keys; the smallest makespan wins
(ties: the earlier run).  Deterministic for a given ``seed``.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cpsched.graph import build_task_graph, duration, heads_and_tails
from cpsched.instance import Instance
from cpsched.model import Action, DeviceOrders, Kind, Step
from cpsched.schedules.registry import register

_EPS = 1e-9

#: Public rule names (``dueX`` with a number ``X`` is accepted too).
RULES = ("dfs", "bfs", "cp", "due")

#: ``due`` periods tried by the portfolio, as fractions of a device's work per microbatch.
_DUE_FRACTIONS = (0.2, 0.3, 0.4, 0.5, 1.0)
#: Admission slacks tried by the portfolio, in units of the largest stage activation.
_SLACKS: tuple[float | None, ...] = (0.0, 1.0, 2.0, None)
#: Windows tried by the portfolio: ``round(a * p + b * (p - 1 - d))`` for device d.
_WINDOWS: tuple[tuple[float, float] | None, ...] = (None, (1.0, 1.0), (2.0, 2.0))

Key = tuple[float, ...]
Jitter = dict[tuple[Kind, int, int], float]


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


class _Problem:
    """Static data shared by every run on one instance (ticks, tails, memory needs)."""

    def __init__(self, inst: Instance) -> None:
        self.inst = inst
        p, S = inst.p, inst.num_stages
        self.bk = Kind.I if inst.split_backward else Kind.B
        self.kinds = (Kind.F, Kind.I, Kind.W) if inst.split_backward else (Kind.F, Kind.B)
        self.dev = [inst.device_of(s) for s in range(S)]
        self.stages = [inst.stages_of(d) for d in range(p)]
        self.first = [min(st) for st in self.stages]
        self.nstages = [len(st) for st in self.stages]
        self.lat = inst.ticks(inst.p2p_latency)
        self.dur = {k: [duration(inst, Action(k, s, 0)) for s in range(S)] for k in self.kinds}
        # heads/tails depend on (kind, stage) only: one microbatch is enough
        acts = [Action(k, s, 0) for s in range(S) for k in self.kinds]
        _, tail = heads_and_tails(build_task_graph(inst, acts))
        self.tail = {k: [tail[Action(k, s, 0)] for s in range(S)] for k in self.kinds}
        self.act = inst.activation
        self.r = inst.released_by_input
        self.need = [sum(self.act[s] for s in st) for st in self.stages]
        self.work = max(sum(self.dur[k][s] for s in st for k in self.kinds)
                        for st in self.stages)


def _key_fn(rule: str, pb: _Problem) -> Callable[[Kind, int, int], Key]:
    """The priority key of rule ``rule``: ``key(kind, stage, microbatch)``, smaller first."""
    S = pb.inst.num_stages
    tail, dur = pb.tail, pb.dur

    def prog(k: Kind, s: int) -> int:
        return s if k == Kind.F else 2 * S - 1 - s

    if rule == "dfs":
        return lambda k, s, i: (k == Kind.W, i, -prog(k, s))
    if rule == "bfs":
        return lambda k, s, i: (k == Kind.W, k != Kind.F, prog(k, s), i)
    if rule == "cp":
        return lambda k, s, i: (k == Kind.W, -tail[k][s], i)
    if rule.startswith("due"):
        try:
            frac = float(rule[3:]) if rule[3:] else 0.4
        except ValueError:
            frac = -1.0
        if frac >= 0:
            period = frac * pb.work
            return lambda k, s, i: (k == Kind.W, i * period - tail[k][s] - dur[k][s], i)
    raise ValueError(f"tie_break = {rule!r}: one of {', '.join(RULES)} (or dueX, X >= 0)")


def _run(pb: _Problem, rule: str, window: Sequence[int] | None, memory: bool,
         slack: float | None = 0.0, w_policy: str = "lazy",
         jitter: Jitter | None = None) -> ListResult:
    """One non-delay list-scheduling pass (times in ticks); see the module docstring.

    Args:
        window: in-flight microbatches per device, or None.
        memory: enforce the instance's memory limit (banker's rule + admission slack).
        slack: admission slack over the strict reservation (None: banker's rule only).
        w_policy: ``"lazy"`` (W last) or ``"eager"`` (W ranked like its input gradient).
        jitter: offsets added to the rule's main key, per (kind, stage, microbatch).
    """
    inst = pb.inst
    p, S, m = inst.p, inst.num_stages, inst.m
    base = _key_fn(rule, pb)
    bk, kinds, first = pb.bk, pb.kinds, pb.first
    jit = jitter or {}

    def key(k: Kind, s: int, i: int) -> Key:
        kk = base(bk if (k == Kind.W and w_policy == "eager") else k, s, i)
        if jit:
            return (kk[0], kk[1] + jit.get((k, s, i), 0.0), *kk[2:])
        return kk

    limit = inst.memory_limit if memory else None
    nxt = {k: [0] * S for k in kinds}                # next microbatch per (kind, stage)
    ready_at: dict[tuple[Kind, int, int], int] = {(Kind.F, 0, i): 0 for i in range(m)}
    free = [0] * p
    # per device: in-flight microbatch -> [held, still to allocate, stages not released]
    flight: list[dict[int, list[float]]] = [{} for _ in range(p)]
    held = [0.0] * p
    orders: DeviceOrders = [[] for _ in range(p)]
    starts: dict[Action, int] = {}
    running: list[tuple[int, int, Kind, int, int]] = []  # (end, seq, kind, stage, mb)
    events: list[int] = [0]
    seq = done = makespan = 0
    total = len(kinds) * S * m

    def admissible(d: int, s: int, i: int) -> bool:
        fl = flight[d]
        if s == first[d]:
            if window is not None and len(fl) >= window[d]:
                return False
            if limit is not None and slack is not None and (
                    sum(h + f for h, f, _ in fl.values()) + pb.need[d] > limit + slack + _EPS):
                return False
        if limit is None:
            return True
        # banker's rule: the state after allocating a for (s, i) must be safe
        a = pb.act[s]
        avail = limit - held[d] - a
        if avail < -_EPS:
            return False
        for j in sorted(fl):
            h, f, _ = fl[j]
            if j == i:
                h, f = h + a, f - a
            if f > avail + _EPS:
                return False
            avail += h
        return i in fl or pb.need[d] - a <= avail + _EPS

    def finish(k: Kind, s: int, i: int, t: int) -> None:
        d = pb.dev[s]
        a = pb.act[s]
        succ: list[tuple[Kind, int]] = []
        rel, stage_done = 0.0, False
        if k == Kind.F:
            succ.append((Kind.F, s + 1) if s + 1 < S else (bk, s))
        elif k == bk:
            if k == Kind.B:
                rel, stage_done = a, True
            else:
                rel = a * pb.r
                succ.append((Kind.W, s))
            if s > 0:
                succ.append((bk, s - 1))
        else:
            rel, stage_done = a * (1 - pb.r), True
        if k != Kind.F:
            rec = flight[d][i]
            rec[0] -= rel
            held[d] -= rel
            if stage_done:
                rec[2] -= 1
                if rec[2] == 0:
                    held[d] -= rec[0]  # rounding leftovers
                    del flight[d][i]
        for k2, s2 in succ:
            lag = pb.lat if pb.dev[s2] != d else 0
            ready_at[(k2, s2, i)] = t + lag
            heapq.heappush(events, t + lag)

    while done < total:
        if not events:
            raise ListSchedulerError(f"list scheduler ({rule}) stuck with {total - done} "
                                     "actions left")
        t = heapq.heappop(events)
        while events and events[0] == t:
            heapq.heappop(events)
        while running and running[0][0] <= t:
            end, _, k, s, i = heapq.heappop(running)
            finish(k, s, i, end)
            done += 1
        progressed = False
        for d in range(p):
            if free[d] > t:
                continue
            best: tuple[Kind, int, int] | None = None
            best_key: Key | None = None
            for s in pb.stages[d]:
                for k in kinds:
                    i = nxt[k][s]
                    if i >= m:
                        continue
                    r_at = ready_at.get((k, s, i))
                    if r_at is None or r_at > t:
                        continue
                    if k == Kind.F and not admissible(d, s, i):
                        continue
                    kk = key(k, s, i)
                    if best_key is None or kk < best_key:
                        best, best_key = (k, s, i), kk
            if best is None:
                continue
            k, s, i = best
            if k == Kind.F:
                a = pb.act[s]
                rec = flight[d].get(i)
                if rec is None:
                    rec = flight[d][i] = [0.0, pb.need[d], float(pb.nstages[d])]
                rec[0] += a
                rec[1] -= a
                held[d] += a
            nxt[k][s] += 1
            end = t + pb.dur[k][s]
            free[d] = end
            makespan = max(makespan, end)
            act = Action(k, s, i)
            orders[d].append(act)
            starts[act] = t
            heapq.heappush(running, (end, seq, k, s, i))
            seq += 1
            heapq.heappush(events, end)
            progressed = True
        if progressed:
            heapq.heappush(events, t)  # zero-duration actions may enable more at t
    win = "None" if window is None else "(" + ",".join(map(str, window)) + ")"
    mem = f" slack={slack}" if memory else ""
    return ListResult(orders, makespan, f"{rule}{mem} window={win} {w_policy}", starts)


def _window_of(inst: Instance, spec: tuple[float, float] | None) -> tuple[int, ...] | None:
    if spec is None:
        return None
    a, b = spec
    return tuple(max(1, int(round(a * inst.p + b * (inst.p - 1 - d)))) for d in range(inst.p))


def list_schedule(inst: Instance, tie_break: str = "dfs", *,
                  window: Sequence[int] | int | str | None = "auto",
                  memory_aware: bool | None = None, slack: float | None = 0.0,
                  portfolio: bool | None = None, restarts: int = 24,
                  seed: int = 0) -> ListResult:
    """List-schedule ``inst`` (see the module docstring).

    Args:
        tie_break: ``"dfs"`` (1F1B-like) or ``"bfs"`` (GPipe-like); also ``"cp"``, ``"due"``,
            ``"dueX"``.
        window: microbatches in flight per device: ``"auto"``, an int for every device, one
            int per device, or None.
        memory_aware: enforce ``memory.limit`` (default: when the instance has one).
        slack: admission slack over the strict reservation, in the instance's memory units
            (None: the banker's rule alone).
        portfolio: also try the other rules, slacks and windows and ``restarts`` randomised
            runs, keep the best (default: in memory-aware mode).
        restarts: randomised runs of the best configuration (portfolio only).
        seed: seed of those runs.

    Raises:
        ValueError: unknown rule or a window below 1.
    """
    pb = _Problem(inst)
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
    best = _run(pb, tie_break, win, memory, slack)
    if not portfolio:
        return best
    amax = max(inst.activation)
    rules = ["dfs", "bfs", *(f"due{x}" for x in _DUE_FRACTIONS)]
    windows = [_window_of(inst, w) for w in _WINDOWS]
    if not memory:
        windows.append(default_window(inst))
    slacks = [None if x is None else x * amax for x in _SLACKS] if memory else [None]
    w_policies = ("lazy", "eager") if inst.split_backward else ("lazy",)
    tried: list[tuple[int, int, tuple]] = []
    configs = [(r, w, sl, wp) for r in rules for w in windows for sl in slacks
               for wp in w_policies if wp == "lazy" or w is None]
    for n, cfg in enumerate(configs):
        res = _run(pb, cfg[0], cfg[1], memory, cfg[2], cfg[3])
        tried.append((res.makespan, n, cfg))
        if res.makespan < best.makespan:
            best = res
    tried.sort(key=lambda x: (x[0], x[1]))
    top = [cfg for _, _, cfg in tried[:3]]
    rng = random.Random(seed)
    noise = 4.0 * max(1.0, sum(pb.dur[Kind.F]) / len(pb.dur[Kind.F]))
    keys = [(k, s, i) for k in pb.kinds for s in range(inst.num_stages) for i in range(inst.m)]
    for n in range(restarts):
        rule, w, sl, wp = top[n % len(top)]
        jitter = {kk: rng.random() * noise for kk in keys}
        res = _run(pb, rule, w, memory, sl, wp, jitter)
        if res.makespan < best.makespan:
            best = res
            best.config += f" jitter(seed={seed}, run {n})"
    return best


def _list_check(inst: Instance) -> str | None:
    if inst.placement == "bidirectional":
        return 'pipeline.placement = "bidirectional": list needs "loop" or "v"'
    return None


@register("list", summary="list scheduler: non-delay priority rule + tie-breakers; "
                          "memory-aware (never over the limit) when a limit is set",
          preconditions='placement "loop" or "v"',
          source="list scheduling (HLS); pipeline-scheduling article (dfs -> 1F1B, "
                 "bfs -> AFAB); Zero Bubble greedy W placement (arXiv:2401.10241)",
          check=_list_check)
def list_scheduler(inst: Instance, tie_break: str = "dfs",
                   window: Sequence[int] | int | str | None = "auto",
                   memory_aware: bool | None = None, slack: float | None = 0.0,
                   portfolio: bool | None = None, restarts: int = 24,
                   seed: int = 0) -> DeviceOrders:
    """Per-rank orders of :func:`list_schedule` (same arguments, same defaults)."""
    res = list_schedule(inst, tie_break, window=window, memory_aware=memory_aware,
                        slack=slack, portfolio=portfolio, restarts=restarts, seed=seed)
    return [list[Step](ops) for ops in res.orders]
