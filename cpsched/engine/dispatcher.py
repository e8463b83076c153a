"""The event engine's list scheduling: :func:`dispatch`, event-driven and non-delay, for
:func:`cpsched.core.list_schedule` (a ResourceGraph) and the pipeline's
:func:`~cpsched.schedules.listsched.pipeline_list_schedule`.  At each event time every
resource with room starts, among its available tasks (predecessors ended plus lag, head of
their FIFO queue, admitted by the caller), the one with the smallest key — alone, or in an
overlapped pair when the caller's pairing rule says so (docs/modelling.md §25).  Keys come
from named priority rules (``dfs``, ``bfs``, ``cp``, ``due`` in
:mod:`cpsched.schedules.listsched`; ``latest_start`` in :mod:`cpsched.core`) with
tie-breakers (:func:`lexicographic`).

Sources: the pipeline-scheduling article (docs/references.md#pipeline-scheduling-article);
job-shop-lib's dispatcher and rules (#job-shop-lib).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: A time no task is ready by (ticks).
NEVER = 1 << 62
#: :func:`dispatch` hook bits (per task: which hooks it needs).
ADMIT, START, FINISH = 1, 2, 4

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
    #: overlapped pairs (``dispatch(pair=...)``): the task ``order`` lists -> its mate
    pairs: dict[int, int] = field(default_factory=dict)
    #: riders fused into a pair (not in ``order``)
    fused: set[int] = field(default_factory=set)

    @property
    def complete(self) -> bool:
        """Every task started."""
        return not self.waiting and all(s >= 0 for s in self.starts)


#: :func:`dispatch`'s pairing rule (overlapped pairs, docs/modelling.md §25): offered each task
#: ``t`` about to start and the candidates it was chosen from, it returns None (``t`` runs
#: alone) or ``(mate, ticks, rider)``: an available ``mate`` of the same resource (admitted
#: like any task) starts with ``t`` as one step of ``ticks`` on one unit, and ``rider``
#: (``-1``: none; a task not started yet, e.g. the weight gradient fused into the pair's
#: backward) with them; all three end together.  The rider is left out of the orders
#: (``DispatchResult.fused``); ``DispatchResult.pairs`` maps ``t`` to its mate.  A mate that
#: cannot start leaves ``t`` alone.
PairRule = Callable[[int, list[int]], "tuple[int, int, int] | None"]


def dispatch(tt: TaskTable, keys: Sequence[Key], *,
             admit: Callable[[int], bool] | None = None,
             on_start: Callable[[int, int], None] | None = None,
             on_finish: Callable[[int, int], None] | None = None,
             local: bool = True, hooked: Sequence[int] | None = None,
             pair: PairRule | None = None) -> DispatchResult:
    """Non-delay list scheduling of ``tt``: at each event time (an end, or a task's
    predecessors' ends plus lag) the tasks ending then finish (``on_finish(task, end)``), then
    every resource with room tries its available tasks in key order (``keys[t]``; ties: the
    order they became available) and starts them while it has room and ``admit(task)`` agrees
    (``on_start(task, time)``).  ``local``: ``admit`` depends only on the state of the task's
    own resource (so only resources touched by an event are tried again; else all, in one
    key order, after each finish).  ``hooked[t]``: which of the ``ADMIT | START | FINISH``
    hooks task ``t`` needs (default all).  Returns a :class:`DispatchResult`, incomplete
    when at some point nothing runs and no available task is admitted.

    ``pair``: the pairing rule (:data:`PairRule`, overlapped pairs).
    """
    d = _Dispatch(tt)
    n, R, res, cap, busy, qnext, follow, qof = (
        d.n, d.R, d.res, d.cap, d.busy, d.qnext, d.follow, d.qof)
    dur, ready_at, seq, rqueues = tt.duration, d.ready_at, d.seq, tt.resource_queues
    starts, order, events, running, sequence = d.starts, d.order, d.events, [], []
    ends = d.ends
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
        fin = bool(running) and running[0][0] <= now
        dirty = d.finish(now, running, on_finish, hk) if fin else set()
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
                if starts[t] >= 0 or busy[r] >= cap[r] or (
                        admit is not None and hk[t] & ADMIT and not admit(t)):
                    continue
                busy[r] += 1
                order[r].append(t)
                group, end = ((t,), now + dur[t]) if pair is None else d.group(
                    t, now, pair(t, cands), admit, hk)
                for x in group:
                    q = qof[x]
                    if qnext[q] == x:  # (a rider may sit behind the head of its queue)
                        nxt = follow[x]
                        while nxt < n and starts[nxt] >= 0:
                            nxt = follow[nxt]
                        qnext[q] = nxt
                    starts[x], ends[x] = now, end
                    hpush(running, (end, nstart, x))
                    nstart += 1
                    sequence.append(x)
                    if on_start is not None and hk[x] & START:
                        on_start(x, now)
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
        self.ends = [-1] * n
        self.succ = tt.succ
        self.duration = tt.duration
        self.rides: set[int] = set()  # a pair's mate and rider (they hold no unit)
        self.pairs: dict[int, int] = {}
        self.fused: set[int] = set()

    def finish(self, now: int, running: list[tuple[int, int, int]],
               on_finish: Callable[[int, int], None] | None, hk: Sequence[int]) -> set[int]:
        """End the running tasks due by ``now`` (``on_finish``); successors whose last
        predecessor ended become available (at once, or at an event after their lag).
        Returns the resources to try again."""
        busy, res, rides, succ, rdy, npred = (
            self.busy, self.res, self.rides, self.succ, self.rdy, self.npred)
        dirty = set()
        while running and running[0][0] <= now:
            e, _, t = heapq.heappop(running)
            if t not in rides:  # a pair's mate and rider hold no unit of their own
                busy[res[t]] -= 1
            dirty.add(res[t])
            if on_finish is not None and hk[t] & FINISH:
                on_finish(t, e)
            for w, lag in succ[t]:
                if e + lag > rdy[w]:
                    rdy[w] = e + lag
                npred[w] -= 1
                if npred[w] == 0:
                    self.ready_at[w], self.seq[w], self.nseq = rdy[w], self.nseq, self.nseq + 1
                    if rdy[w] <= now:
                        dirty.add(res[w])
                    else:
                        heapq.heappush(self.events, (rdy[w], res[w]))
        return dirty

    def group(self, t: int, now: int, mate: tuple[int, int, int] | None,
              admit: Callable[[int], bool] | None, hk: Sequence[int]
              ) -> tuple[tuple[int, ...], int]:
        """The tasks starting with ``t`` at ``now`` (``t`` first) and their end: ``t``
        alone, or with the ``mate`` and rider the pairing rule offered if the mate can
        start (available on ``t``'s resource, not started, admitted)."""
        if mate is not None:
            u, ticks, w = mate
            if self.starts[u] < 0 and self.ready_at[u] <= now and self.res[u] == self.res[t] \
                    and (admit is None or not hk[u] & ADMIT or admit(u)):
                self.pairs[t] = u
                self.rides.add(u)
                if w < 0 or self.starts[w] >= 0:
                    return (t, u), now + ticks
                self.rides.add(w)
                self.fused.add(w)
                return (t, u, w), now + ticks
        return (t,), now + self.duration[t]

    def result(self, sequence: list[int]) -> DispatchResult:
        """The :class:`DispatchResult` once the loop has stopped."""
        starts, n = self.starts, self.n
        waiting = [] if len(sequence) == n else sorted(
            (t for t in range(n) if starts[t] < 0 and self.ready_at[t] < NEVER),
            key=self.seq.__getitem__)
        return DispatchResult(starts, self.order[:self.R], max(self.ends, default=0), waiting,
                              sequence, self.pairs, self.fused)


__all__ = ["ADMIT", "FINISH", "NEVER", "START", "DispatchResult", "Key", "PairRule",
           "PriorityRule", "TaskTable", "dispatch", "lexicographic"]
