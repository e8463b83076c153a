"""The one event engine: per-device orders to times, and list scheduling by named rules.

* :func:`run_orders` — **fixed orders**: the simulator (:func:`cpsched.simulate.simulate`) and
  the PyTorch dependency scan (:mod:`cpsched.torch_io`).  Each device runs its steps in order;
  a step starts when its device is free and its predecessors (:mod:`cpsched.rules`) have ended
  plus lag.  Devices that cannot go on are :class:`Stuck`; :func:`waiting_cycle` names the
  cycle they wait in.
* :func:`dispatch` — **list scheduling**, event-driven and non-delay, for
  :func:`cpsched.core.list_schedule` (a ResourceGraph) and the pipeline's
  :func:`~cpsched.schedules.listsched.pipeline_list_schedule`: at each event time every
  resource with room starts, among its available tasks (predecessors ended plus lag, head of
  their FIFO queue, admitted by the caller), the one with the smallest key.  Keys come from
  named priority rules (``dfs``, ``bfs``, ``cp``, ``due`` in :mod:`cpsched.schedules.listsched`;
  ``latest_start`` in :mod:`cpsched.core`) with tie-breakers (:func:`lexicographic`).

Sources: the pipeline-scheduling article (docs/references.md#pipeline-scheduling-article);
job-shop-lib's dispatcher and rules (#job-shop-lib); the visualizer's simulator (#ppviz).
"""

from __future__ import annotations

import gc
import heapq
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from cpsched.actions import Action, Kind, Overlap, Step, step_actions
from cpsched.instance import Instance
from cpsched.rules import dependencies, fused_rule_from, pair_kinds_ok, stage_ticks

#: A time no task is ready by (ticks).
NEVER = 1 << 62
#: :func:`dispatch` hook bits (per task: which hooks it needs).
ADMIT, START, FINISH = 1, 2, 4


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while building large acyclic structures (else it
    rescans them again and again: a third of a large run); restores its state."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class OrderError(ValueError):
    """Per-device orders that are incomplete, inconsistent with the instance, or deadlock."""


# ================================================================== fixed orders (simulation)
@dataclass(frozen=True)
class Stuck:
    """A device that cannot go on: it waits at ``orders[rank][index]`` (``step``) for
    ``waits_for``, which has not run."""

    rank: int
    index: int
    step: Step
    waits_for: Action


@dataclass
class OrderRun:
    """What :func:`run_orders` found.

    Attributes:
        starts: ``starts[d][k]``: start tick of ``orders[d][k]`` (only the steps that ran).
        ends: ``ends[d][k]``: its end tick.
        pair_ids: ``(d, k) -> n``: the n-th overlapped pair run (in run order).
        stuck: devices left waiting (empty: every step ran).
        suspect: the orders may break the completeness rule (the run stopped at the first
            action out of range, misplaced, of a kind not allowed or twice, or some are
            missing); :func:`cpsched.simulate.check_orders` says which.
    """

    starts: list[list[int]]
    ends: list[list[int]]
    pair_ids: dict[tuple[int, int], int] = field(default_factory=dict)
    stuck: list[Stuck] = field(default_factory=list)
    suspect: bool = False


_KINDS = (Kind.F, Kind.B, Kind.I, Kind.W)  # end-table slots: (s * m + i) * 4 + slot
_SLOT: dict[str, int] = {Kind.F: 0, Kind.B: 1, Kind.I: 2, Kind.W: 3}


