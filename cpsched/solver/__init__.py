"""The CP-SAT solver, split by idea (docs/modelling.md):

* :mod:`~cpsched.solver.timing` / :mod:`~cpsched.solver.overlap` — the time variables: fixed
  intervals, or overlapped F&B pairs;
* :mod:`~cpsched.solver.constraints` — one function per constraint family;
* :mod:`~cpsched.solver.graph_model` — the general model of a resource graph and
  :func:`solve_graph`;
* :mod:`~cpsched.solver.pipeline_model` — the pipeline model (families + timing composed);
* :mod:`~cpsched.solver.warm_start`, :mod:`~cpsched.solver.progress`;
* :mod:`~cpsched.solver.facade` — :func:`solve` and its :class:`Result`.
"""

from cpsched.schedules.transforms import (
    fifo_relabel,
    sequential_schedule,
    serialise_overlaps,
    split_fused,
)
from cpsched.solver.facade import Result, solve
from cpsched.solver.graph_model import GraphModel, GraphResult, solve_graph
from cpsched.solver.overlap import MAX_PAIRS, OverlapTiming, PairSolution, pair_solution
from cpsched.solver.pipeline_model import PipelineModel
from cpsched.solver.progress import ProgressCallback
from cpsched.solver.timing import FixedTiming
from cpsched.solver.warm_start import best_warm_start

__all__ = [
    "MAX_PAIRS", "FixedTiming", "GraphModel", "GraphResult", "OverlapTiming", "PairSolution",
    "PipelineModel", "ProgressCallback", "Result", "best_warm_start", "fifo_relabel",
    "pair_solution", "sequential_schedule", "serialise_overlaps", "solve", "solve_graph",
    "split_fused",
]
