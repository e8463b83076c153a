"""The tent bound: a memory-only relaxation that places every microbatch by its turn
(docs/modelling.md §24).

Every microbatch passes its last stage ``S - 1`` once; call the start of its ``F(S - 1)`` its
*anchor*.  A buffer of stage ``s`` (docs/spec.md §1: held from the start of ``F(s)`` to the end
of the action releasing it) is then held at least over ``[anchor - A_s, anchor + B_s)``, where
``A_s`` is the longest chain from the start of ``F(s)`` to the anchor and ``B_s`` the longest
chain from the anchor to the release's end (loop and V placement: one chain per microbatch,
the same for all).  So each microbatch puts a fixed *tent* of memory on each device around its
anchor, whatever the schedule, and the anchors lie on one device (``F(S - 1)`` runs there), in
``[head, C - duration - tail]`` of the anchor.

**Relaxation.** Forget every device's order and all other constraints; keep, for one or two
devices, "the tents sum to at most the limit" at sample times, and for the anchors a density
per cell of ``D`` ticks (at most ``(D - 1) // duration + 1`` anchors in a cell: they run one at
a time).  An anchor anywhere in a cell holds at least the intersection of the tents of the
cell's first and last tick.  For a candidate makespan ``C`` the LP (GLOP) maximises the number
of anchors; if it is below ``m`` no schedule has makespan ``C`` (every schedule gives a feasible
point with ``m`` anchors).  The anchors that fit grow with ``C``, so a search over the number of
cells finds the smallest ``C`` the LP does not refute.

Where memory sets the pace (far below interleaved 1F1B's memory) this sees what the area
bound (§11) cannot: near both ends of the schedule a microbatch's tent stands almost alone
(its buffers of the early stages are held long before and after the others), so the limit
cannot be filled there.  p32-loop-v4-m64-lim8-profiled: 1333.40 → 1409.6 with one-unit cells.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import networkx as nx
import numpy as np
from ortools.linear_solver import pywraplp

from cpsched.actions import Action, Kind
from cpsched.core import HeadsTails
from cpsched.graph import microbatch_chains
from cpsched.instance import Instance
from cpsched.rules import release_actions

#: Most anchor cells of the LP (the cell width ``D`` grows to keep within it), and most
#: nonzeros of its rows (estimated; ``D`` grows further to keep the LP a few seconds):
#: measured on p8 v4 m16 profiled, limit 2, 800 cells of 0.4 took 4.7 s, 400 cells 0.5 s for
#: the same bound (356.2), 1600 cells 45 s for 357.4.
MAX_CELLS, MAX_NONZEROS = 800, 400_000
#: A first pass runs with ``MAX_CELLS // COARSE`` cells (p32-loop-v4-m64-lim8-profiled: 200
#: cells give 1377.3 in 0.2 s, 800 cells 1401.1 in 4 s), so that a short budget still gains.
COARSE = 4
#: Devices whose tents the LP keeps: the largest tent areas, down to this share of the largest.
DEVICE_SHARE, MAX_DEVICES = 0.9, 2
#: The LP refutes a makespan only when it fits fewer than ``m - SLACK`` anchors (its
#: tolerances are far smaller; the count of anchors is an integer).
SLACK = 0.01


@dataclass(frozen=True)
class TentBound:
    """What :func:`tent_bound` proved: ``bound`` (ticks; at least the ``lower`` it was given),
    the ``devices`` whose tents it used, the cell width ``cell`` (ticks), whether the search
    over cells ended (``complete``) and its ``seconds``."""

    bound: int
    devices: tuple[int, ...]
    cell: int
    complete: bool
    seconds: float


def applies(inst: Instance) -> bool:
    """Whether the tent bound applies: a memory limit, no overlap cost, ``loop`` or ``v``
    placement (one direction, so one anchor chain)."""
    return (inst.memory_limit is not None and inst.overlap_forward_backward is None
            and inst.placement in ("loop", "v"))


def _tents(inst: Instance, g: nx.DiGraph) -> tuple[dict[int, list[tuple[float, int, int]]],
                                                   Action]:
    """Per device, the tent of microbatch 0: ``(amount, A, B)`` per buffer (memory units,
    ticks), and the anchor action."""
    S = inst.num_stages
    first, anchor = Action(Kind.F, 0, 0), Action(Kind.F, S - 1, 0)
    chains = microbatch_chains(g, 0, [first, anchor])
    to_anchor = chains[first][anchor]
    dur = nx.get_node_attributes(g, "duration")
    tents: dict[int, list[tuple[float, int, int]]] = {}
    for s in range(S):
        # the forwards form one chain: from F(s) to the anchor is the rest of it
        a = to_anchor - chains[first][Action(Kind.F, s, 0)]
        for rel, frac in release_actions(inst, s, 0):
            amount = inst.activation[s] * frac
            if amount > 0:
                b = chains[anchor][rel] + dur[rel]
                tents.setdefault(inst.device_of(s), []).append((amount, a, b))
    return tents, anchor


def _devices(tents: dict[int, list[tuple[float, int, int]]]) -> list[int]:
    area = {d: sum(x * (a + b) for x, a, b in t) for d, t in tents.items()}
    top = max(area.values())
    ranked = sorted((d for d in area if area[d] >= DEVICE_SHARE * top),
                    key=lambda d: (-area[d], d))
    return ranked[:MAX_DEVICES]


def _coefficients(tent: list[tuple[float, int, int]], cell: int) -> tuple[int, np.ndarray]:
    """Memory that an anchor anywhere in cell ``g`` surely holds at sample ``h`` (time
    ``lo + h * cell``), as a function of ``k = h - g``: ``(k_min, values)``.  A buffer
    ``(x, A, B)`` counts when ``cell - 1 - A <= k * cell < B``."""
    kmin = min(-((a - cell + 1) // cell) for _, a, _ in tent)  # ceil((cell - 1 - A) / cell)
    kmax = max(-(-b // cell) - 1 for _, _, b in tent)  # largest k with k * cell < B
    ks = np.arange(kmin, kmax + 1) * cell
    vals = np.zeros(len(ks))
    for x, a, b in tent:
        vals += x * ((ks >= cell - 1 - a) & (ks < b))
    return kmin, vals


def _cell_width(window: int, tents: list[list[tuple[float, int, int]]], max_cells: int
                ) -> int:
    """The cell width (ticks): at most ``max_cells`` cells over ``window`` ticks, and about
    :data:`MAX_NONZEROS` nonzeros (a row per sample, each with one entry per cell a tent
    spans)."""
    cell = max(1, math.ceil(window / max_cells))
    width = max(a + b for tent in tents for _, a, b in tent)
    while True:
        span = width / cell + 1
        if len(tents) * (window / cell + span) * span <= MAX_NONZEROS:
            return cell
        cell = math.ceil(cell * 1.25)


class _TentLP:
    """The LP of the module docstring over ``n_cells`` cells of ``cell`` ticks (sample ``h``
    at the start of cell ``h``; rows depend only on ``h - g``, :func:`_coefficients`)."""

    def __init__(self, tents: list[list[tuple[float, int, int]]], limit: float, cell: int,
                 n_cells: int, cap: float) -> None:
        self.lp = pywraplp.Solver.CreateSolver("GLOP")
        self.rho = [self.lp.NumVar(0.0, cap, "") for _ in range(n_cells)]
        self.cap = cap
        top = limit * (1 + 1e-9) + 1e-6  # the validator's tolerance is 1e-6
        for tent in tents:
            kmin, vals = _coefficients(tent, cell)
            nz = [(k, v) for k, v in enumerate(vals) if v > 0]
            for h in range(kmin, n_cells + kmin + len(vals)):
                ct = self.lp.Constraint(-self.lp.infinity(), top)
                for j, v in nz:
                    g = h - kmin - j
                    if 0 <= g < n_cells:
                        ct.SetCoefficient(self.rho[g], float(v))
        obj = self.lp.Objective()
        for x in self.rho:
            obj.SetCoefficient(x, 1.0)
        obj.SetMaximization()

    def fits(self, n: int, wall: float | None) -> float | None:
        """Most anchors in the first ``n`` cells (None: the LP did not finish)."""
        for g, x in enumerate(self.rho):
            x.SetUb(self.cap if g < n else 0.0)
        if wall is not None:
            self.lp.SetTimeLimit(max(1, int(wall * 1000)))
        if self.lp.Solve() != pywraplp.Solver.OPTIMAL:
            return None
        return self.lp.Objective().Value()


def tent_bound(inst: Instance, g: nx.DiGraph, ht: HeadsTails, lower: int, upper: int, *,
               time_limit: float | None = None, max_cells: int = MAX_CELLS,
               stopped: Callable[[], bool] = lambda: False) -> TentBound:
    """The tent bound (module docstring) between ``lower`` (a proven bound) and ``upper`` (a
    known makespan), ticks.

    Args:
        g, ht: the task graph (:func:`cpsched.graph.build_task_graph`) and its heads and tails.
        time_limit: wall seconds for the whole search (None: no limit); the bound proven when
            it runs out is kept.
        max_cells: most anchor cells (finer cells: a stronger, slower LP).
        stopped: whether a stop was asked for (no further LP starts).

    Returns:
        :class:`TentBound`; ``bound == lower`` when the bound does not apply
        (:func:`applies`) or gains nothing.
    """
    t0 = time.perf_counter()
    end = None if time_limit is None else t0 + time_limit
    if not applies(inst) or lower >= upper:
        return TentBound(lower, (), 0, True, 0.0)
    tents, anchor = _tents(inst, g)
    devices = _devices(tents)
    bound, cell, complete = lower, 0, True
    # coarse cells first (fast: a bound early when time is short), then the fine ones from it
    for cells in dict.fromkeys((max(1, max_cells // COARSE), max_cells)):
        if bound >= upper:
            break
        bound, cell, complete = _bisect(inst, g, ht, [tents[d] for d in devices], anchor,
                                        bound, upper, cells, end, stopped)
        if not complete:
            break
    return TentBound(bound, tuple(devices), cell, complete, time.perf_counter() - t0)


def _bisect(inst: Instance, g: nx.DiGraph, ht: HeadsTails,
            tents: list[list[tuple[float, int, int]]], anchor: Action, lower: int, upper: int,
            max_cells: int, end: float | None, stopped: Callable[[], bool]
            ) -> tuple[int, int, bool]:
    """One LP over at most ``max_cells`` cells, bisected from ``lower`` (module docstring):
    the bound (ticks), the cell width and whether the bisection ended."""
    head, tail = ht
    dur = g.nodes[anchor]["duration"]
    lo, hi = head[anchor], upper - dur - tail[anchor]  # anchors of a schedule <= upper
    cell = _cell_width(hi - lo + 1, tents, max_cells)
    n_cells = max(1, math.ceil((hi - lo + 1) / cell))
    assert inst.memory_limit is not None
    # anchors run one at a time (a zero-length one takes no time: any number per cell)
    cap = float(inst.m) if dur == 0 else float(min(inst.m, (cell - 1) // dur + 1))
    lp = _TentLP(tents, float(inst.memory_limit), cell, n_cells, cap)

    def makespan(n: int) -> int:  # the least makespan whose anchors may use n cells
        return lo + (n - 1) * cell + dur + tail[anchor]

    # the LP over n_lo cells is refuted, over n_hi not (a known schedule's anchors lie in
    # all n_cells); the first question is the one whose refutation would beat ``lower``
    n_lo, n_hi, complete = 0, n_cells, True
    n = next((k for k in range(1, n_cells + 1) if makespan(k + 1) > lower), n_cells)
    first = True
    while n_hi - n_lo > 1:
        left = None if end is None else end - time.perf_counter()
        if stopped() or (left is not None and left <= 0.05):
            complete = False
            break
        if not first or not n_lo < n < n_hi:
            n = (n_lo + n_hi) // 2
        value = lp.fits(n, left)
        if value is None:
            complete = False
            break
        if value < inst.m - SLACK:
            n_lo = n
        elif first:  # not even the first step above ``lower`` is refuted
            break
        else:
            n_hi = n
        first = False
    return max(lower, min(upper, makespan(n_lo + 1))), cell, complete


__all__ = ["COARSE", "MAX_CELLS", "MAX_NONZEROS", "TentBound", "applies", "tent_bound"]
