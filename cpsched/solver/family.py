"""DualPipe's family in ``solve`` (docs/modelling.md §40, §47, §48): where it runs, the
model hinted with DualPipe, its runs after the window search (:func:`family_candidate`) and,
on DualPipe's uniform shape at ``m = 2p``, the tight middle asked for a schedule within 1 % of
the bound before it (:func:`target_candidate`).  The models are
:mod:`cpsched.solver.mirror`'s; :func:`cpsched.solver.prelude.search_and_family` calls these.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ortools.sat.python import cp_model

from cpsched.instance import Instance
from cpsched.model import Schedule
from cpsched.schedules.registry import over_memory_limit, validated
from cpsched.schedules.transforms import pairs_within_limit
from cpsched.solver import lns
from cpsched.solver.cpsat import full_subsolvers, solve_model
from cpsched.solver.mirror import dualpipe_family_model, grid_cap, tight_middle_applies
from cpsched.solver.overlap import pair_solution
from cpsched.solver.pipeline_model import PipelineModel
from cpsched.solver.warm_start import best_warm_start
from cpsched.validate import validate

#: DualPipe's family (docs/modelling.md §40): the most actions it runs on, its share of the
#: time left, and its CP-SAT deterministic units without a time limit (reproducible).  It
#: found 6p - 0.5 on DualPipe's shape for p = 6-10 within 16 s and beat the defaults by one
#: unit at p = 8 with m = 32 and 64 (1536 actions); at p = 16 (1536) not within 300 s
FAMILY_MAX_ACTIONS, FAMILY_SHARE, FAMILY_DETERMINISTIC_TIME = 1536, 0.25, 10.0
#: DualPipe's uniform shape at m = 2p (docs/modelling.md §48): before the window search, the
#: tight middle asked for a makespan within TARGET_GAP of the bound gets this share of the
#: time left, with CP-SAT's full subsolvers (cpsched.solver.cpsat.full_subsolvers).  On
#: the p = 16 row: 95.5 (0.52 %) in 3-34 s over eight seeds since the outer devices' pairs
#: are contiguous (§49; before, 23-82 s in 20 of 25 runs, none in 82-101 s in five)
TARGET_GAP, TARGET_SHARE = 0.01, 0.7


#: The window search starts from DualPipe fitted to the memory limit
#: (:func:`cpsched.schedules.transforms.pairs_within_limit`) when that is at most this share
#: longer than the warm start: on four bidirectional instances with pairs a limit of ``p``
#: activations below DualPipe's ``p + 1``, the fitted DualPipe was 1.8-3.5 % longer than the
#: best known schedule that fits, and 60 s of window search from it ended 1.9-3.8 % shorter
#: than from that schedule (two runs each, docs/modelling.md §62)
FITTED_SLACK = 0.05


def fitted_start(inst: Instance, candidates: Mapping[str, Schedule], horizon: int
                 ) -> Schedule | None:
    """DualPipe fitted to the memory limit (docs/modelling.md §62) as the window search's
    start instead of the warm start of ``horizon`` ticks: with an overlap cost, a
    ``dualpipe`` candidate over the memory limit whose fitted orders are valid and at most
    :data:`FITTED_SLACK` longer than ``horizon``; else None."""
    dualpipe = candidates.get("dualpipe")
    if dualpipe is None or inst.overlap_forward_backward is None or not over_memory_limit(
            dualpipe, inst):
        return None
    fitted = pairs_within_limit(dualpipe)
    if fitted is None or inst.ticks(fitted.makespan) > (1 + FITTED_SLACK) * horizon:
        return None
    return None if validated(fitted, inst) else fitted  # kept for the warm start's check


def family_applies(inst: Instance, candidates: Mapping[str, Schedule], lb: int) -> bool:
    """Whether DualPipe's family (docs/modelling.md §40) runs on ``inst``: bidirectional
    placement with an overlap cost, at most :data:`FAMILY_MAX_ACTIONS` actions, and a
    ``dualpipe`` candidate that fits the memory limit and is longer than ``lb`` (ticks)."""
    dualpipe = candidates.get("dualpipe")
    return (dualpipe is not None and inst.n_actions <= FAMILY_MAX_ACTIONS
            and inst.overlap_forward_backward is not None and inst.placement == "bidirectional"
            and inst.ticks(dualpipe.makespan) > lb and not validated(dualpipe, inst))


def family_model(inst: Instance, hint: Schedule, lb: int, tight: bool = False) -> PipelineModel:
    """DualPipe's family model (:func:`cpsched.solver.mirror.dualpipe_family_model`, with
    ``tight`` its tight middle) hinted with ``hint`` (a valid schedule of the family, e.g.
    DualPipe's own) as the warm start turns it into the model's terms, its horizon that
    schedule's makespan, makespan at least ``lb`` (ticks)."""
    _, rows, horizon = best_warm_start(inst, {"hint": hint})
    return dualpipe_family_model(inst, pair_solution(inst, rows), horizon, lb, tight=tight)


def family_candidate(inst: Instance, dualpipe: Schedule, lb: int, seconds: float | None,
                     stop: Any, workers: int) -> tuple[Schedule | None, dict[str, Any]]:
    """The schedule of DualPipe's family (:func:`cpsched.solver.mirror.dualpipe_family_model`,
    docs/modelling.md §40) hinted with ``dualpipe`` (a valid DualPipe schedule), makespan at
    least ``lb`` (ticks).  Where :func:`cpsched.solver.mirror.tight_middle_applies`, first the
    family with its tight middle (§47) for half of the time, then the whole family hinted
    with the shorter of the two for the rest.  Each run: CP-SAT for its seconds with
    ``workers``, at most one per core (:func:`cpsched.solver.lns.window_workers`), or with
    ``workers`` for :data:`FAMILY_DETERMINISTIC_TIME` units when ``seconds`` is None.
    Returns the validated schedule if one shorter than ``dualpipe`` was found (else None) and
    ``Result.stats["dualpipe_family"]`` (makespan, seconds, and ``tight``: the tight
    middle's makespan, None where it found nothing or did not run).
    ``stop`` receives the solver (Ctrl-C)."""
    t = time.perf_counter()
    best, tight_found = dualpipe, None
    runs = (True, False) if tight_middle_applies(inst) else (False,)
    for i, tight in enumerate(runs):
        share = None if seconds is None else (seconds - (time.perf_counter() - t)) / (len(runs) - i)
        found = _family_run(inst, best, lb, share, stop, workers, tight)
        if tight:
            tight_found = None if found is None else found.makespan
        if found is not None and found.makespan < best.makespan:
            best = found
        if stop.requested or inst.ticks(best.makespan) <= lb:
            break
    found = None if best is dualpipe else best
    return found, {"makespan": None if found is None else found.makespan,
                   "seconds": round(time.perf_counter() - t, 2), "tight": tight_found}


def _family_run(inst: Instance, hint: Schedule, lb: int, seconds: float | None, stop: Any,
                workers: int, tight: bool) -> Schedule | None:
    """One CP-SAT run of :func:`family_model` (see :func:`family_candidate`): its validated
    schedule, or None."""
    solver = _family_solver(seconds, workers)
    model = family_model(inst, hint, lb, tight)
    stop.give(solver)
    return _family_schedule(model, solver, solve_model(solver, model.model))


def _family_solver(seconds: float | None, workers: int) -> cp_model.CpSolver:
    """The solver of a family run: with a deadline ``seconds`` and at most one worker per
    core, as a window's; without one :data:`FAMILY_DETERMINISTIC_TIME` units."""
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = workers if seconds is None else lns.window_workers(workers)
    if seconds is None:
        solver.parameters.max_deterministic_time = FAMILY_DETERMINISTIC_TIME
    else:
        solver.parameters.max_time_in_seconds = max(seconds, 0.01)
    return solver


def _family_schedule(model: PipelineModel, solver: cp_model.CpSolver,
                     code: int) -> Schedule | None:
    """The family model's schedule after ``code``, validated (None if none or invalid)."""
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    found = model.to_schedule(model.read(solver), "dualpipe-family")
    return None if validate(found) else found  # never hand on an invalid schedule


def target_applies(inst: Instance) -> bool:
    """Whether :func:`target_candidate` runs: where the tight middle applies
    (:func:`cpsched.solver.mirror.tight_middle_applies`) with every per-stage cost the same
    on every stage — the shape its rules come from (on profiled costs the tight middle is
    no better than the family, docs/modelling.md §47)."""
    costs = (inst.forward, inst.backward_input, inst.backward_weight, inst.backward,
             inst.overlap_forward_backward or ())
    return tight_middle_applies(inst) and all(len(set(c)) <= 1 for c in costs)


def target_candidate(inst: Instance, dualpipe: Schedule, lb: int, seconds: float | None,
                     stop: Any, workers: int) -> tuple[Schedule | None, dict[str, Any]]:
    """The family with its tight middle (:func:`family_model`) asked for a schedule within
    :data:`TARGET_GAP` of ``lb`` (ticks): makespan at most
    :func:`cpsched.solver.mirror.grid_cap`, no objective and no hint (a search for any
    schedule under the cap, docs/modelling.md §48), CP-SAT's full subsolvers
    (:func:`cpsched.solver.cpsat.full_subsolvers`) with two workers or more; for
    ``seconds`` (at most one worker per core) or :data:`FAMILY_DETERMINISTIC_TIME` units
    when None.  Returns the validated
    schedule (None if none was found) and ``Result.stats["target"]`` (the cap, the
    makespan or None, seconds).  ``stop`` receives the solver (Ctrl-C)."""
    t = time.perf_counter()
    solver = _family_solver(seconds, workers)
    full_subsolvers(solver.parameters)
    model = family_model(inst, dualpipe, lb, tight=True)
    cap = grid_cap(model, lb, TARGET_GAP)
    model.model.add(model.makespan <= cap)
    model.model.clear_hints()
    model.model.clear_objective()
    stop.give(solver)
    found = _family_schedule(model, solver, solve_model(solver, model.model))
    return found, {"cap": inst.from_ticks(cap),
                   "makespan": None if found is None else found.makespan,
                   "seconds": round(time.perf_counter() - t, 2)}


__all__ = ["FAMILY_DETERMINISTIC_TIME", "FAMILY_MAX_ACTIONS", "FAMILY_SHARE", "FITTED_SLACK",
           "TARGET_GAP", "TARGET_SHARE", "family_applies", "family_candidate", "fitted_start",
           "family_model", "target_applies", "target_candidate"]