def run_orders(instance: Instance, orders: Sequence[Sequence[Step]], *,
               strict: bool = True) -> OrderRun:
    """Run per-device orders on ``instance`` and time every step (ticks).

    Args:
        orders: ``orders[d]``: device d's steps (actions or overlapped pairs) in order.
        strict: raise when an overlapped pair holds its own predecessor (else that
            dependency is ignored, as PyTorch's dependency scan does).

    Returns:
        An :class:`OrderRun`.  A run without ``stuck`` devices and not ``suspect`` ran every
        action of the instance exactly once on its device.

    Raises:
        OrderError: (``strict`` only) a pair overlapping an action with its own predecessor.

    Rounds run every device in turn as far as it can go (skipping a device still waiting for
    what stopped it); pairs are numbered in the order they run.
    """
    p, S, m = instance.p, instance.num_stages, instance.m
    run = OrderRun([[] for _ in range(p)], [[] for _ in range(p)])
    if len(orders) != p:
        run.suspect = True
        return run
    st = _RunState(instance, orders, run, strict)
    with paused_gc():
        _rounds(st)
    if run.suspect:
        return run
    end = st.end
    if any(st.ptr[d] < len(orders[d]) for d in range(p)):
        run.stuck = _stuck(instance, orders, st.ptr, st.done)
        return run
    # every action ran once (a second run of one is caught when it happens), B and I never
    # both, W only after its I: complete iff all F ran, B or I everywhere, as many W as I
    n = S * m
    nf, nb, ni, nw = (n - end[k::4].count(None) for k in range(4))
    if nf != n or nb + ni != n or ni != nw:
        run.suspect = True
    return run


class _RunState:
    """The state of one :func:`run_orders` call: per-device pointers, free times, and the
    end tick of every action that ran (``end[(s * m + i) * 4 + slot]``)."""

    def __init__(self, instance: Instance, orders: Sequence[Sequence[Step]], run: OrderRun,
                 strict: bool) -> None:
        self.instance, self.orders, self.run, self.strict = instance, orders, run, strict
        self.tk = stage_ticks(instance)
        self.S, self.m = instance.num_stages, instance.m
        self.end: list[int | None] = [None] * (4 * self.S * self.m)
        self.ptr, self.free = [0] * instance.p, [0] * instance.p
        self.split, self.pairs = instance.split_backward, 0
        self._fused: set[tuple[int, int]] | None = None
        self.tables: dict[str, list[Row]] = {}

    def fused(self) -> set[tuple[int, int]]:
        """The (stage, microbatch) that run a fused ``B`` (computed once)."""
        if self._fused is None:
            self._fused = {(a.stage, a.microbatch) for steps in self.orders for st in steps
                           for a in step_actions(st) if a.kind == Kind.B}
        return self._fused

    def done(self, a: Action) -> int | None:
        """End tick of ``a`` if it ran (``a`` in range)."""
        return self.end[(a.stage * self.m + a.microbatch) * 4 + _SLOT[a.kind]]


Row = tuple[int | None, int, int, int, int, int]


def _kind_tables(st: _RunState) -> dict[str, list[Row]]:
    """Per allowed kind, per ``s + S * direction``: (predecessor's end slot minus the action's
    base slot or None, lag, duration, device, offset of the slot that must stay empty — B's
    for I, I's for B — or 0, own slot)."""
    S, m4, tk = st.S, 4 * st.m, st.tk
    dur = [tk.duration[k] for k in _KINDS]
    out: dict[str, list[Row]] = {k: [] for k in _KINDS}
    for dr in (0, 1):
        for s in range(S):
            dev = tk.device[dr][s]
            out[Kind.F].append((-m4 if s else None, tk.forward_lag[dr][s], dur[0][s], dev, 0, 0))
            pred = (0, 0) if s == S - 1 else (m4 + 1, tk.backward_lag[dr][s])
            out[Kind.B].append((pred[0], pred[1], dur[1][s], dev, 1, 1))
            out[Kind.I].append((pred[0], pred[1], dur[2][s], dev, -1, 2))
            out[Kind.W].append((2, 0, dur[3][s], dev, 0, 3))
    if not st.split:
        del out[Kind.I], out[Kind.W]
    return out


