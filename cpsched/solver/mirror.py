"""Mirror symmetry and DualPipe's pair family under bidirectional placement
(docs/modelling.md §40).

Under bidirectional placement (docs/spec.md §1) microbatch ``i < m/2`` runs stage ``s`` on
device ``s`` and microbatch ``i + m/2`` runs it on device ``p - 1 - s``.  Costs and activation
memory are per stage, the latency and the memory limit the same everywhere, so the map
``(kind, s, i) -> (kind, s, i ± m/2)`` (device ``d`` to ``p - 1 - d``) takes every schedule to
one of the same makespan and memory: the instance's *mirror*.  DualPipe (DeepSeek-V3
technical report, arXiv:2412.19437; cpsched's ``dualpipe`` schedule) is mirror-symmetric, and
every overlapped pair of it joins an ``F`` of one direction's microbatch ``j`` (numbered within
its direction) with the backward of the other direction's ``j - p/2``: *DualPipe's family*.

:func:`dualpipe_family_model` keeps only mirror-symmetric schedules with pairs of that family.
It is a heuristic: its schedules are schedules of the instance (the validator checks them), its
bound holds over the family only (the model is ``restricted``).  Measured in §40
(``benchmarks/dualpipe_family.py``): on DualPipe's shape at ``m = 2p`` it finds ``6p - 0.5``
for ``p`` = 6-12, where ``solve``'s defaults of session 35 ended at ``6p`` or ``6p + 0.5``,
but nothing shorter than them at ``p = 16`` in 300 s.  ``solve`` runs it after the window
search (:func:`cpsched.solver.prelude.search_and_family`).

:func:`add_tight_middle` keeps the family, at ``m = 2p``, to the shape those ``6p - 0.5``
schedules share (DualPipe's warm-up on every device; the two middle devices' pairs and order),
with which CP-SAT finds them in seconds up to ``p = 12`` and 95.5 on the ``p = 16`` row
(docs/modelling.md §47); ``solve`` tries it first (:func:`cpsched.solver.family.family_candidate`)
and, on the uniform shape, asks it for a makespan within 1 % of the bound on the instance's
time grid (:func:`grid_cap`; :func:`cpsched.solver.family.target_candidate`, §48).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from functools import partial
from typing import Any

from cpsched.actions import Action, Kind
from cpsched.graph import overlap_heads_tails
from cpsched.instance import Instance
from cpsched.schedules.transforms import direction
from cpsched.solver.overlap import Pair, PairSolution
from cpsched.solver.pipeline_model import PipelineModel


def _check(inst: Instance) -> None:
    if inst.placement != "bidirectional":
        raise ValueError(f"pipeline.placement = {inst.placement!r}: the mirror needs "
                         "'bidirectional'")


def mirror_action(inst: Instance, a: Action) -> Action:
    """The mirror of action ``a`` (module docstring): the same kind and stage, the
    microbatch ``m/2`` further round (``i ± m/2``), on device ``p - 1 -`` ``a``'s device.

    Raises:
        ValueError: the placement is not bidirectional.
    """
    _check(inst)
    return _mirror(inst.m, a)


def _mirror(m: int, a: Action) -> Action:
    """:func:`mirror_action` for ``m`` microbatches, the placement already checked."""
    return Action(a.kind, a.stage, (a.microbatch + m // 2) % m)


def in_dualpipe_family(inst: Instance, pair: Pair) -> bool:
    """Whether the F&B ``pair`` ``(F, B or I)`` is one DualPipe forms: the two microbatches
    in opposite directions, the forward's ``p/2`` after the backward's within their
    directions (module docstring; ``p`` is even under bidirectional placement).

    Raises:
        ValueError: the placement is not bidirectional.
    """
    _check(inst)
    f, b = pair
    n = inst.m // 2
    return (direction(inst, f.microbatch) != direction(inst, b.microbatch)
            and f.microbatch % n - b.microbatch % n == inst.p // 2)


def add_mirror_symmetry(model: PipelineModel) -> int:
    """Constrain ``model`` (with an overlap cost) to mirror-symmetric schedules: every
    action starts with its mirror, every pair is chosen with its mirror (a pair whose mirror
    is no candidate is not chosen).  Returns the number of constraints added.

    Raises:
        ValueError: the placement is not bidirectional or the model has no pairs.
    """
    inst = model.inst
    _check(inst)
    if not model.overlap:
        raise ValueError("costs.overlap_forward_backward: the mirror model is the pair model's")
    timing, m, n = model.timing, model.model, inst.m // 2
    added = 0
    for a, v in timing.start.items():
        if a.microbatch < n:
            m.add(v == timing.start[_mirror(inst.m, a)])
            added += 1
    for (f, b), x in timing.pair.items():
        y = timing.pair.get((_mirror(inst.m, f), _mirror(inst.m, b)))
        if y is None or f.microbatch < n:  # each mirrored couple once
            m.add(x == 0 if y is None else x == y)
            added += 1
    return added


def dualpipe_family_model(inst: Instance, hint: PairSolution, horizon: int,
                          lb: int, *, tight: bool = False) -> PipelineModel:
    """The pair model of ``inst`` at ``horizon`` with makespan ``>= lb`` (ticks), its pairs
    DualPipe's family (and the hint's), mirror-symmetric (:func:`add_mirror_symmetry`),
    hinted with ``hint`` (e.g. DualPipe's own schedule, which keeps both).  With ``tight``
    also kept to :func:`add_tight_middle`'s shape (only where :func:`tight_middle_applies`).

    Raises:
        ValueError: the placement is not bidirectional or the instance has no overlap cost;
            ``tight`` where :func:`tight_middle_applies` is False.
    """
    _check(inst)
    model = PipelineModel(inst, horizon, min(lb, horizon), pairs=hint.pairs,
                          pair_filter=partial(in_dualpipe_family, inst))
    add_mirror_symmetry(model)
    if tight:
        add_tight_middle(model)
    model.add_hint(hint)
    return model


def tight_middle_applies(inst: Instance) -> bool:
    """Whether :func:`add_tight_middle` is defined for ``inst``: bidirectional placement with
    an overlap cost, ``m = 2p`` microbatches (``p`` in each direction) and ``p >= 6``."""
    return (inst.placement == "bidirectional" and inst.overlap_forward_backward is not None
            and inst.m == 2 * inst.p and inst.p >= 6)


class _Device:
    """Device ``d < p/2``'s actions by direction: ``a`` (microbatch ``j``, stage ``d``) and
    ``b`` (microbatch ``p + j``, stage ``p - 1 - d``), for ``m = 2p``."""

    def __init__(self, inst: Instance, d: int) -> None:
        self.p, self.d, self.bk = inst.p, d, Kind.I if inst.split_backward else Kind.B

    def a(self, kind: Kind, j: int) -> Action:
        return Action(kind, self.d, j)

    def b(self, kind: Kind, j: int) -> Action:
        return Action(kind, self.p - 1 - self.d, self.p + j)

    def a_pair(self, k: int) -> Pair:
        """Pair ``(a, k)``: ``a``'s forward ``p/2 + k`` with ``b``'s backward ``k``."""
        return self.a(Kind.F, self.p // 2 + k), self.b(self.bk, k)

    def b_pair(self, k: int) -> Pair:
        """Pair ``(b, k)``: ``b``'s forward ``p/2 + k`` with ``a``'s backward ``k``."""
        return self.b(Kind.F, self.p // 2 + k), self.a(self.bk, k)

    def warmup(self) -> list[Action]:
        """DualPipe's warm-up: ``p - 1 - 2d`` forwards of ``a``, then ``b``'s first, then
        ``d`` times one of ``a`` and one of ``b`` — the device's first ``p`` forwards."""
        p, d = self.p, self.d
        seq = [self.a(Kind.F, j) for j in range(p - 1 - 2 * d)] + [self.b(Kind.F, 0)]
        for j in range(d):
            seq += [self.a(Kind.F, p - 1 - 2 * d + j), self.b(Kind.F, j + 1)]
        return seq


def add_tight_middle(model: PipelineModel) -> int:
    """Keep a DualPipe-family model (:func:`dualpipe_family_model`, mirror-symmetric) of an
    instance where :func:`tight_middle_applies` to the shape of the ``6p - 0.5`` schedules
    CP-SAT found on DualPipe's uniform shape (F = I = W = 1, pair 2.5, ``m = 2p``) for ``p`` =
    6-16 (docs/modelling.md §47), with ``h = p/2`` and a device ``d < h`` (its mirror follows):

    * every device runs its first ``p`` forwards in DualPipe's warm-up order;
    * the middle device ``h - 1`` pairs ``F`` of ``a``'s ``h + k`` with ``b``'s backward
      ``k`` for every ``k < h``, and ``F`` of ``b``'s ``h + k`` with ``a``'s backward ``k``
      for ``k >= 1``, in the order warm-up, pair ``(h, 0)``, ``a``'s backward 0, ``b``'s
      forward ``h``, then the pairs alternating;
    * device ``h - 2`` pairs ``a``'s ``h + k`` for ``k >= 1`` and ``b``'s ``h + k`` for
      ``k <= h - 3``, in the order warm-up, ``b``'s backward 0, ``b``'s forward ``h - 1``,
      (its ``W``), then the pairs alternating;
    * a device ``d < h - 2`` pairs ``a``'s ``h + k`` exactly for ``k >= h - 1 - d`` and
      ``b``'s ``h + k`` for a contiguous range of at least ``d`` values of ``k``
      (:func:`_outer_b_pairs`; with it CP-SAT finds ``6p - 0.5`` at p = 16 in 3-34 s
      instead of 23-82 s or not in 100 s, docs/modelling.md §49);
    * the makespan is at least every device's first possible start, plus its busy time (the
      sum of its durations less what each chosen pair saves), plus its shortest tail — a
      bound every schedule meets, stated so that CP-SAT sees how many pairs a makespan needs.

    A heuristic: a restriction of the family (its bound holds over it only); on profiled
    costs it can be longer than the family (§47).  Returns the number of constraints added.

    Raises:
        ValueError: :func:`tight_middle_applies` is False for the model's instance.
    """
    inst = model.inst
    if not tight_middle_applies(inst):
        raise ValueError("the tight middle needs bidirectional placement, an overlap cost, "
                         "m = 2p and p >= 6")
    tm, m, h = model.timing, model.model, inst.p // 2
    added = 0

    def chain(seq: list[Action]) -> None:
        nonlocal added
        for x, y in zip(seq, seq[1:], strict=False):
            m.add(tm.endv[x] <= tm.start[y])
            added += 1

    def fix(dev: _Device, a_side: Callable[[int], bool | None],
            b_side: Callable[[int], bool | None]) -> None:
        nonlocal added
        for k in range(h):
            for pair, want in ((dev.a_pair(k), a_side(k)), (dev.b_pair(k), b_side(k))):
                x = tm.pair.get(pair)
                if want is not None and x is not None:
                    m.add(x == int(want))
                    added += 1

    for d in range(h):
        dev = _Device(inst, d)
        seq = dev.warmup()
        if d == h - 1:
            seq += [dev.a(Kind.F, h), dev.a(dev.bk, 0), dev.b(Kind.F, h)]
            for k in range(1, h):
                seq += [dev.a(Kind.F, h + k), dev.b(Kind.F, h + k)]
            fix(dev, lambda k: True, lambda k: k >= 1)
        elif d == h - 2:
            seq += [dev.b(dev.bk, 0), dev.b(Kind.F, h - 1)]
            seq += [dev.b(Kind.W, 0)] if inst.split_backward else []
            for k in range(h - 2):
                seq += [dev.a(Kind.F, h + 1 + k), dev.b(Kind.F, h + k)]
            seq += [dev.a(Kind.F, 2 * h - 1)]
            fix(dev, lambda k: k >= 1, lambda k: k <= h - 3)
        else:
            fix(dev, lambda k, d=d: k >= h - 1 - d, lambda k: None)
            added += _outer_b_pairs(model, dev, h)
        chain(seq)
    return added + add_busy_bound(model)


def _outer_b_pairs(model: PipelineModel, dev: _Device, h: int) -> int:
    """On device ``dev`` (``d < h - 2``) of :func:`add_tight_middle`: the pairs of ``b``'s
    forward ``h + k`` with ``a``'s backward ``k`` are chosen for a contiguous range of ``k``,
    at least ``d`` of them (none added when one of them is no candidate).  Returns the number
    of constraints added."""
    tm, m = model.timing, model.model
    lits = [tm.pair.get(dev.b_pair(k)) for k in range(h)]
    if any(x is None for x in lits):
        return 0
    starts = [m.new_bool_var(f"b_pairs_start_{dev.d}_{k}") for k in range(h)]
    for k, x in enumerate(lits):  # the range starts at k when k is chosen and k - 1 is not
        m.add(starts[k] >= x - (lits[k - 1] if k else 0))
    m.add(sum(starts) <= 1)
    m.add(sum(lits) >= dev.d)
    return h + 2


def add_busy_bound(model: PipelineModel) -> int:
    """``makespan >= head + busy + tail`` on every device of a pair model: ``head`` the
    earliest start of any of its actions, ``tail`` the shortest tail (docs/modelling.md §4.3's
    relaxed heads and tails), ``busy`` the sum of its durations less, for each chosen pair,
    what it saves: the forward and the full backward (``B``, or ``I + W``) less the pair's
    duration, as :func:`cpsched.graph.pair_savings` counts it.  Valid for every schedule.
    Returns the number of constraints added (one per device)."""
    inst, tm, graph = model.inst, model.timing, model.graph_model.rg.graph
    _, (head, tail) = overlap_heads_tails(inst, graph)
    work: dict[int, int] = defaultdict(int)
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for a in graph:
        d = model.device[a]
        work[d] += model.dur[a]
        first[d] = min(first.get(d, head[a]), head[a])
        last[d] = min(last.get(d, tail[a]), tail[a])
    saved: dict[int, list[Any]] = defaultdict(list)
    for (f, b), x in tm.pair.items():
        whole = model.dur[f] + inst.ticks(inst.backward[b.stage])
        saved[model.device[f]].append((whole - tm.pair_dur[(f, b)]) * x)
    for d in work:
        model.model.add(model.makespan >= first[d] + work[d] + last[d] - sum(saved[d]))
    return len(work)


def grid_cap(model: PipelineModel, lb: int, gap: float) -> int:
    """The longest makespan (ticks) on the model's grid whose gap to ``lb`` (ticks) is at most
    ``gap`` (``(makespan - lb) / makespan``, :func:`cpsched.model.gap`), and at least ``lb``.

    The grid's step is the gcd of every duration, pair duration and the latency (ticks): a
    shortest schedule can be taken left-shifted — every action starting at 0 or at the end of
    another, plus the latency, on the same device order (so the same memory) — so all its
    times are multiples of the step, and "makespan at most the cap" loses nothing against
    "at most ``lb / (1 - gap)``" while telling CP-SAT the grid (docs/modelling.md §48: on
    the p = 16 DualPipe row 95.5 was found at 55-84 s with the cap 95.5, at 101 s or never
    within 120 s with 95.9)."""
    latency = model.inst.ticks(model.inst.p2p_latency)
    step = math.gcd(*model.dur.values(), *getattr(model.timing, "pair_dur", {}).values(),
                    latency)
    top = math.floor(lb / (1 - gap))
    return max(lb, top - top % step) if step > 0 else max(lb, top)


__all__ = ["add_busy_bound", "add_mirror_symmetry", "add_tight_middle", "dualpipe_family_model",
           "grid_cap", "in_dualpipe_family", "mirror_action", "tight_middle_applies"]
