"""Registry of known (hand-made) pipeline schedules.

Each schedule is a generator ``Instance -> DeviceOrders`` (per-rank action orders in PyTorch's
terms) plus a precondition check; :func:`run_schedule` times the orders with the one simulator
(:func:`cpsched.simulate.simulate`).  Modules in this package register themselves on import.
"""

from __future__ import annotations

import importlib
import pkgutil

from cpsched.schedules.registry import (
    REGISTRY,
    NotApplicable,
    ScheduleSpec,
    applicable_schedules,
    get_schedule,
    register,
    run_all,
    run_schedule,
)

# Importing the modules registers their schedules: every module of this package except the
# infrastructure below, the established ones first (their order is the table's order and
# breaks warm-start ties), then any new module by name — a new schedule is one new file.
_NOT_SCHEDULES = {"registry", "transforms"}
_FIRST = ("basic", "torch_family", "zero_bubble", "overlap", "dualpipe", "listsched")


def _discover() -> None:
    found = {m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")}
    names = [n for n in _FIRST if n in found]
    names += sorted(found - set(names) - _NOT_SCHEDULES)
    for name in names:
        importlib.import_module(f"{__name__}.{name}")


_discover()

__all__ = [
    "REGISTRY", "NotApplicable", "ScheduleSpec", "applicable_schedules", "get_schedule",
    "register", "run_all", "run_schedule",
]
