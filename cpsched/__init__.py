"""cpsched — provably optimal pipeline-parallel training schedules (OR-Tools CP-SAT), and every
well-known hand-made schedule measured against them.

The public API (imported lazily, so ``import cpsched`` stays fast)::

    from cpsched import load_instance, solve, run_all, run_schedule, validate

    inst = load_instance("instances/article-memory6.toml")
    res = solve(inst, time_limit=30)        # Result: status, makespan, lower_bound, schedule
    assert validate(res.schedule) == []

See docs/spec.md for the contract and docs/modelling.md for the model.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# ``validate`` and ``simulate`` are both a module and the function it defines: bind the
# functions now, or the first import of the module would shadow them as package attributes.
from cpsched.simulate import simulate
from cpsched.validate import validate

__version__ = "0.1.0"

#: public name -> module that defines it
_API = {
    "Instance": "cpsched.instance",
    "InstanceError": "cpsched.instance",
    "load_instance": "cpsched.instance",
    "Action": "cpsched.actions",
    "Kind": "cpsched.actions",
    "Overlap": "cpsched.actions",
    "TimedAction": "cpsched.actions",
    "Schedule": "cpsched.model",
    "ScheduleFileError": "cpsched.model",
    "Status": "cpsched.model",
    "OrderError": "cpsched.simulate",
    "run_all": "cpsched.schedules",
    "run_schedule": "cpsched.schedules",
    "applicable_schedules": "cpsched.schedules",
    "NotApplicable": "cpsched.schedules",
    "solve": "cpsched.solver",
    "Result": "cpsched.solver",
    "lower_bound": "cpsched.graph",
    "build_task_graph": "cpsched.graph",
}

__all__ = [
    "Action", "Instance", "InstanceError", "Kind", "NotApplicable", "OrderError", "Overlap",
    "Result", "Schedule", "ScheduleFileError", "Status", "TimedAction", "applicable_schedules",
    "build_task_graph", "load_instance", "lower_bound", "run_all", "run_schedule", "simulate",
    "solve", "validate",
]


def __getattr__(name: str) -> Any:
    if name in _API:
        value = getattr(importlib.import_module(_API[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'cpsched' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from cpsched.actions import Action, Kind, Overlap, TimedAction
    from cpsched.graph import build_task_graph, lower_bound
    from cpsched.instance import Instance, InstanceError, load_instance
    from cpsched.model import Schedule, ScheduleFileError, Status
    from cpsched.schedules import NotApplicable, applicable_schedules, run_all, run_schedule
    from cpsched.simulate import OrderError
    from cpsched.solver import Result, solve
