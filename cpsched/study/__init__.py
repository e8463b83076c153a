"""Heuristic vs optimal: grids of instances, the comparison table, the memory–makespan front.

Library code only (the ``cpsched compare`` command calls these functions):

* :func:`load_grid` (:mod:`~cpsched.study.grid`) — a grid TOML (a base instance plus
  ``[grid]`` lists of values) → the product of instances;
* :func:`compare` (:mod:`~cpsched.study.comparison`) — every applicable known schedule of
  every instance next to two CP-SAT optima: without a memory limit, and at the schedule's own
  peak memory ("same memory"), plus one ``cpsat`` row per instance (the optimum under the
  instance's own limit).  Solves run as tasks on Dask distributed — a local cluster, or any
  cluster by its scheduler address (:mod:`~cpsched.study.dask_run`) — with a progress bar;
  Ctrl-C raises :class:`StudyInterrupted` with the finished rows;
* study directories (:mod:`~cpsched.study.directory`): each finished solve written as it
  arrives, reruns computing only what is missing; :func:`read_report` /
  :func:`write_report` (:mod:`~cpsched.study.report`) — the table of a study directory so
  far, and its files (docs/studies.md);
* :func:`write_results` / :func:`to_markdown` (:mod:`~cpsched.study.results`) — the table as
  CSV and Markdown;
* :func:`pareto_front` / :func:`pareto_fronts` / :func:`schedule_points`
  (:mod:`~cpsched.study.pareto`) — the optimal makespan as a function of the per-device
  memory limit (one instance in this process, or many as Dask tasks), and where the known
  schedules sit;
* :func:`with_memory_limit` / :func:`memory_quantum` (:mod:`~cpsched.study.memory`) — an
  instance at another memory limit, and the step at which held memory changes.
"""

from cpsched.study.comparison import COLUMNS, OPTIMUM, compare
from cpsched.study.comparison import StudyInterrupted as StudyInterrupted  # not in __all__
from cpsched.study.directory import SolverSettings, StudyDir
from cpsched.study.grid import load_grid
from cpsched.study.memory import memory_quantum, with_memory_limit
from cpsched.study.pareto import ParetoPoint, pareto_front, pareto_fronts, schedule_points
from cpsched.study.report import Report, read_report, write_report
from cpsched.study.results import to_markdown, write_results

__all__ = [
    "COLUMNS", "OPTIMUM", "ParetoPoint", "Report", "SolverSettings", "StudyDir", "compare",
    "load_grid", "memory_quantum", "pareto_front", "pareto_fronts", "read_report",
    "schedule_points", "to_markdown", "with_memory_limit", "write_report", "write_results",
]