def _rounds(st: _RunState) -> None:  # noqa: C901 - the hot loop, kept in one piece
    """Run rounds until no device moves; stops early when the run turns ``suspect``."""
    run, end, orders, ptr, fr = st.run, st.end, st.orders, st.ptr, st.free
    S, m, split, half = st.S, st.m, st.split, st.tk.half
    st.tables = _kind_tables(st)
    kt = st.tables.get
    wait = [-1] * len(orders)  # end slot each device waits for (-1: try again)
    progress = True
    while progress:
        progress = False
        for d, steps in enumerate(orders):
            w, k, n = wait[d], ptr[d], len(steps)
            if k >= n or (w >= 0 and end[w] is None):
                continue
            k0, free, sd, ed = k, fr[d], run.starts[d], run.ends[d]
            while k < n:
                a = steps[k]
                if type(a) is not Action:
                    t = _pair(st, d, k, a, free)
                    if t is None:
                        w = -1
                        break
                    free, k = t, k + 1
                    continue
                kind, s, i = a
                tab = kt(kind)
                if tab is None or not (0 <= s < S and 0 <= i < m):
                    run.suspect = True  # a kind the instance does not allow, or out of range
                    return
                base = (s * m + i) << 2
                po, lag, du, dv, mo, slot = tab[s if i < half else s + S]
                if dv != d or end[base + slot] is not None or (
                        mo and end[base + slot + mo] is not None):
                    run.suspect = True  # wrong device, twice, or both B and I
                    return
                if po is None:
                    ready = 0
                else:
                    w = base + po
                    ready = end[w]
                    if ready is None and po > 2 and split:  # the next stage's I, unless fused
                        w += 0 if (s + 1, i) in st.fused() else 1
                        ready = end[w]
                    if ready is None:
                        break
                    ready += lag
                t0 = ready if ready > free else free
                free = t0 + du
                end[base + slot] = free
                sd.append(t0)
                ed.append(free)
                k += 1
            wait[d] = w if k < n else -1
            if k > k0:
                ptr[d], fr[d], progress = k, free, True


def _pair(st: _RunState, d: int, k: int, pair: Step, free: int) -> int | None:
    """Run the overlapped pair ``orders[d][k]`` if it can start: its end tick, or None."""
    run, end, S, m, tk = st.run, st.end, st.S, st.m, st.tk
    if not isinstance(pair, Overlap) or not pair_kinds_ok(pair):
        run.suspect = True
        return None
    ready, at = free, []
    for a in pair:
        kind, s, i = a
        tab = st.tables.get(kind)
        if tab is None or not (0 <= s < S and 0 <= i < m):
            run.suspect = True
            return None
        base = (s * m + i) << 2
        po, lag, _, dv, mo, slot = tab[s if i < tk.half else s + S]
        if dv != d or end[base + slot] is not None or (mo and end[base + slot + mo] is not None):
            run.suspect = True
            return None
        at.append(base + slot)
        if po is None:
            continue
        if slot in (1, 2) and s == S - 1 and tuple(pair.forward) == (Kind.F, s, i):
            if st.strict:
                raise OrderError(f"rank {d}: {pair} overlaps {a} with its own "
                                 f"predecessor {pair.forward}")
            continue
        w = base + po
        e = end[w]
        if e is None and po > 2 and st.split and (s + 1, i) not in st.fused():
            e = end[w + 1]
        if e is None:
            return None
        ready = max(ready, e + lag)
    f, b = pair.forward, pair.backward
    du = (tk.overlap[f.stage] if tk.overlap is not None
          else tk.duration[Kind.F][f.stage] + tk.duration[b.kind][b.stage])
    for slot in at:
        end[slot] = ready + du
    run.starts[d].append(ready)
    run.ends[d].append(ready + du)
    run.pair_ids[(d, k)] = st.pairs
    st.pairs += 1
    return ready + du


def _stuck(instance: Instance, orders: Sequence[Sequence[Step]], ptr: list[int],
           done: Callable[[Action], int | None]) -> list[Stuck]:
    """The devices left waiting, each with the first predecessor it waits for."""
    fused = fused_rule_from(a for steps in orders for st in steps for a in step_actions(st))
    out = []
    for r, steps in enumerate(orders):
        if ptr[r] >= len(steps):
            continue
        step = steps[ptr[r]]
        members = step_actions(step)
        missing = next(pred for a in members for pred, _ in dependencies(instance, a, fused)
                       if pred not in members and done(pred) is None)
        out.append(Stuck(r, ptr[r], step, missing))
    return out


