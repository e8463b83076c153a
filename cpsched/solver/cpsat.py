"""CP-SAT's ``solve``, kept going through OR-Tools' own internal errors (docs/modelling.md §44).

OR-Tools 9.15's presolve can throw a C++ ``std::out_of_range`` (``absl::btree_map::at``) on a
model with a solution hint — the hint's value looked up in a variable's encoding after presolve
changed it (google/or-tools#5091, #5288).  Python sees an ``IndexError`` from
``CpSolver.solve``.  Measured on a window of the window search (417 actions, plateau, the
incumbent as the hint; instance 7 of ``make_scale_instances.py --random 40``): every seed
tried (1, 2, 3, 64), with one worker or two, raises with presolve on; with presolve off, or
without the hint, CP-SAT proves the same optimum at once.  Such a model is valid (ours are
built from a valid schedule), so one failed call must not end a whole ``cpsched solve``:
:func:`solve_model` runs it again with presolve off, and only if that fails too reports
``UNKNOWN`` (the caller then keeps what it had: a window changes nothing, a relaxation or the
full model proves nothing more).  Errors of our own (a ``ValueError`` for a model that is
invalid, ``KeyboardInterrupt``) are not caught.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from ortools.sat.python import cp_model

#: What ``CpSolver.solve`` raises when CP-SAT's C++ code throws (pybind11's translations of
#: ``std::out_of_range`` and of other ``std::exception``s).
INTERNAL_ERRORS: tuple[type[BaseException], ...] = (IndexError, RuntimeError)

#: CP-SAT's full subsolvers for a short run on two workers or more, and the interleaved
#: first-solution and local-search ones it then leaves out (docs/modelling.md §48: with the
#: default two-worker portfolio ``fj`` alone took about half of the time on the tight model,
#: and windows of the window search solve faster without them)
FULL_SUBSOLVERS = ("default_lp", "no_lp")
INTERLEAVED_SUBSOLVERS = ("fj", "feasibility_pump", "ls", "rins/rens")

#: How many calls since the process started needed the second try, and how many failed both
#: (for the benchmarks and the tests; nothing reads them to decide).
recovered = {"retried": 0, "failed": 0}


def solve_model(solver: cp_model.CpSolver, model: cp_model.CpModel,
                callback: Any = None) -> int:
    """``solver.solve(model[, callback])``; on an OR-Tools internal error
    (:data:`INTERNAL_ERRORS`) once more on the same solver with ``cp_model_presolve`` off.

    Args:
        solver: a configured ``CpSolver`` (its parameters stay as given but for presolve
            after a failure; read its values after this returns, as after ``solve``).
        model: the model.
        callback: a ``CpSolverSolutionCallback`` or None.

    Returns:
        CP-SAT's status code; ``cp_model.UNKNOWN`` when both calls raised (nothing found:
        the caller keeps what it had).  The solver then holds the response of an empty model
        (no solution, no time spent, objective bound 0), so that reading its times or its
        response, as callers do after any call, does not raise.
    """
    try:
        return solver.solve(model, callback)  # solve(model, None): no callback
    except INTERNAL_ERRORS:
        recovered["retried"] += 1
    solver.parameters.cp_model_presolve = False
    try:
        return solver.solve(model, callback)
    except INTERNAL_ERRORS:
        recovered["failed"] += 1
    with suppress(*INTERNAL_ERRORS):  # an empty model has nothing to presolve
        solver.solve(cp_model.CpModel())
    return cp_model.UNKNOWN


def full_subsolvers(parameters: Any) -> None:
    """Set CP-SAT's ``parameters`` (``SatParameters`` with ``num_workers`` set) to run
    :data:`FULL_SUBSOLVERS` as every worker and none of :data:`INTERLEAVED_SUBSOLVERS`; with
    one worker nothing changes (CP-SAT's single search, reproducible as before)."""
    if parameters.num_workers >= 2:
        parameters.num_full_subsolvers = parameters.num_workers
        parameters.subsolvers.extend(FULL_SUBSOLVERS)
        parameters.ignore_subsolvers.extend(INTERLEAVED_SUBSOLVERS)


__all__ = ["FULL_SUBSOLVERS", "INTERLEAVED_SUBSOLVERS", "INTERNAL_ERRORS", "full_subsolvers",
           "recovered", "solve_model"]
