"""The one event engine: per-device orders to times, and list scheduling by named rules.

* :func:`run_orders` (:mod:`cpsched.engine.orders`) — **fixed orders**: the simulator
  (:func:`cpsched.simulate.simulate`) and the PyTorch dependency scan
  (:mod:`cpsched.torch_io`); :class:`Stuck` devices and the :func:`waiting_cycle` they wait in.
* :func:`dispatch` (:mod:`cpsched.engine.dispatcher`) — **list scheduling**, event-driven and
  non-delay, by named priority rules with tie-breakers (:func:`lexicographic`), optionally
  forming overlapped pairs (docs/modelling.md §25).

Sources: the pipeline-scheduling article (docs/references.md#pipeline-scheduling-article);
job-shop-lib's dispatcher and rules (#job-shop-lib); the visualizer's simulator (#ppviz).
"""

from cpsched.engine.dispatcher import (
    ADMIT,
    FINISH,
    NEVER,
    START,
    DispatchResult,
    Key,
    PairRule,
    PriorityRule,
    TaskTable,
    dispatch,
    lexicographic,
)
from cpsched.engine.orders import (
    OrderError,
    OrderRun,
    Stuck,
    paused_gc,
    run_orders,
    waiting_cycle,
)

__all__ = [
    "ADMIT", "FINISH", "NEVER", "START", "DispatchResult", "Key", "OrderError", "OrderRun",
    "PairRule", "PriorityRule", "Stuck", "TaskTable", "dispatch", "lexicographic", "paused_gc",
    "run_orders", "waiting_cycle",
]
