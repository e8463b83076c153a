# ruff: noqa: I001  (schedule modules register themselves on import, after the registry)
"""Registry of known (hand-made) pipeline schedules.

Each schedule is a generator ``Instance -> DeviceOrders`` (per-rank action orders in PyTorch's
terms) plus a precondition check; :func:`run_schedule` times the orders with the one simulator
(:func:`cpsched.simulate.simulate`).  Modules in this package register themselves on import.
"""

from __future__ import annotations

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

# Importing the modules registers their schedules.
from cpsched.schedules import basic  # noqa: E402, F401, I001
from cpsched.schedules import torch_family  # noqa: E402, F401, I001
from cpsched.schedules import zero_bubble  # noqa: E402, F401, I001
from cpsched.schedules import overlap  # noqa: E402, F401, I001
from cpsched.schedules import dualpipe  # noqa: E402, F401, I001
from cpsched.schedules import listsched  # noqa: E402, F401, I001

__all__ = [
    "REGISTRY", "NotApplicable", "ScheduleSpec", "applicable_schedules", "get_schedule",
    "register", "run_all", "run_schedule",
]
