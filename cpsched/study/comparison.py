"""The comparison study: every applicable known schedule of every instance next to two CP-SAT
optima — without a memory limit, and at the schedule's own peak memory ("same memory") — plus
one ``cpsat`` row per instance (the optimum under the instance's own limit).

Invariant: an optimum is never worse than a valid schedule it is compared with.  The "same
memory" solve is warm-started from every applicable schedule at that limit, the schedule in
question included (an overlapped F&B pair of an instance without ``overlap_forward_backward``
is first serialised into its backward then its forward — same end, memory never higher — so
that it is a hint the CP-SAT model accepts), and :func:`cpsched.solver.solve` never returns
something worse than its warm start.  The unlimited optimum is at most the same-memory one.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from cpsched.instance import Instance
from cpsched.model import Schedule
from cpsched.schedules import run_all
from cpsched.study.grid import fmt_value
from cpsched.study.memory import limit_key
from cpsched.study.parallel import LimitSolve, SolvesInterrupted, solve_limits
from cpsched.validate import validate

#: Columns of :func:`compare`'s table, in order.
COLUMNS = [
    "instance", "p", "v", "m", "placement", "split_backward", "forward", "backward",
    "backward_input", "backward_weight", "p2p_latency", "memory_limit",
    "schedule", "makespan", "bubble_fraction", "peak_memory", "peak_memory_per_device",
    "valid", "violation",
    "opt_makespan_unlimited", "improvement_unlimited_pct", "status_unlimited",
    "lower_bound_unlimited",
    "opt_makespan_same_memory", "improvement_same_memory_pct",
    "status", "gap", "lower_bound", "solve_seconds", "warm_start",
]

#: Name of the optimum's rows (schedule column), as :func:`cpsched.plots.bubble_bars` expects.
OPTIMUM = "cpsat"


class StudyInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`compare`.

    Attributes:
        table: the rows of every instance whose solves had all finished (columns
            :data:`COLUMNS`), for the caller to keep.
        finished: how many instances that is.
        total: how many instances the study had.
    """

    def __init__(self, table: pd.DataFrame, finished: int, total: int) -> None:
        super().__init__(f"interrupted after {finished} of {total} instances")
        self.table, self.finished, self.total = table, finished, total


def _fmt_peaks(peaks: Sequence[float]) -> str:
    return " ".join(fmt_value(round(float(x), 6)) for x in peaks)


def _mean(x: Sequence[float]) -> float:
    return sum(x) / len(x) if x else math.nan


def _improvement(schedule_ms: float, opt: float | None) -> float:
    if opt is None or not schedule_ms:
        return math.nan
    return 100.0 * (schedule_ms - opt) / schedule_ms


def _instance_columns(inst: Instance, unlimited: LimitSolve) -> dict[str, Any]:
    """The columns every row of ``inst`` shares: its shape, mean costs, limit, and the
    optimum without a memory limit."""
    split = inst.split_backward
    return {
        "instance": inst.name, "p": inst.p, "v": inst.v, "m": inst.m,
        "placement": inst.placement, "split_backward": split,
        "forward": _mean(inst.forward), "backward": _mean(inst.backward),
        "backward_input": _mean(inst.backward_input) if split else math.nan,
        "backward_weight": _mean(inst.backward_weight) if split else math.nan,
        "p2p_latency": inst.p2p_latency,
        "memory_limit": math.nan if inst.memory_limit is None else inst.memory_limit,
        "opt_makespan_unlimited": unlimited.makespan,
        "status_unlimited": unlimited.status, "lower_bound_unlimited": unlimited.lower_bound,
    }


def _schedule_row(name: str, sch: Schedule, unlimited: LimitSolve,
                  same: LimitSolve) -> dict[str, Any]:
    """The columns of one known schedule's row (``same``: the solve at its peak memory)."""
    viol = validate(sch)
    return {
        "schedule": name, "makespan": sch.makespan,
        "bubble_fraction": sch.bubble_fraction, "peak_memory": max(sch.peak_memory),
        "peak_memory_per_device": _fmt_peaks(sch.peak_memory),
        "valid": not viol, "violation": viol[0] if viol else "",
        "improvement_unlimited_pct": _improvement(sch.makespan, unlimited.makespan),
        "opt_makespan_same_memory": same.makespan,
        "improvement_same_memory_pct": _improvement(sch.makespan, same.makespan),
        "status": same.status, "gap": same.gap, "lower_bound": same.lower_bound,
        "solve_seconds": same.solve_seconds, "warm_start": same.warm_start,
    }


def _optimum_row(own: LimitSolve) -> dict[str, Any]:
    """The columns of the ``cpsat`` row: the optimum under the instance's own limit."""
    peaks = own.peak_memory or []
    return {
        "schedule": OPTIMUM, "makespan": own.makespan,
        "bubble_fraction": own.bubble_fraction,
        "peak_memory": max(peaks) if peaks else math.nan,
        "peak_memory_per_device": _fmt_peaks(peaks),
        "valid": own.status in ("OPTIMAL", "FEASIBLE"),
        "violation": own.message if own.status == "ERROR" else "",
        "improvement_unlimited_pct": math.nan,
        "opt_makespan_same_memory": math.nan, "improvement_same_memory_pct": math.nan,
        "status": own.status, "gap": own.gap, "lower_bound": own.lower_bound,
        "solve_seconds": own.solve_seconds, "warm_start": own.warm_start,
    }


