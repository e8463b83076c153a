"""The comparison study: every applicable known schedule of every instance next to two CP-SAT
optima — without a memory limit, and at the schedule's own peak memory ("same memory") — plus
one ``cpsat`` row per instance (the optimum under the instance's own limit).

Invariant: an optimum is never worse than a valid schedule it is compared with.  The "same
memory" solve is warm-started from every applicable schedule at that limit, the schedule in
question included (an overlapped F&B pair of an instance without ``overlap_forward_backward``
is first serialised into its backward then its forward — same end, memory never higher — so
that it is a hint the CP-SAT model accepts), and :func:`cpsched.solver.solve` never returns
something worse than its warm start.  The unlimited optimum is at most the same-memory one.

The table's rows: per instance, each applicable known schedule, then ``cpsat``.  Each
schedule row carries

* the schedule's ``makespan`` (time units), ``bubble_fraction`` (in [0, 1]),
  ``peak_memory`` (max over devices, activation units) and ``peak_memory_per_device``
  (space-separated string), ``valid`` (the validator finds nothing, e.g. within the
  instance's limit) and the first ``violation`` ("" when valid);
* ``opt_makespan_unlimited``: the optimum with no memory limit, its
  ``status_unlimited`` and ``lower_bound_unlimited``;
* ``opt_makespan_same_memory``: the optimum with ``memory.limit`` = this schedule's
  ``peak_memory`` — the time the schedule leaves on the table at its own memory;
  ``status``, ``gap`` (fraction), ``lower_bound``, ``solve_seconds``, ``warm_start``
  and ``message`` (the solver's note: time limit reached, or why the task failed)
  describe that solve;
* ``improvement_*_pct = 100 * (makespan - optimum) / makespan`` (>= 0 for valid
  schedules: see the invariant above).

The ``cpsat`` row has the optimum's own makespan, bubble and memory; its improvement
columns are NaN.  Instance columns: ``instance, p, v, m, placement, split_backward``, the
mean over stages of ``forward, backward, backward_input, backward_weight`` (backward =
the fused B), ``p2p_latency``, ``memory_limit`` (NaN: none).  See :data:`COLUMNS`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from cpsched.instance import Instance
from cpsched.model import Schedule
from cpsched.schedules import run_all
from cpsched.study.dask_run import OnResult, Solved, run_solves
from cpsched.study.directory import SolverSettings, StudyDir
from cpsched.study.grid import fmt_value
from cpsched.study.memory import limit_key
from cpsched.study.parallel import LimitSolve, SolvesInterrupted
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
    "status", "gap", "lower_bound", "solve_seconds", "warm_start", "message",
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
        "message": same.message,
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
        "message": own.message,
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


def known_schedules(insts: Sequence[Instance], schedules: Sequence[str] | None = None
                    ) -> list[dict[str, Schedule]]:
    """Per instance, its applicable registered schedules (only ``schedules`` if given)."""
    return [{k: v for k, v in run_all(inst).items() if schedules is None or k in schedules}
            for inst in insts]


def wanted_limits(insts: Sequence[Instance], known: Sequence[Mapping[str, Schedule]]
                  ) -> list[list[float | None]]:
    """Per instance, the memory limits its rows need: None (unlimited), its own limit, and
    each known schedule's peak memory (rounded keys, :func:`limit_key`)."""
    return [list(dict.fromkeys([None, limit_key(inst.memory_limit)]
                               + [limit_key(max(s.peak_memory)) for s in hs.values()]))
            for inst, hs in zip(insts, known, strict=True)]


