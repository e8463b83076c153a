"""Progress of a CP-SAT search: incumbent and bound as they improve, in instance units."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from ortools.sat.python import cp_model

from cpsched.instance import Instance

#: ``on_progress(elapsed_seconds, incumbent, bound)`` in the instance's time units.
ProgressCallback = Callable[[float, float | None, float | None], None]


class Progress(cp_model.CpSolverSolutionCallback):
    """Solution callback that tracks the incumbent and the best proven bound (ticks) and
    reports both to ``on_progress``.

    ``trust_bound=False`` ignores CP-SAT's bound (the model was restricted, so its bound is
    not a bound over all schedules); ``bound0`` is a bound proven before the search.
    """

    def __init__(self, inst: Instance, t0: float, on_progress: ProgressCallback | None,
                 bound0: int, trust_bound: bool = True) -> None:
        super().__init__()
        self.inst, self.t0, self.cb = inst, t0, on_progress
        self.bound = bound0
        self.trust_bound = trust_bound
        self.incumbent: int | None = None
        self.solutions = 0

    def on_solution_callback(self) -> None:
        """A new incumbent (called by CP-SAT in this process)."""
        self.solution(self.objective_value, self.best_objective_bound)

    def solution(self, objective: float, bound: float) -> None:
        """A new incumbent with CP-SAT's bound at that moment (ticks)."""
        self.solutions += 1
        self.incumbent = int(round(objective))
        if self.trust_bound:
            self.bound = max(self.bound, int(math.ceil(bound - 1e-9)))
        self.report()

    def improved(self, makespan: int) -> None:
        """A shorter schedule found outside CP-SAT's search (ticks; the window search)."""
        self.incumbent = makespan
        self.report()

    def on_bound(self, bound: float) -> None:
        """A better bound (``CpSolver.best_bound_callback``)."""
        if self.trust_bound:
            self.bound = max(self.bound, int(math.ceil(bound - 1e-9)))
        self.report()

    def report(self) -> None:
        """Call ``on_progress`` with (elapsed s, incumbent, bound) in instance units."""
        if self.cb is not None:
            inc = None if self.incumbent is None else self.inst.from_ticks(self.incumbent)
            self.cb(time.perf_counter() - self.t0, inc, self.inst.from_ticks(self.bound))
