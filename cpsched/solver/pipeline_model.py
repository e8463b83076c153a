"""The CP-SAT model of one pipeline instance (docs/modelling.md): the general
:class:`~cpsched.solver.graph_model.GraphModel` of
:func:`~cpsched.graph.pipeline_resource_graph` with the pipeline's constraint families
(:data:`~cpsched.solver.constraints.PIPELINE_FAMILIES`) and, when the instance gives
``overlap_forward_backward``, the overlap timing (:class:`~cpsched.solver.overlap.OverlapTiming`)
instead of fixed intervals.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from ortools.sat.python import cp_model

from cpsched.actions import Action, Kind, TimedAction
from cpsched.graph import pipeline_resource_graph
from cpsched.instance import Instance
from cpsched.model import Schedule
from cpsched.solver.constraints import PIPELINE_FAMILIES, fifo_order
from cpsched.solver.graph_model import GraphModel
from cpsched.solver.overlap import OverlapTiming, Pair, PairSolution
from cpsched.solver.timing import FixedTiming


def timed_schedule(inst: Instance, device: Mapping[Action, int], dur: Mapping[Action, int],
                   starts: Mapping[Action, int], method: str) -> Schedule:
    """The schedule of ``{action: start tick}`` without overlapped pairs: each action on its
    ``device`` for its ``dur`` (ticks), times in the instance's units."""
    rows = [TimedAction(device[a], a.stage, a.microbatch, a.kind, inst.from_ticks(t),
                        inst.from_ticks(t + dur[a])) for a, t in starts.items()]
    return Schedule(inst, rows, method=method)


class PipelineModel:
    """CP-SAT model of ``inst`` at ``horizon`` with makespan ``>= lb`` (ticks).

    Args:
        pairs: overlapped pairs always kept as candidates (the warm start's).
        max_pairs: candidate pair limit (default :data:`cpsched.solver.overlap.MAX_PAIRS`).
        pair_filter: keep only the candidate pairs it accepts (and ``pairs``); the model is
            then ``restricted`` if it drops any.
        fifo: add FIFO symmetry breaking (tests switch it off to check it is valid).

    Attributes:
        graph_model: the :class:`GraphModel`; model / makespan / timing: its parts;
        overlap: whether pairs are modelled; restricted / candidate_pairs / pair_window /
        pair: the overlap timing's candidate pairs (empty without overlap).

    Raises:
        ValueError: the horizon is below the critical path.
    """

    def __init__(self, inst: Instance, horizon: int, lb: int, *,
                 pairs: Sequence[Pair] = (), max_pairs: int | None = None,
                 fifo: bool = True, pair_filter: Callable[[Pair], bool] | None = None) -> None:
        self.inst = inst
        self.overlap = inst.overlap_forward_backward is not None
        timing: Any = (partial(OverlapTiming, instance=inst, forced_pairs=pairs,
                               max_pairs=max_pairs, pair_filter=pair_filter)
                       if self.overlap else FixedTiming)
        families = PIPELINE_FAMILIES if fifo else tuple(
            f for f in PIPELINE_FAMILIES if f is not fifo_order)
        rg = pipeline_resource_graph(inst)
        self.graph_model = GraphModel(rg, horizon, lb, timing=timing, families=families,
                                      instance=inst)
        self.dur = {a: rg.duration(a) for a in rg.graph}
        self.device = {a: rg.resource(a) for a in rg.graph}

    @property
    def model(self) -> cp_model.CpModel:
        """The ``CpModel``."""
        return self.graph_model.model

    @property
    def makespan(self) -> cp_model.IntVar:
        """The makespan variable (ticks)."""
        return self.graph_model.makespan

    @property
    def timing(self) -> Any:
        """The time variables (:class:`FixedTiming` or :class:`OverlapTiming`)."""
        return self.graph_model.timing

    @property
    def restricted(self) -> bool:
        """True when only part of the candidate pairs is modelled (CP-SAT's bound is then
        not a bound over all schedules)."""
        return bool(getattr(self.timing, "restricted", False))

    @property
    def candidate_pairs(self) -> int:
        """Number of candidate F&B pairs before any restriction."""
        return int(getattr(self.timing, "candidate_pairs", 0))

    @property
    def pair_window(self) -> int | None:
        """Largest microbatch distance of a modelled pair when restricted."""
        return getattr(self.timing, "pair_window", None)

    @property
    def pair(self) -> dict[Pair, Any]:
        """Literal per modelled pair."""
        return getattr(self.timing, "pair", {})

    def add_hint(self, solution: Mapping[Action, int] | PairSolution) -> None:
        """A complete hint: ``{action: start}`` without overlap, a :class:`PairSolution`
        with it."""
        self.graph_model.add_hint(solution)

    def read(self, solver: cp_model.CpSolver) -> Mapping[Action, int] | PairSolution:
        """The solver's solution (starts, or a :class:`PairSolution` with overlap)."""
        return self.graph_model.read(solver)

    def to_schedule(self, solution: Mapping[Action, int] | PairSolution,
                    method: str) -> Schedule:
        """The schedule of a solution (:func:`solution_schedule`)."""
        return solution_schedule(self.inst, self.device, self.dur, solution, method)


def solution_schedule(inst: Instance, device: Mapping[Action, int], dur: Mapping[Action, int],
                      solution: Mapping[Action, int] | PairSolution, method: str) -> Schedule:
    """The schedule of a solution: starts (without overlap, :func:`timed_schedule`) or a
    :class:`PairSolution` (paired actions get a shared ``overlap`` id; a pair of a split
    instance runs a fused ``B``); each action on its ``device`` for its ``dur`` (ticks)."""
    if not isinstance(solution, PairSolution):
        return timed_schedule(inst, device, dur, solution, method)
    rows = []
    skip: set[Action] = set()
    for k, (f, b) in enumerate(solution.pairs):
        t0, t1 = inst.from_ticks(solution.start[f]), inst.from_ticks(solution.end[f])
        rows.append(TimedAction(device[f], f.stage, f.microbatch, Kind.F, t0, t1, k))
        kind = Kind.B if inst.split_backward else b.kind
        rows.append(TimedAction(device[b], b.stage, b.microbatch, kind, t0, t1, k))
        skip.update((f, b))
        if inst.split_backward:
            skip.add(Action(Kind.W, b.stage, b.microbatch))
    for a in dur:
        if a not in skip:
            rows.append(TimedAction(device[a], a.stage, a.microbatch, a.kind,
                                    inst.from_ticks(solution.start[a]),
                                    inst.from_ticks(solution.end[a])))
    return Schedule(inst, rows, method=method)