def waiting_cycle(orders: Sequence[Sequence[Step]], stuck: Sequence[Stuck]
                  ) -> list[tuple[Stuck, int]]:
    """The cycle of waiting devices behind a deadlock: ``(stuck device, rank owning what it
    waits for)``, each waiting for the next, the last for the first.  Every stuck device waits
    for a stuck one, so "waits for the owner of" from the first stuck device reaches a cycle."""
    owner = {a: d for d, steps in enumerate(orders) for st in steps for a in step_actions(st)}
    by_rank = {s.rank: s for s in stuck}
    seen: list[int] = []
    r = stuck[0].rank
    while r not in seen:
        seen.append(r)
        r = owner[by_rank[r].waits_for]
    cycle = seen[seen.index(r):]
    return [(by_rank[x], owner[by_rank[x].waits_for]) for x in cycle]


# ========================================================================= list scheduling
Key = Any
#: A named priority rule: the key of task ``t`` (smaller starts first).
PriorityRule = Callable[[int], Key]


def lexicographic(*rules: PriorityRule) -> PriorityRule:
    """One rule from several: the first decides, the next break its ties, and so on."""
    return lambda t: tuple(r(t) for r in rules)


@dataclass
class TaskTable:
    """Tasks ``0..n-1`` for :func:`dispatch` (integer ticks).

    Attributes:
        duration: per task, ticks.
        resource: per task, index into ``capacity``; ``-1``: needs no resource.
        capacity: per resource, how many tasks it runs at once.
        succ: per task, ``(successor, lag)``: ``start(successor) >= end(task) + lag``.
        queues: FIFO chains, started in list order (a lone task is a queue of one); every task
            is in one queue, a queue's tasks on one resource.
        resource_queues: per resource (then one entry for tasks needing none), its queues.
    """

    duration: list[int]
    resource: list[int]
    capacity: list[int]
    succ: list[list[tuple[int, int]]]
    queues: list[list[int]]
    resource_queues: list[list[int]]


