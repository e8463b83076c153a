"""The CP-SAT model of a :class:`~cpsched.core.ResourceGraph` (docs/modelling.md §13).

:class:`GraphModel` = a timing (:mod:`cpsched.solver.timing`: the time variables) + constraint
families (:mod:`cpsched.solver.constraints`, applied in order) + the makespan objective.  The
pipeline model (:mod:`cpsched.solver.pipeline_model`) is the same class with the pipeline's
families and, with an overlap cost, the overlap timing.  :func:`solve_graph` solves any
resource graph (e.g. the article's HLS example, :func:`cpsched.core.hls_example`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ortools.sat.python import cp_model

from cpsched.core import ResourceGraph, Task, check_starts, list_schedule
from cpsched.instance import Instance
from cpsched.model import Status
from cpsched.solver.constraints import CORE_FAMILIES, Family
from cpsched.solver.cpsat import solve_model
from cpsched.solver.timing import FixedTiming, Timing

#: ``timing(model, rg, horizon) -> Timing``: how task times are represented.
TimingFactory = Callable[[cp_model.CpModel, ResourceGraph, int], Timing]
#: ``value(starts, ends)`` of an auxiliary variable, for complete hints.
AuxValue = Callable[[Mapping[Task, int], Mapping[Task, int]], int]


class GraphModel:
    """CP-SAT model of ``rg`` at ``horizon`` (ticks): the timing's variables, each family's
    constraints, ``lower_bound <= makespan <= horizon`` minimised.

    Attributes:
        model: the ``CpModel``; timing: the time variables; makespan: its variable;
        instance: the pipeline instance when the graph is a pipeline's (families may use it);
        aux_hint: auxiliary variables and how to compute their value for a complete hint.

    Raises:
        ValueError: the horizon is below the critical path; a cycle in ``rg``.
    """

    def __init__(self, rg: ResourceGraph, horizon: int, lower_bound: int = 0, *,
                 timing: TimingFactory = FixedTiming,
                 families: Sequence[Family] = CORE_FAMILIES,
                 instance: Instance | None = None) -> None:
        rg.check()
        self.rg, self.horizon, self.instance = rg, horizon, instance
        self.model = cp_model.CpModel()
        self.aux_hint: list[tuple[cp_model.IntVar, AuxValue]] = []
        self.timing: Any = timing(self.model, rg, horizon)
        for family in families:
            family(self)
        self.makespan = self.model.new_int_var(min(lower_bound, horizon), horizon, "makespan")
        sinks = [t for t in rg.graph if rg.graph.out_degree(t) == 0]
        self.model.add_max_equality(self.makespan, [self.timing.end(t) for t in sinks])
        self.model.minimize(self.makespan)

    @property
    def start(self) -> dict[Task, cp_model.IntVar]:
        """Start variable per task."""
        return self.timing.start

    def end(self, t: Task) -> Any:
        """End of ``t`` (linear expression)."""
        return self.timing.end(t)

    def add_hint(self, solution: Any) -> None:
        """A complete hint: every time variable and literal (through the timing), every
        auxiliary variable, the makespan.  ``solution`` is what the timing reads
        (``{task: start}`` for :class:`FixedTiming`)."""
        ends = self.timing.hint(self.model, solution)
        starts = solution.start if hasattr(solution, "start") else solution
        for var, fn in self.aux_hint:
            self.model.add_hint(var, fn(starts, ends))
        self.model.add_hint(self.makespan, max(ends.values(), default=0))

    def read(self, solver: cp_model.CpSolver) -> Any:
        """The solver's solution in the timing's terms."""
        return self.timing.read(solver)


@dataclass
class GraphResult:
    """Outcome of :func:`solve_graph`: ``status``, ``starts`` (None without a schedule),
    ``makespan`` and a proven ``lower_bound`` (ticks)."""

    status: Status
    starts: dict[Task, int] | None
    makespan: int | None
    lower_bound: int


def solve_graph(rg: ResourceGraph, *, hint: Mapping[Task, int] | None = None,
                horizon: int | None = None, time_limit: float | None = 30.0,
                workers: int = 1, seed: int = 0) -> GraphResult:
    """Minimise the makespan of ``rg`` with CP-SAT.

    The horizon is the hint's makespan (default hint: :func:`~cpsched.core.list_schedule`; a
    hint that breaks a constraint is dropped) or, without one, the sum of all durations and
    lags.  OPTIMAL only when the makespan equals CP-SAT's proven bound.

    Raises:
        ValueError: a cycle in ``rg``.
    """
    lb = rg.lower_bound()
    if hint is None:
        try:
            hint = list_schedule(rg)
        except ValueError:
            hint = None
    if hint is not None and check_starts(rg, hint):
        hint = None
    if horizon is None:
        horizon = (max(hint[t] + rg.duration(t) for t in hint) if hint else
                   sum(rg.duration(t) for t in rg.graph)
                   + sum(d["lag"] for _, _, d in rg.graph.edges(data=True)))
    horizon = max(horizon, lb)
    m = GraphModel(rg, horizon, lb)
    if hint is not None:
        m.add_hint(hint)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = seed
    if time_limit is not None:
        solver.parameters.max_time_in_seconds = time_limit
    code = solve_model(solver, m.model)
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        ms = int(round(solver.objective_value))
        bound = max(lb, int(math.ceil(solver.best_objective_bound - 1e-9)))
        status = Status.OPTIMAL if bound >= ms else Status.FEASIBLE
        return GraphResult(status, m.read(solver), ms, min(bound, ms))
    if code == cp_model.INFEASIBLE:
        return GraphResult(Status.INFEASIBLE, None, None, lb)
    return GraphResult(Status.UNKNOWN, None, None, lb)
