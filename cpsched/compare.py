"""The comparison study under its former name: re-exports :mod:`cpsched.study`."""

from cpsched.study import (
    COLUMNS,
    OPTIMUM,
    ParetoPoint,
    Report,
    SolverSettings,
    StudyDir,
    compare,
    load_grid,
    memory_quantum,
    pareto_front,
    pareto_fronts,
    read_report,
    schedule_points,
    to_markdown,
    with_memory_limit,
    write_report,
    write_results,
)

__all__ = [
    "COLUMNS", "OPTIMUM", "ParetoPoint", "Report", "SolverSettings", "StudyDir", "compare",
    "load_grid", "memory_quantum", "pareto_front", "pareto_fronts", "read_report",
    "schedule_points", "to_markdown", "with_memory_limit", "write_report", "write_results",
]
