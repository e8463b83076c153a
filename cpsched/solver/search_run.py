"""The CP-SAT search within a deadline: its parameters, the time kept back for what follows
it, the run itself (in a child process ended at the deadline, :mod:`cpsched.solver.isolated`),
the stop handle Ctrl-C uses, and whether a search resumes after the relaxation bound
(docs/modelling.md §21).  Used by :func:`cpsched.solver.facade.solve`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from ortools.sat.python import cp_model

from cpsched.instance import Instance
from cpsched.solver import isolated
from cpsched.solver.cpsat import solve_model
from cpsched.solver.progress import Progress


class TrackedStop:
    """Passes the search's stop handle on to ``on_solver`` and remembers whether it was used
    (after a Ctrl-C no further bound is computed)."""

    def __init__(self, on_solver: Callable[[Any], None] | None) -> None:
        self.on_solver, self.handle, self.requested = on_solver, None, False
        self.announced = False

    def give(self, handle: Any) -> None:
        """The stop handle of what runs now (a window's solver, the search); ``on_solver``
        receives this object once."""
        self.handle = handle
        if self.on_solver is not None and not self.announced:
            self.announced = True
            self.on_solver(self)

    def stop_search(self) -> None:
        """Stop the search (the best solution so far is kept)."""
        self.requested = True
        if self.handle is not None:
            self.handle.stop_search()


#: seconds kept back from the time limit for reading the solution and validating it, plus
#: :data:`FINISH_SECONDS_PER_ACTION` per action (:func:`finish_seconds`)
RESERVE = 0.5
#: reading the search's solution, timing and validating it: 0.8 s for 24 576 actions (p = 32,
#: v = 4, m = 64, split backward) on a slow 2-core machine
FINISH_SECONDS_PER_ACTION = 4e-5


def finish_seconds(inst: Instance) -> float:
    """Seconds kept back, beyond :data:`RESERVE`, for what follows the search on ``inst``."""
    return FINISH_SECONDS_PER_ACTION * inst.n_actions


def seconds_left(inst: Instance, deadline: float) -> float:
    """Seconds a further search or bound on ``inst`` may use before ``deadline`` (a
    ``time.perf_counter()`` value), after what is kept back (:data:`RESERVE` and
    :func:`finish_seconds`)."""
    return deadline - time.perf_counter() - RESERVE - finish_seconds(inst)


def sat_parameters(deadline: float | None, workers: int, seed: int,
                   parameters: Mapping[str, Any] | None) -> Any:
    """``SatParameters`` for the search (``max_time_in_seconds`` from the deadline).

    Raises:
        ValueError: an unknown parameter name.
    """
    prm = cp_model.CpSolver().parameters
    prm.num_workers = max(1, int(workers))
    prm.random_seed = int(seed)
    if deadline is not None:
        prm.max_time_in_seconds = max(0.0, deadline - time.perf_counter() - RESERVE)
    for key, value in (parameters or {}).items():
        if not hasattr(prm, key):
            raise ValueError(f"CP-SAT parameter {key!r}: unknown (see sat_parameters.proto)")
        setattr(prm, key, value)
    return prm


def run_search(model: cp_model.CpModel, params: Any, deadline: float | None,
               cb: Progress, on_solver: Callable[[Any], None] | None) -> isolated.Outcome:
    """The search: in this process without a deadline (deterministic runs, tests); with one,
    in a child process killed at the deadline (:mod:`cpsched.solver.isolated`).  ``on_solver``
    receives an object whose ``stop_search()`` ends the search (Ctrl-C)."""
    if deadline is not None:
        stop = isolated.StopHandle()
        if on_solver is not None:
            on_solver(stop)
        return isolated.search(model, params, deadline - RESERVE, on_solution=cb.solution,
                               on_bound=cb.on_bound, stop=stop)
    solver = cp_model.CpSolver()
    solver.parameters.copy_from(params)
    solver.best_bound_callback = cb.on_bound
    if on_solver is not None:
        on_solver(solver)
    code = solve_model(solver, model, cb)
    resp = solver.response_proto
    found = code in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    return isolated.Outcome(
        code, solver.status_name(code), list(resp.solution) if found else None,
        resp.objective_value if found else None, resp.best_objective_bound,
        {"conflicts": resp.num_conflicts, "branches": resp.num_branches,
         "wall_time": resp.wall_time})


#: the search resumes after the relaxation when at least this many seconds are left (the
#: relaxation ended before its share of the time)
RESUME_MIN_SECONDS = 2.0


#: CP-SAT parameters that end a search early on purpose: a user who sets one gets one search
_USER_STOPS = ("max_", "stop_after", "relative_gap_limit", "absolute_gap_limit")


def time_to_resume(inst: Instance, deadline: float | None, open_gap: bool,
                   parameters: Mapping[str, Any] | None = None) -> bool:
    """Whether the search runs again after the relaxation (§21): only with a deadline (a
    run without one stays reproducible), a gap still open, at least
    :data:`RESUME_MIN_SECONDS` left and no parameter of the user's that ends the search
    early (``max_deterministic_time``, a gap limit, ...: a second search would double it).
    The same model runs again with the best solution as its complete hint; nothing is
    rebuilt."""
    if deadline is None or not open_gap:
        return False
    if any(key.startswith(_USER_STOPS) for key in parameters or {}):
        return False
    return seconds_left(inst, deadline) >= RESUME_MIN_SECONDS


__all__ = ["FINISH_SECONDS_PER_ACTION", "RESERVE", "RESUME_MIN_SECONDS", "TrackedStop",
           "finish_seconds", "run_search", "sat_parameters", "seconds_left", "time_to_resume"]