def _rows(inst: Instance, known: Mapping[str, Schedule],
          solved: Mapping[float | None, LimitSolve], stacklevel: int = 3
          ) -> list[dict[str, Any]]:
    """The rows of one instance: its known schedules in order, then the ``cpsat`` row (a
    crashed solve is warned about at ``stacklevel``: the caller of :func:`compare`)."""
    for r in solved.values():
        if r.status == "ERROR":
            warnings.warn(f"compare: {inst.name}: {r.message}", stacklevel=stacklevel)
    unlimited = solved[None]
    base = _instance_columns(inst, unlimited)
    rows = [{**base, **_schedule_row(name, sch, unlimited,
                                     solved[limit_key(max(sch.peak_memory))])}
            for name, sch in known.items()]
    rows.append({**base, **_optimum_row(solved[limit_key(inst.memory_limit)])})
    return rows


def compare(
    instances: Iterable[Instance],
    time_limit: float | None = 30,
    workers: int = 1,
    jobs: int | None = None,
    progress: bool = True,
    *,
    parameters: Mapping[str, Any] | None = None,
    schedules: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Every applicable known schedule of every instance against the CP-SAT optima.

    For each instance, one row per applicable registered schedule (:func:`run_all`, registry
    order; ``schedules`` restricts the rows, not the warm starts), then one row
    ``schedule == "cpsat"``: the optimum under the instance's own memory limit.  Each
    schedule row carries

    * the schedule's ``makespan`` (time units), ``bubble_fraction`` (in [0, 1]),
      ``peak_memory`` (max over devices, activation units) and ``peak_memory_per_device``
      (space-separated string), ``valid`` (the validator finds nothing, e.g. within the
      instance's limit) and the first ``violation`` ("" when valid);
    * ``opt_makespan_unlimited``: the optimum with no memory limit, its
      ``status_unlimited`` and ``lower_bound_unlimited``;
    * ``opt_makespan_same_memory``: the optimum with ``memory.limit`` = this schedule's
      ``peak_memory`` — the time the schedule leaves on the table at its own memory;
      ``status``, ``gap`` (fraction), ``lower_bound``, ``solve_seconds`` and
      ``warm_start`` describe that solve;
    * ``improvement_*_pct = 100 * (makespan - optimum) / makespan`` (>= 0 for valid
      schedules: see the module docstring).

    The ``cpsat`` row has the optimum's own makespan, bubble and memory; its improvement
    columns are NaN.  Instance columns: ``instance, p, v, m, placement, split_backward``, the
    mean over stages of ``forward, backward, backward_input, backward_weight`` (backward =
    the fused B), ``p2p_latency``, ``memory_limit`` (NaN: none).  See :data:`COLUMNS`.

    Solves are cached per (instance, memory limit): when the unlimited optimum is proven and
    fits under a limit, it is that limit's optimum too and is reused without solving.

    Args:
        instances: the instances (names should be unique: they key the table).
        time_limit: wall-clock seconds per solve (None: none).
        workers: CP-SAT workers per solve.
        jobs: parallel solver processes (default: CPU count), capped by the number of
            solves; 1 solves in this process.
        progress: show a rich progress bar.
        parameters: CP-SAT parameters for every solve, e.g. ``{"max_deterministic_time":
            2.0}`` with ``workers=1`` for reproducible numbers.
        schedules: only these registered schedules get rows (others are skipped).

    Returns:
        The table, columns :data:`COLUMNS` (a solve that crashed has ``status = "ERROR"``
        and the reason in ``violation``; a warning is issued).

    Raises:
        ValueError: ``workers`` or ``jobs`` below 1.
        StudyInterrupted: Ctrl-C during the solves; it carries the table of the instances
            that had finished.
    """
    if workers < 1 or (jobs is not None and jobs < 1):
        raise ValueError(f"compare: workers = {workers}, jobs = {jobs}: each must be >= 1 "
                         "(jobs None: one per CPU)")
    insts = list(instances)
    known = [{k: v for k, v in run_all(inst).items() if schedules is None or k in schedules}
             for inst in insts]
    # limits needed per instance: None, own limit, each schedule's peak
    wanted = [list(dict.fromkeys([None, limit_key(inst.memory_limit)]
                                 + [limit_key(max(s.peak_memory)) for s in hs.values()]))
              for inst, hs in zip(insts, known, strict=True)]
    interrupted = False
    try:
        solved = solve_limits(insts, wanted, time_limit=time_limit, workers=workers, jobs=jobs,
                              parameters=dict(parameters) if parameters else None,
                              progress=progress)
    except SolvesInterrupted as exc:
        solved, interrupted = exc.results, True
    table, finished = _table(insts, known, solved, wanted)
    if interrupted:
        raise StudyInterrupted(table, finished, len(insts))
    return table


def _table(insts: Sequence[Instance], known: Sequence[Mapping[str, Schedule]],
           solved: Sequence[Mapping[float | None, LimitSolve]],
           wanted: Sequence[Sequence[float | None]]) -> tuple[pd.DataFrame, int]:
    """The rows of every instance whose solves all finished, and how many instances that is
    (all of them unless the study was interrupted)."""
    rows: list[dict[str, Any]] = []
    finished = 0
    for inst, hs, res, want in zip(insts, known, solved, wanted, strict=True):
        if all(lim in res for lim in want):  # all of an instance's solves, or none of it
            finished += 1
            rows += _rows(inst, hs, res, stacklevel=4)
    return pd.DataFrame(rows, columns=COLUMNS), finished
