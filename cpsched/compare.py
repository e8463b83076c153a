"""The comparison study under its former name: re-exports :mod:`cpsched.study`."""

from cpsched.study import (
    COLUMNS,
    OPTIMUM,
    ParetoPoint,
    compare,
    load_grid,
    memory_quantum,
    pareto_front,
    schedule_points,
    to_markdown,
    with_memory_limit,
    write_results,
)

__all__ = [
    "COLUMNS", "OPTIMUM", "ParetoPoint", "compare", "load_grid", "memory_quantum",
    "pareto_front", "schedule_points", "to_markdown", "with_memory_limit", "write_results",
]
