"""The event engine's fixed orders: per-device orders to times (:func:`run_orders`), for the
simulator (:func:`cpsched.simulate.simulate`) and the PyTorch dependency scan
(:mod:`cpsched.torch_io`).  Each device runs its steps in order; a step starts when its device
is free and its predecessors (:mod:`cpsched.rules`) have ended plus lag.  Devices that cannot
go on are :class:`Stuck`; :func:`waiting_cycle` names the cycle they wait in.

Source: the visualizer's simulator (docs/references.md#ppviz).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from cpsched.actions import Action, Kind, Overlap, Step, step_actions
from cpsched.instance import Instance
from cpsched.rules import dependencies, fused_rule_from, pair_kinds_ok, stage_ticks


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


__all__ = ["OrderError", "OrderRun", "Stuck", "paused_gc", "run_orders", "waiting_cycle"]