def compare(
    instances: Iterable[Instance],
    time_limit: float | None = 30,
    workers: int = 1,
    jobs: int | None = None,
    progress: bool = True,
    *,
    parameters: Mapping[str, Any] | None = None,
    schedules: Sequence[str] | None = None,
    seed: int = 0,
    scheduler: Any = None,
    study: str | Path | None = None,
    sources: Sequence[str] = (),
    on_result: OnResult | None = None,
) -> pd.DataFrame:
    """Every applicable known schedule of every instance against the CP-SAT optima.

    For each instance, one row per applicable registered schedule (:func:`run_all`, registry
    order; ``schedules`` restricts the rows, not the warm starts), then one row
    ``schedule == "cpsat"``: the optimum under the instance's own memory limit.  The columns
    (:data:`COLUMNS`) are described in the module docstring.

    Solves are cached per (instance, memory limit): when the unlimited optimum is proven and
    fits under a limit, it is that limit's optimum too and is reused without solving.  They
    run as Dask tasks (:func:`cpsched.study.dask_run.run_solves`); with ``study`` each one is
    written to that study directory as it finishes and a rerun skips those already there.

    Args:
        instances: the instances (names should be unique: they key the table).
        time_limit: wall-clock seconds per solve (None: none).
        workers: CP-SAT workers (threads) per solve.
        jobs: local Dask worker processes (default: CPU count); 1 solves in this process
            without Dask.  Ignored with ``scheduler``.
        progress: show a rich progress bar.
        parameters: CP-SAT parameters for every solve, e.g. ``{"max_deterministic_time":
            2.0}`` with ``workers=1`` and ``time_limit=None`` for reproducible numbers.
        schedules: only these registered schedules get rows (others are skipped).
        seed: CP-SAT ``random_seed``.
        scheduler: a Dask scheduler address ``tcp://HOST:PORT`` or a ``distributed.Client``
            to run the solves on (None: a local cluster).
        study: a study directory (docs/studies.md), created if needed.
        sources: where the instances came from (recorded in the study directory).
        on_result: called with ``(task, outcome, worker)`` as each solve of this run
            arrives (solves found in ``study`` are not run again, so not reported).

    Returns:
        The table, columns :data:`COLUMNS` (a solve that failed has ``status = "ERROR"`` and
        the reason in ``message``; a warning is issued).

    Raises:
        ValueError: ``workers`` or ``jobs`` below 1.
        cpsched.outputs.OutputError: ``study`` cannot be used, or holds a study with other
            solver settings or schedules.
        OSError: ``scheduler`` cannot be reached.
        StudyInterrupted: Ctrl-C during the solves; it carries the table of the instances
            that had finished (their solves are in ``study`` too).
    """
    if workers < 1 or (jobs is not None and jobs < 1):
        raise ValueError(f"compare: workers = {workers}, jobs = {jobs}: each must be >= 1 "
                         "(jobs None: one per CPU)")
    insts = list(instances)
    settings = SolverSettings(time_limit, workers, seed, dict(parameters or {}))
    store = None
    if study is not None:
        store = StudyDir(study)
        store.begin("compare", settings, {"schedules": sorted(schedules or ["all"])})
        store.add_run(insts, sources)
    known = known_schedules(insts, schedules)
    wanted = wanted_limits(insts, known)
    try:
        solved = run_solves(insts, lambda i, _: wanted[i], settings, store=store,
                            scheduler=scheduler, jobs=jobs, progress=progress,
                            on_result=on_result)
    except SolvesInterrupted as exc:
        table, finished = _table(insts, known, Solved(insts, settings, exc.outcomes),
                                 complete_only=True)
        raise StudyInterrupted(table, finished, len(insts)) from None
    return _table(insts, known, solved)[0]


def _table(insts: Sequence[Instance], known: Sequence[Mapping[str, Schedule]],
           solved: Solved, *, complete_only: bool = False) -> tuple[pd.DataFrame, int]:
    """The rows of every instance (only those whose solves all finished when
    ``complete_only``; others have ``PENDING`` outcomes), and how many are complete."""
    rows: list[dict[str, Any]] = []
    finished = 0
    for i, (inst, hs, want) in enumerate(zip(insts, known, wanted_limits(insts, known),
                                             strict=True)):
        res = {lim: solved.get(i, lim) for lim in want}
        complete = all(r.status != "PENDING" for r in res.values())
        finished += complete
        if complete or not complete_only:
            rows += _rows(inst, hs, res, stacklevel=4)
    return pd.DataFrame(rows, columns=COLUMNS), finished


def study_table(path: str | Path) -> tuple[pd.DataFrame, int, int]:
    """The comparison table of a study directory as far as it has got: every instance of
    its runs, a solve not finished yet as ``status = "PENDING"``, a failed one as
    ``ERROR`` with its reason in ``message``.

    Returns:
        ``(table, finished instances, instances)`` (table columns :data:`COLUMNS`).

    Raises:
        cpsched.outputs.OutputError: ``path`` is not a study directory of ``compare``.
    """
    from cpsched.outputs import OutputError

    store = StudyDir(path, create=False)
    definition = store.read_settings() or {}
    if definition.get("kind") != "compare":
        raise OutputError(f"{path}: not a compare study directory (no study.toml with kind "
                          "= \"compare\"; cpsched compare --out OUT --stem NAME makes one)")
    insts = store.instances()
    names = definition.get("schedules", ["all"])
    known = known_schedules(insts, None if names == ["all"] else names)
    done, failed = store.read_results()
    solved = Solved(insts, store.settings(), {**failed, **done})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table, finished = _table(insts, known, solved)
    return table, finished, len(insts)
