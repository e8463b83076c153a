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


__all__ = ["INTERNAL_ERRORS", "recovered", "solve_model"]