@dataclass
class DispatchResult:
    """Starts per task (``-1``: never started), start order per resource (and over all,
    ``sequence``), and, when scheduling got stuck, the tasks that were available but not
    admitted (in the order they became available)."""

    starts: list[int]
    order: list[list[int]]
    makespan: int
    waiting: list[int]
    sequence: list[int] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Every task started."""
        return not self.waiting and all(s >= 0 for s in self.starts)


def dispatch(tt: TaskTable, keys: Sequence[Key], *,
             admit: Callable[[int], bool] | None = None,
             on_start: Callable[[int, int], None] | None = None,
             on_finish: Callable[[int, int], None] | None = None,
             local: bool = True, hooked: Sequence[int] | None = None) -> DispatchResult:
    """Non-delay list scheduling of ``tt``: at each event time (an end, or a task's
    predecessors' ends plus lag) the tasks ending then finish (``on_finish(task, end)``), then
    every resource with room tries its available tasks in key order (``keys[t]``; ties: the
    order they became available) and starts them while it has room and ``admit(task)`` agrees
    (``on_start(task, time)``).  ``local``: ``admit`` depends only on the state of the task's
    own resource (so only resources touched by an event are tried again; else all, in one
    key order, after each finish).  ``hooked[t]``: which of the ``ADMIT | START | FINISH``
    hooks task ``t`` needs (default all).  Returns a :class:`DispatchResult`, incomplete
    when at some point nothing runs and no available task is admitted.
    """
    d = _Dispatch(tt)
    n, R, res, cap, busy, qnext, follow, qof = (
        d.n, d.R, d.res, d.cap, d.busy, d.qnext, d.follow, d.qof)
    dur, succ, npred, ready_at, rdy, seq, rqueues = (
        tt.duration, tt.succ, d.npred, d.ready_at, d.rdy, d.seq, tt.resource_queues)
    starts, order, events, running, nseq, sequence = d.starts, d.order, d.events, [], d.nseq, []
    hk = [ADMIT | START | FINISH] * n if hooked is None else hooked
    nstart = 0
    sort_key = keys.__getitem__ if local else (lambda t: (keys[t], seq[t]))
    hpush, hpop = heapq.heappush, heapq.heappop
    while nstart < n:
        if running and (not events or running[0][0] <= events[0][0]):
            now = running[0][0]
        elif events:
            now = events[0][0]
        else:
            break
        dirty = set()
        fin = bool(running) and running[0][0] <= now
        while running and running[0][0] <= now:
            e, _, t = hpop(running)
            busy[res[t]] -= 1
            dirty.add(res[t])
            if on_finish is not None and hk[t] & FINISH:
                on_finish(t, e)
            for w, lag in succ[t]:
                if e + lag > rdy[w]:
                    rdy[w] = e + lag
                npred[w] -= 1
                if npred[w] == 0:
                    ready_at[w], seq[w], nseq = rdy[w], nseq, nseq + 1
                    if rdy[w] <= now:
                        dirty.add(res[w])
                    else:
                        hpush(events, (rdy[w], res[w]))
        while events and events[0][0] <= now:
            dirty.add(hpop(events)[1])
        if fin and not local:  # memory freed anywhere may admit tasks anywhere
            dirty = set(range(R + 1))
        if local:  # each resource on its own: its best admitted tasks
            groups = [[qnext[q] for q in rqueues[r] if ready_at[qnext[q]] <= now]
                      for r in dirty if busy[r] < cap[r]]
        else:  # all resources together, in key order
            groups = [[qnext[q] for r in sorted(dirty) if busy[r] < cap[r]
                       for q in rqueues[r] if ready_at[qnext[q]] <= now]]
        for cands in groups:
            if len(cands) > 1:
                cands.sort(key=sort_key)
            for t in cands:
                r = res[t]
                if busy[r] >= cap[r] or (admit is not None and hk[t] & ADMIT and not admit(t)):
                    continue
                busy[r] += 1
                q = qof[t]
                qnext[q] = follow[t]
                starts[t] = now
                hpush(running, (now + dur[t], nstart, t))
                nstart += 1
                order[r].append(t)
                sequence.append(t)
                if on_start is not None and hk[t] & START:
                    on_start(t, now)
                if busy[r] < cap[r] and follow[t] < n:
                    hpush(events, (now, r))
    return d.result(sequence)


class _Dispatch:
    """The initial state of one :func:`dispatch` call.  Queue heads are task ids; the
    sentinel task ``n`` (never ready) marks an empty queue."""

    def __init__(self, tt: TaskTable) -> None:
        self.n = n = len(tt.duration)
        self.R = R = len(tt.capacity)
        self.res = [R if r < 0 else r for r in tt.resource]
        self.cap = [*tt.capacity, n + 1]
        self.busy = [0] * (R + 1)
        self.npred = [0] * n
        for ws in tt.succ:
            for w, _ in ws:
                self.npred[w] += 1
        self.qof = [0] * n
        self.follow = [n] * n
        self.qnext = [ts[0] if ts else n for ts in tt.queues]
        for q, ts in enumerate(tt.queues):
            for k, t in enumerate(ts):
                self.qof[t] = q
                if k + 1 < len(ts):
                    self.follow[t] = ts[k + 1]
        self.ready_at, self.rdy, self.seq = [NEVER] * (n + 1), [0] * n, [0] * n
        self.nseq = 0
        for t in range(n):
            if self.npred[t] == 0:
                self.ready_at[t], self.seq[t], self.nseq = 0, self.nseq, self.nseq + 1
        self.order: list[list[int]] = [[] for _ in range(R + 1)]
        self.events: list[tuple[int, int]] = [(0, r) for r in range(R + 1)]
        self.starts = [-1] * n
        self.duration = tt.duration

    def result(self, sequence: list[int]) -> DispatchResult:
        """The :class:`DispatchResult` once the loop has stopped."""
        starts, n = self.starts, self.n
        waiting = [] if len(sequence) == n else sorted(
            (t for t in range(n) if starts[t] < 0 and self.ready_at[t] < NEVER),
            key=self.seq.__getitem__)
        makespan = max((x + du for x, du in zip(starts, self.duration, strict=True) if x >= 0),
                       default=0)
        return DispatchResult(starts, self.order[:self.R], makespan, waiting, sequence)


__all__ = [
    "ADMIT", "FINISH", "NEVER", "START", "DispatchResult", "Key", "OrderError", "OrderRun",
    "PriorityRule", "Stuck", "TaskTable", "dispatch", "lexicographic", "paused_gc",
    "run_orders", "waiting_cycle",
]
