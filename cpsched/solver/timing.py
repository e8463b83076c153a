"""Start/end variables of a CP-SAT model: how each task's time is represented.

A *timing* owns the time variables of every task and tells the constraint families
(:mod:`cpsched.solver.constraints`) what they need: ``start[t]``, ``end(t)``, the intervals
to put on each resource, and the hint/read of a solution.  Two exist:

* :class:`FixedTiming` — one fixed-size interval per task in its ASAP/ALAP window
  (docs/modelling.md §7);
* :class:`cpsched.solver.overlap.OverlapTiming` — DualPipe-style overlapped F&B pairs
  (docs/modelling.md §15): optional intervals per action and per candidate pair.

The model picks one by composition (no ``if overlap`` branches in the families).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Mapping
from typing import Any, Protocol

from ortools.sat.python import cp_model

from cpsched.core import ResourceGraph, Task
from cpsched.graph import windows


class Timing(Protocol):
    """What constraint families may use of a model's time variables."""

    start: dict[Task, cp_model.IntVar]
    #: True when some ``W`` may run inside an overlapped pair (its end is then not FIFO).
    pairs_possible: bool

    def end(self, t: Task) -> Any:
        """End of task ``t`` (a linear expression, ticks)."""

    def resource_intervals(self) -> dict[Hashable, list[cp_model.IntervalVar]]:
        """The intervals that occupy each resource (zero-length tasks left out)."""

    def fifo_guard(self, a: Task, b: Task) -> list[Any]:
        """Literals under which ``b`` must start after ``a`` ends in FIFO order ([] =
        always)."""


class FixedTiming:
    """One fixed-size interval per task, its start in the ASAP/ALAP window of ``rg`` against
    ``horizon`` (ticks).

    Raises:
        ValueError: the horizon is below the critical path.
    """

    pairs_possible = False

    def __init__(self, model: cp_model.CpModel, rg: ResourceGraph, horizon: int) -> None:
        self.rg = rg
        self.start: dict[Task, cp_model.IntVar] = {}
        self.interval: dict[Task, cp_model.IntervalVar] = {}
        self.duration = {t: rg.duration(t) for t in rg.graph}
        for t, (lo, hi) in windows(rg.graph, horizon).items():
            if hi < lo:
                raise ValueError(f"horizon {horizon} is below the critical path")
            s = model.new_int_var(lo, hi, f"s_{t}")
            self.start[t] = s
            self.interval[t] = model.new_fixed_size_interval_var(s, self.duration[t], f"i_{t}")

    def end(self, t: Task) -> Any:
        """``start + duration`` of ``t``."""
        return self.start[t] + self.duration[t]

    def resource_intervals(self) -> dict[Hashable, list[cp_model.IntervalVar]]:
        """Intervals of positive duration per resource."""
        out: dict[Hashable, list[cp_model.IntervalVar]] = defaultdict(list)
        for t in self.rg.graph:
            r = self.rg.resource(t)
            if r is not None and self.duration[t] > 0:
                out[r].append(self.interval[t])
        return out

    def fifo_guard(self, a: Task, b: Task) -> list[Any]:
        """Always enforced."""
        return []

    def hint(self, model: cp_model.CpModel, starts: Mapping[Task, int]) -> dict[Task, int]:
        """Hint every start; returns the ends (start + duration)."""
        for t, var in self.start.items():
            model.add_hint(var, starts[t])
        return {t: starts[t] + self.duration[t] for t in self.start}

    def read(self, solver: cp_model.CpSolver) -> dict[Task, int]:
        """``{task: start}`` of the solver's solution."""
        return {t: solver.value(v) for t, v in self.start.items()}
