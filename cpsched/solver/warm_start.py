"""The warm start: the best valid known schedule, in the model's terms (docs/modelling.md §6)."""

from __future__ import annotations

from collections.abc import Mapping

from cpsched.actions import TimedAction
from cpsched.instance import Instance
from cpsched.model import Schedule
from cpsched.schedules.registry import validated
from cpsched.schedules.transforms import (
    fifo_relabel,
    sequential_schedule,
    serialise_overlaps,
    split_fused,
)
from cpsched.validate import TOLERANCE


def best_warm_start(inst: Instance, candidates: Mapping[str, Schedule] | None = None
                    ) -> tuple[str, list[TimedAction], int]:
    """The best valid (memory-feasible) candidate as FIFO-ordered rows (fused ``B``
    outside overlapped pairs split, :func:`~cpsched.schedules.transforms.split_fused`).
    Without ``overlap_forward_backward`` the model has no pairs, and a candidate's pairs
    (each lasting ``F + B``) run back to back instead
    (:func:`~cpsched.schedules.transforms.serialise_overlaps`: same makespan, never more
    memory; worked out only for the candidates of the shortest makespans, in turn).  Ties go
    to the candidate with less peak memory.  A candidate whose peak memory
    is over the limit is passed over without a full validation: the validator's memory rule
    (the same :func:`cpsched.metrics.memory_events`) rejects it — at 24 576 actions each such
    validation costs 0.2–0.7 s.

    Args:
        candidates: ``{name: schedule}`` (default: every applicable registered schedule).

    Returns:
        ``(name, rows, makespan in ticks)``; falls back to the always-valid
        :func:`~cpsched.schedules.transforms.sequential_schedule`.
    """
    if candidates is None:
        from cpsched.schedules import run_all

        candidates = run_all(inst)
    pool = dict(candidates)
    if "sequential" not in pool and _sequential_needed(inst, pool):
        pool["sequential"] = sequential_schedule(inst)
    over = None if inst.memory_limit is None else inst.memory_limit + TOLERANCE + 1e-9
    # by makespan (running pairs back to back keeps it), then within the shortest makespan
    # not yet ruled out by memory and the earlier candidate: peak memory and running pairs
    # back to back are worked out only for the candidates that get that far
    by_makespan: dict[int, list[tuple[int, str, Schedule]]] = {}
    for k, (name, sch) in enumerate(pool.items()):
        by_makespan.setdefault(inst.ticks(sch.makespan), []).append((k, name, sch))
    for makespan in sorted(by_makespan):
        ranked = []
        for k, name, sch in by_makespan[makespan]:
            if inst.overlap_forward_backward is None:
                sch = serialise_overlaps(sch) or sch  # no pair variables: pairs back to back
            ranked.append(((inst.ticks(sch.makespan), max(sch.peak_memory), k), name, sch))
        for key, name, sch in sorted(ranked, key=lambda r: r[0]):
            if over is not None and key[1] > over:
                continue  # the validator would report the memory limit
            # validate in rank order: the first valid one wins (run_all's checks are reused)
            if not validated(sch, inst):
                return name, fifo_relabel(inst, split_fused(sch)), key[0]
    if "sequential" not in pool:  # every candidate ruled out: the fallback after all
        return best_warm_start(inst, {**pool, "sequential": sequential_schedule(inst)})
    # sequential is valid under any accepted limit
    raise RuntimeError("no valid warm start, not even the sequential schedule")  # pragma: no cover


def _sequential_needed(inst: Instance, pool: Mapping[str, Schedule]) -> bool:
    """Whether the sequential schedule could be chosen over a candidate of ``pool``: some
    candidate lasts at least :func:`sequential_floor`.  Below that the sequential schedule
    serves only as the fallback when no candidate is valid, and is not built (0.3 s at
    36 864 actions)."""
    floor = sequential_floor(inst)
    return any(inst.ticks(sch.makespan) >= floor for sch in pool.values())


def sequential_floor(inst: Instance) -> int:
    """A floor (ticks) under the makespan of
    :func:`~cpsched.schedules.transforms.sequential_schedule`: it starts each microbatch's
    first forward after the previous microbatch's backward of the first stage on the same
    device (on bidirectional placement, the previous microbatch of the same direction), so
    it lasts at least ``m`` (``m / 2``) times a microbatch's chain of forwards and
    backwards (``B``, or ``I`` when split)."""
    back = inst.backward_input if inst.split_backward else inst.backward
    chained = inst.m // 2 if inst.placement == "bidirectional" else inst.m
    return chained * (sum(inst.ticks(f) for f in inst.forward)
                      + sum(inst.ticks(b) for b in back))
