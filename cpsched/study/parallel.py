"""One solve of a study as a task that can run anywhere: in this process, or on a Dask worker
of a local or remote cluster (:mod:`cpsched.study.dask_run` schedules them).

A task is plain data (the instance, a memory limit, the solver settings) and its outcome is
plain values, so both cross processes and machines; the task never raises: a crash is an
``ERROR`` outcome naming the exception.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cpsched.instance import Instance
from cpsched.schedules import run_all
from cpsched.solver import solve
from cpsched.study.memory import with_memory_limit


@dataclass(frozen=True)
class LimitSolve:
    """The outcome of one solve at one memory limit (plain values: it crosses processes).

    Attributes:
        makespan / lower_bound: time units (None: no schedule / no bound, e.g. on error).
        status: the solver's status (``OPTIMAL``, ``FEASIBLE`` — stopped by its time limit,
            see ``message``), ``ERROR`` (the task failed; ``message`` says why) or, in a
            partial study's table, ``PENDING`` (not solved yet).
        gap: ``(makespan - lower_bound) / makespan``, a fraction.
        solve_seconds: wall time; 0 when ``reused``.
        warm_start: the warm start's registry name.
        bubble_fraction / peak_memory: of the schedule found (per device, activation units).
        message: the solver's note, or the error for ``ERROR``.
        reused: the unlimited optimum reused at a limit it fits under (no solve).
    """

    makespan: float | None
    status: str
    gap: float | None = None
    lower_bound: float | None = None
    solve_seconds: float | None = None
    warm_start: str | None = None
    bubble_fraction: float | None = None
    peak_memory: list[float] | None = None
    message: str = ""
    reused: bool = False


#: The outcome standing for a solve a partial study has not finished yet.
PENDING = LimitSolve(makespan=None, status="PENDING", message="not solved yet")


@dataclass(frozen=True)
class SolveTask:
    """One solve: ``instance`` at memory ``limit`` (None: unlimited), CP-SAT run with
    ``time_limit`` (wall-clock seconds per solve, None: none), ``workers`` threads, ``seed``
    and ``parameters``; ``task_id`` names it (:func:`cpsched.study.directory.task_id`)."""

    task_id: str
    instance: Instance
    limit: float | None
    time_limit: float | None = None
    workers: int = 1
    seed: int = 0
    parameters: Mapping[str, Any] = field(default_factory=dict)


def allow_child_processes() -> None:
    """Let this process start child processes although it may be daemonic.

    Dask's nanny starts each worker as a daemonic process, and :mod:`multiprocessing`
    refuses children there, but a solve with a wall-clock time limit runs CP-SAT in a forked
    child (:mod:`cpsched.solver.isolated`) that dies with its parent (``PR_SET_PDEATHSIG``).
    Clearing the flag in the worker process itself is the cheapest fix that also works on
    workers started by hand (``dask worker``) or by a cluster manager."""
    proc = mp.current_process()
    if proc.daemon and getattr(proc, "_popen", None) is None:
        proc.daemon = False


def solve_task(task: SolveTask) -> LimitSolve:
    """Solve one instance at one memory limit, warm-started from every applicable known
    schedule.  Never raises: a crash is an ``ERROR`` outcome naming the exception."""
    try:
        allow_child_processes()
        inst = with_memory_limit(task.instance, task.limit)
        # CP-SAT must not catch Ctrl-C: it would end the search as if at its time limit
        params = {"catch_sigint_signal": False, **task.parameters}
        res = solve(inst, time_limit=task.time_limit, workers=task.workers, seed=task.seed,
                    candidates=run_all(inst), parameters=params)
        sch = res.schedule
        return LimitSolve(
            makespan=_float(res.makespan), status=str(res.status), gap=_float(res.gap),
            lower_bound=_float(res.lower_bound), solve_seconds=_float(res.solve_seconds),
            warm_start=res.warm_start,
            bubble_fraction=None if sch is None else sch.bubble_fraction,
            peak_memory=None if sch is None else [float(x) for x in sch.peak_memory],
            message=res.message)
    except Exception as exc:  # noqa: BLE001  (reported in the table, never lost)
        return LimitSolve(makespan=None, status="ERROR", message=f"{type(exc).__name__}: {exc}")


def _float(x: float | None) -> float | None:
    """Numbers as floats: an outcome read back from a study directory is the same."""
    return None if x is None else float(x)


def run_task(task: SolveTask) -> tuple[LimitSolve, str]:
    """The function a Dask worker (or this process) runs: :func:`solve_task` and where it
    ran (``host:pid``)."""
    return solve_task(task), f"{socket.gethostname()}:{os.getpid()}"


def fits(unlimited: LimitSolve | None, limit: float | None) -> bool:
    """The unlimited optimum is proven and its peak memory is within ``limit`` (so it is the
    optimum at that limit too and needs no solve of its own)."""
    if unlimited is None or limit is None or unlimited.status != "OPTIMAL":
        return False
    peaks = unlimited.peak_memory
    return bool(peaks) and max(peaks) <= limit + 1e-9


class SolvesInterrupted(KeyboardInterrupt):
    """Ctrl-C while a study's solves ran; ``outcomes`` holds every solve that finished
    (``{task id: outcome}``, as written to the study directory if there is one)."""

    def __init__(self, outcomes: dict[str, LimitSolve]) -> None:
        super().__init__("interrupted")
        self.outcomes = outcomes
