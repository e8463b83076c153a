"""The state of the window search (docs/modelling.md §17): what does not change between
windows (:class:`Problem`) and the incumbent as device orders of steps with their times and
tails (:class:`Incumbent`).  Used by :mod:`cpsched.solver.lns` (the search) and
:mod:`cpsched.solver.lns_window` (one window's model).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import accumulate

import networkx as nx

from cpsched.actions import Action, Kind, Overlap, Step
from cpsched.engine import run_orders
from cpsched.graph import memory_buffers
from cpsched.instance import Instance
from cpsched.rules import stage_ticks
from cpsched.solver.constraints import fifo_pairs
from cpsched.solver.overlap import Pair


class Problem:
    """What does not change between windows: durations, devices, dependencies with their
    lags, FIFO successors, memory buffers per device (ticks, the solver's memory units) and
    the overlapped pair durations."""

    def __init__(self, inst: Instance, g: nx.DiGraph, *, pairs: bool) -> None:
        self.inst = inst
        self.dur: dict[Action, int] = nx.get_node_attributes(g, "duration")
        self.dev: dict[Action, int] = nx.get_node_attributes(g, "device")
        self.succ: dict[Action, list[tuple[Action, int]]] = {a: [] for a in g}
        self.pred: dict[Action, list[tuple[Action, int]]] = {a: [] for a in g}
        for u, v, lag in g.edges(data="lag"):
            self.succ[u].append((v, lag))
            self.pred[v].append((u, lag))
        self.fifo_next = dict(fifo_pairs(inst, self.dur))
        ov = stage_ticks(inst).overlap
        #: pair duration per stage of the forward (ticks); None without an overlap cost or
        #: when the search may not form pairs
        self.overlap: list[int] | None = None if ov is None or not pairs else list(ov)
        self.pool, buffers = memory_buffers(inst)
        self.buffers: dict[int, list[tuple[Action, Action, int]]] = {}
        for f, rel, amount in buffers:
            self.buffers.setdefault(self.dev[f], []).append((f, rel, amount))


#: A step of an incumbent's device order: its actions — one, or an overlapped pair
#: ``(F, B or I)``, with split backward ``(F, I, W)`` (the pair runs the ``W`` too).
Unit = tuple[Action, ...]


class Incumbent:
    """A schedule as device orders of steps with ASAP times (ticks): each action's start,
    end, position ``(device, index)``, its step's duration and the step's tail in the order
    graph (longest path from the step's end to the makespan), the pair partner of each paired
    ``F``/``B``/``I``, the makespan, and the steps in start order."""

    def __init__(self, pb: Problem, orders: list[list[Unit]]) -> None:
        run = run_orders(pb.inst, [[engine_step(u) for u in row] for row in orders])
        if run.stuck or run.suspect:
            raise ValueError("orders do not run")  # never for orders built here
        self.orders = orders
        self.start: dict[Action, int] = {}
        self.end: dict[Action, int] = {}
        self.pos: dict[Action, tuple[int, int]] = {}
        self.step_dur: dict[Action, int] = {}
        self.paired: dict[Action, Action] = {}
        #: every step ``(start, device, index)`` by start (windows are cut from it)
        self.by_start: list[tuple[int, int, int]] = []
        for d, row in enumerate(orders):
            for k, (u, t0, t1) in enumerate(zip(row, run.starts[d], run.ends[d], strict=True)):
                self.by_start.append((t0, d, k))
                for a in u:
                    fused_w = len(u) > 1 and a.kind == Kind.W
                    self.start[a], self.end[a] = (t1 if fused_w else t0), t1
                    self.pos[a], self.step_dur[a] = (d, k), t1 - t0
                if len(u) > 1:
                    self.paired[u[0]], self.paired[u[1]] = u[1], u[0]
        self.by_start.sort()
        self.makespan = max(self.end.values(), default=0)
        self.tail = self._tails(pb)

    def _tails(self, pb: Problem) -> dict[Action, int]:
        """Longest path from each step's end to the makespan in the order graph
        (dependencies with their lags, and each device's next step), in reverse topological
        order (Kahn's algorithm: zero durations make time order ambiguous); by action."""
        base = list(accumulate((len(row) for row in self.orders), initial=0))
        sid = {a: base[d] + k for a, (d, k) in self.pos.items()}
        n = base[-1]
        dur = [0] * n
        succ: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        pred: list[list[int]] = [[] for _ in range(n)]
        for d, row in enumerate(self.orders):
            for k, u in enumerate(row):
                v = base[d] + k
                dur[v] = self.step_dur[u[0]]
                out = succ[v]
                if k + 1 < len(row):
                    out.append((v + 1, 0))
                for a in u:
                    out.extend((sid[b], lag) for b, lag in pb.succ[a] if sid[b] != v)
                for w, _ in out:
                    pred[w].append(v)
        waiting = [len(out) for out in succ]
        ready = [v for v in range(n) if waiting[v] == 0]
        tail = [0] * n
        while ready:
            v = ready.pop()
            tail[v] = max((lag + dur[w] + tail[w] for w, lag in succ[v]), default=0)
            for u in pred[v]:
                waiting[u] -= 1
                if waiting[u] == 0:
                    ready.append(u)
        return {a: tail[v] for a, v in sid.items()}


def engine_step(u: Unit) -> Step:
    """A step for :func:`cpsched.engine.run_orders`: a pair of a split instance runs its
    backward as a fused ``B``."""
    if len(u) == 1:
        return u[0]
    f, b = u[0], u[1]
    return Overlap(f, Action(Kind.B, b.stage, b.microbatch) if b.kind == Kind.I else b)


def unit_orders(pb: Problem, start: Mapping[Action, int], end: Mapping[Action, int],
                pairs: Iterable[Pair]) -> list[list[Unit]]:
    """Device orders of the steps of the timed actions ``start``/``end`` (ticks): each pair a
    step (with split backward its ``W`` too), every other action alone; by (start, end)."""
    units: list[Unit] = [(f, b, Action(Kind.W, b.stage, b.microbatch)) if b.kind == Kind.I
                         else (f, b) for f, b in pairs]
    covered = {a for u in units for a in u}
    units += [(a,) for a in start if a not in covered]
    orders: list[list[Unit]] = [[] for _ in range(pb.inst.p)]
    for u in sorted(units, key=lambda u: (start[u[0]], end[u[0]])):
        orders[pb.dev[u[0]]].append(u)
    return orders


__all__ = ["Incumbent", "Problem", "Unit", "engine_step", "unit_orders"]
