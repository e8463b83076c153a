"""The tent bound: a memory-only relaxation that places every microbatch by its turn
(docs/modelling.md §24).

Every microbatch passes its last stage ``S - 1`` once; call the start of its ``F(S - 1)`` its
*anchor*.  A buffer of stage ``s`` (docs/spec.md §1: held from the start of ``F(s)`` to the end
of the action releasing it) is then held at least over ``[anchor - A_s, anchor + B_s)``, where
``A_s`` is the longest chain from the start of ``F(s)`` to the anchor and ``B_s`` the longest
chain from the anchor to the release's end (a microbatch's dependencies form one chain, the
same for all microbatches of a direction).  So each microbatch puts a fixed *tent* of memory
on each device around its anchor, whatever the schedule, and a direction's anchors lie on one
device (``F(S - 1)`` runs there), in ``[head, C - duration - tail]`` of the anchor.

**Relaxation.** Forget every device's order and all other constraints; keep, for a few devices
(:func:`_devices`), "the tents sum to at most the limit" at sample times, and for the anchors a
density per cell of ``D`` ticks (at most ``(D - 1) // duration + 1`` anchors in a cell: they
run one at a time). An anchor anywhere in a cell holds at least the intersection of the tents
of the cell's first and last tick. For a candidate makespan ``C`` the LP (GLOP) maximises the
number of anchors; if it is below ``m`` no schedule has makespan ``C`` (every schedule gives a
feasible point with ``m`` anchors). The anchors that fit grow with ``C``, so a search over the
number of cells finds the smallest ``C`` the LP does not refute.

**Overlapped pairs** (docs/modelling.md §24.1): the chains, heads and tails are the
pair-relaxed ones (§4.3), which no pair can beat.  **Bidirectional placement**: each direction
is a family of its own (microbatches ``0`` and ``m // 2`` stand for their directions), with its
own anchors, caps and count, and a device's rows sum both families' tents.

Where memory sets the pace (far below interleaved 1F1B's memory) this sees what the area
bound (§11) cannot: near both ends of the schedule a microbatch's tent stands almost alone
(its buffers of the early stages are held long before and after the others), so the limit
cannot be filled there.  p32-loop-v4-m64-lim8-profiled: 1333.40 → 1409.6 with one-unit cells;
p24 m96 bidirectional F=1 B=2, pair 2.6, limit 12: 323.4 → 360.0.
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
from cpsched.graph import microbatch_chains, overlap_heads_tails
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
#: With two directions (``bidirectional``), devices spread along the pipeline (:func:`_devices`).
SPREAD_DEVICES = 9
#: The LP refutes a makespan only when it fits fewer than ``m - SLACK`` anchors (its
#: tolerances are far smaller; the count of anchors is an integer).
SLACK = 0.01
#: After the fine pass, grids of these multiples of its cell width, each from the bound so
#: far (a first question it does not refute costs one LP): an anchor holds the tents'
#: intersection over its cell, so where the cells' edges fall moves the bound by more than
#: a cell's width, not monotonically (p32-loop-v4-m64-lim8-profiled: 1397.8-1409.6 over
#: widths of 1.5-1.8 units; docs/modelling.md §43).  Only when the coarse and fine passes
#: lifted the bound: where they did not, no other grid did on the scale rows or on random
#: instances, and their LPs took 1.4-5.3 s a scale row (docs/modelling.md §45).
EXTRA_GRIDS = (0.9, 0.95, 1.05, 1.1)


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


#: One buffer of a tent: (memory units, ticks held before the anchor, ticks after it).
Buffer = tuple[float, int, int]


@dataclass(frozen=True)
class _Family:
    """The microbatches of one direction (all of them, but with ``bidirectional`` placement):
    ``count`` of them, their anchor's (pair-relaxed) duration ``dur`` and window
    ``[head, upper - dur - tail]`` (ticks), and the tent of each device (:func:`_tents`)."""

    count: int
    dur: int
    head: int
    tail: int
    tents: dict[int, list[Buffer]]


def applies(inst: Instance) -> bool:
    """Whether the tent bound applies: a memory limit (any placement: with ``bidirectional``
    each direction is a family of its own; with an overlap cost the chains are the
    pair-relaxed ones of docs/modelling.md §4.3)."""
    return inst.memory_limit is not None


def _tents(inst: Instance, g: nx.DiGraph, dur: dict[Action, int], first: int
           ) -> tuple[dict[int, list[Buffer]], Action]:
    """Per device, the tent of microbatch ``first`` (``dur``: the durations of its chains):
    ``(amount, A, B)`` per buffer (memory units, ticks), and the anchor action."""
    S = inst.num_stages
    source, anchor = Action(Kind.F, 0, first), Action(Kind.F, S - 1, first)
    chains = microbatch_chains(g, first, [source, anchor], dur)
    to_anchor = chains[source][anchor]
    tents: dict[int, list[Buffer]] = {}
    for s in range(S):
        # the forwards form one chain: from F(s) to the anchor is the rest of it
        a = to_anchor - chains[source][Action(Kind.F, s, first)]
        for rel, frac in release_actions(inst, s, first):
            amount = inst.activation[s] * frac
            if amount > 0:
                b = chains[anchor][rel] + dur[rel]
                tents.setdefault(inst.device_of(s, first), []).append((amount, a, b))
    return tents, anchor


def _families(inst: Instance, g: nx.DiGraph, ht: HeadsTails,
              relaxed: tuple[dict[Action, int], HeadsTails] | None) -> list[_Family]:
    """One family per direction: the first microbatch of each (``bidirectional``: ``0`` and
    ``m // 2``) stands for all of its direction (same chains, same devices).  ``ht``: the
    graph's heads and tails; with an overlap cost the pair-relaxed ones (``relaxed``, or
    computed when None) replace them."""
    if inst.overlap_forward_backward is None:
        dur = nx.get_node_attributes(g, "duration")
        head, tail = ht
    else:
        dur, (head, tail) = overlap_heads_tails(inst, g) if relaxed is None else relaxed
    firsts = [0, inst.m // 2] if inst.placement == "bidirectional" else [0]
    counts = [inst.m // 2, inst.m - inst.m // 2] if len(firsts) == 2 else [inst.m]
    out = []
    for first, count in zip(firsts, counts, strict=True):
        tents, anchor = _tents(inst, g, dur, first)
        out.append(_Family(count, dur[anchor], head[anchor], tail[anchor], tents))
    return out


def _devices(inst: Instance, families: list[_Family]) -> list[int]:
    """The devices whose tents the LP keeps.  One family: the largest tent areas (down to
    :data:`DEVICE_SHARE` of the largest, at most :data:`MAX_DEVICES`).  Two: the directions'
    tents add up to about the same area on every device, and it is their combination along
    the pipeline that binds, so :data:`SPREAD_DEVICES` devices evenly spread from the first
    to the last (p24 m96 fused, limit 12: one device at most 333.6, devices 0 and 1 323.4,
    nine spread 360.0, all 24 359.7 with wider cells)."""
    if len(families) > 1:
        n = min(inst.p, SPREAD_DEVICES)
        return sorted({round(k * (inst.p - 1) / max(1, n - 1)) for k in range(n)})
    area: dict[int, float] = {}
    for f in families:
        for d, t in f.tents.items():
            area[d] = area.get(d, 0.0) + f.count * sum(x * (a + b) for x, a, b in t)
    top = max(area.values())
    ranked = sorted((d for d in area if area[d] >= DEVICE_SHARE * top),
                    key=lambda d: (-area[d], d))
    return ranked[:MAX_DEVICES]


def _coefficients(tent: list[Buffer], cell: int) -> tuple[int, np.ndarray]:
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


def _cell_width(window: int, rows: list[list[list[Buffer]]], max_cells: int) -> int:
    """The cell width (ticks): at most ``max_cells`` cells over ``window`` ticks, and about
    :data:`MAX_NONZEROS` nonzeros (a row per sample and device, each with one entry per cell
    a tent spans; ``rows[device][family]``)."""
    cell = max(1, math.ceil(window / max_cells))
    widths = [sum(max((a + b for _, a, b in t), default=0) for t in dev) for dev in rows]
    while True:
        nz = sum((window / cell + w / cell + 1) * (w / cell + 1) for w in widths)
        if nz <= MAX_NONZEROS:
            return cell
        cell = math.ceil(cell * 1.25)


class _TentLP:
    """The LP of the module docstring over ``n_cells`` cells of ``cell`` ticks (sample ``h``
    at the start of cell ``h``; rows depend only on ``h - g``, :func:`_coefficients`): one
    variable per cell and family, ``rows[device][family]`` the tents, ``caps[family]`` the
    anchors a cell holds at most."""

    def __init__(self, rows: list[list[list[Buffer]]], counts: list[int], limit: float,
                 cell: int, n_cells: int, caps: list[float]) -> None:
        self.lp = pywraplp.Solver.CreateSolver("GLOP")
        self.caps = caps
        self.rho = [[self.lp.NumVar(0.0, cap, "") for _ in range(n_cells)] for cap in caps]
        top = limit * (1 + 1e-9) + 1e-6  # the validator's tolerance is 1e-6
        for dev in rows:
            coef = [_coefficients(t, cell) if t else None for t in dev]
            lo = min(c[0] for c in coef if c is not None)
            hi = max(c[0] + len(c[1]) for c in coef if c is not None)
            for h in range(lo, n_cells + hi):
                ct = self.lp.Constraint(-self.lp.infinity(), top)
                for f, c in enumerate(coef):
                    if c is None:
                        continue
                    kmin, vals = c
                    for g in range(max(0, h - kmin - len(vals) + 1), min(n_cells, h - kmin + 1)):
                        v = vals[h - kmin - g]
                        if v > 0:
                            ct.SetCoefficient(self.rho[f][g], float(v))
        if len(caps) > 1:  # each family has its own count (one family: the objective's)
            for f, count in enumerate(counts):
                ct = self.lp.Constraint(-self.lp.infinity(), float(count))
                for x in self.rho[f]:
                    ct.SetCoefficient(x, 1.0)
        obj = self.lp.Objective()
        for xs in self.rho:
            for x in xs:
                obj.SetCoefficient(x, 1.0)
        obj.SetMaximization()

    def fits(self, is_open: list[list[bool]], wall: float | None) -> float | None:
        """Most anchors in the open cells (``is_open[family][cell]``; None: the LP did not
        finish)."""
        for xs, cap, op in zip(self.rho, self.caps, is_open, strict=True):
            for x, o in zip(xs, op, strict=True):
                x.SetUb(cap if o else 0.0)
        if wall is not None:
            self.lp.SetTimeLimit(max(1, int(wall * 1000)))
        if self.lp.Solve() != pywraplp.Solver.OPTIMAL:
            return None
        return self.lp.Objective().Value()


def tent_bound(inst: Instance, g: nx.DiGraph, ht: HeadsTails, lower: int, upper: int, *,
               time_limit: float | None = None, max_cells: int = MAX_CELLS,
               stopped: Callable[[], bool] = lambda: False,
               relaxed: tuple[dict[Action, int], HeadsTails] | None = None) -> TentBound:
    """The tent bound (module docstring) between ``lower`` (a proven bound) and ``upper`` (a
    known makespan), ticks.

    Args:
        g, ht: the task graph (:func:`cpsched.graph.build_task_graph`) and its heads and
            tails (with an overlap cost the pair-relaxed ones are computed here instead).
        time_limit: wall seconds for the whole search (None: no limit); the bound proven when
            it runs out is kept.
        max_cells: most anchor cells (finer cells: a stronger, slower LP).
        stopped: whether a stop was asked for (no further LP starts).
        relaxed: with an overlap cost, the graph's
            :func:`cpsched.graph.overlap_heads_tails` when the caller has them.

    Returns:
        :class:`TentBound`; ``bound == lower`` when the bound does not apply
        (:func:`applies`) or gains nothing.
    """
    t0 = time.perf_counter()
    end = None if time_limit is None else t0 + time_limit
    if not applies(inst) or lower >= upper:
        return TentBound(lower, (), 0, True, 0.0)
    families = _families(inst, g, ht, relaxed)
    devices = _devices(inst, families)
    bound, cell, complete = lower, 0, True
    # coarse cells first (fast: a bound early when time is short), then the fine ones from it
    for cells in dict.fromkeys((max(1, max_cells // COARSE), max_cells)):
        if bound >= upper:
            break
        bound, cell, complete = _bisect(inst, families, devices, bound, upper, cells, end,
                                        stopped)
        if not complete:
            break
    fine = cell
    for width in dict.fromkeys(max(1, round(fine * f)) for f in EXTRA_GRIDS):
        if not complete or bound >= upper or width == fine or bound == lower:
            continue
        found, _, complete = _bisect(inst, families, devices, bound, upper, max_cells, end,
                                     stopped, width)
        if found > bound:
            bound, cell = found, width
    return TentBound(bound, tuple(devices), cell, complete, time.perf_counter() - t0)


def _bisect(inst: Instance, families: list[_Family], devices: list[int], lower: int,
            upper: int, max_cells: int, end: float | None, stopped: Callable[[], bool],
            width: int | None = None) -> tuple[int, int, bool]:
    """One LP over at most ``max_cells`` cells (or cells of ``width`` ticks), bisected from
    ``lower`` (module docstring): the bound (ticks), the cell width and whether the
    bisection ended."""
    # a family's anchors of a schedule <= upper start in [head, upper - dur - tail]
    lo = min(f.head for f in families)
    hi = max(upper - f.dur - f.tail for f in families)
    rows = [[f.tents.get(d, []) for f in families] for d in devices]
    cell = _cell_width(hi - lo + 1, rows, max_cells) if width is None else width
    n_cells = max(1, math.ceil((hi - lo + 1) / cell))
    assert inst.memory_limit is not None
    # anchors run one at a time (a zero-length one takes no time: any number per cell)
    caps = [float(f.count) if f.dur == 0 else float(min(f.count, (cell - 1) // f.dur + 1))
            for f in families]
    # the least makespan at which a family may use cell g (None: never, or not below upper)
    opens: list[list[int | None]] = []
    for f in families:
        row: list[int | None] = []
        for g in range(n_cells):
            c0 = lo + g * cell
            at = max(c0, f.head) + f.dur + f.tail
            row.append(at if c0 + cell - 1 >= f.head and at <= upper else None)
        opens.append(row)
    steps = sorted({x for row in opens for x in row if x is not None})
    lp = _TentLP(rows, [f.count for f in families], float(inst.memory_limit), cell, n_cells,
                 caps)

    def is_open(k: int) -> list[list[bool]]:  # the cells open at makespan steps[k - 1]
        top = steps[k - 1] if k > 0 else -1
        return [[x is not None and x <= top for x in row] for row in opens]

    def makespan(k: int) -> int:  # the least makespan that step k's cells do not cover
        return steps[k] if k < len(steps) else upper

    # step k_lo's LP is refuted, step k_hi's not (a known schedule's anchors are all open);
    # the first question is the one whose refutation would beat ``lower``
    k_lo, k_hi, complete = 0, len(steps), True
    k = next((j for j in range(1, len(steps) + 1) if makespan(j) > lower), len(steps))
    first = True
    while k_hi - k_lo > 1:
        left = None if end is None else end - time.perf_counter()
        if stopped() or (left is not None and left <= 0.05):
            complete = False
            break
        if not first or not k_lo < k < k_hi:
            k = (k_lo + k_hi) // 2
        value = lp.fits(is_open(k), left)
        if value is None:
            complete = False
            break
        if value < inst.m - SLACK:
            k_lo = k
        elif first:  # not even the first step above ``lower`` is refuted
            break
        else:
            k_hi = k
        first = False
    return max(lower, min(upper, makespan(k_lo))), cell, complete


__all__ = ["COARSE", "MAX_CELLS", "MAX_NONZEROS", "TentBound", "applies", "tent_bound"]
