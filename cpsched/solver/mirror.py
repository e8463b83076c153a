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
"""

from __future__ import annotations

from functools import partial

from cpsched.actions import Action
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
                          lb: int) -> PipelineModel:
    """The pair model of ``inst`` at ``horizon`` with makespan ``>= lb`` (ticks), its pairs
    DualPipe's family (and the hint's), mirror-symmetric (:func:`add_mirror_symmetry`),
    hinted with ``hint`` (e.g. DualPipe's own schedule, which keeps both).

    Raises:
        ValueError: the placement is not bidirectional or the instance has no overlap cost.
    """
    _check(inst)
    model = PipelineModel(inst, horizon, min(lb, horizon), pairs=hint.pairs,
                          pair_filter=partial(in_dualpipe_family, inst))
    add_mirror_symmetry(model)
    model.add_hint(hint)
    return model


__all__ = ["add_mirror_symmetry", "dualpipe_family_model", "in_dualpipe_family",
           "mirror_action"]
