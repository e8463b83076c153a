"""Solving many (instance, memory limit) pairs in parallel processes with a progress bar.

Each instance is solved first without a memory limit; when that optimum is proven and fits
under one of the instance's other limits it is that limit's optimum too and is reused, else
the limit is solved in its own task.

Ctrl-C stops the study at once (the worker processes ignore SIGINT and are terminated by the
parent) and raises :class:`SolvesInterrupted` carrying every solve that had finished.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, replace
from multiprocessing import get_context
from multiprocessing.context import BaseContext
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from cpsched.instance import Instance
from cpsched.schedules import run_all
from cpsched.solver import solve
from cpsched.study.memory import with_memory_limit


@dataclass(frozen=True)
class LimitSolve:
    """The outcome of one solve at one memory limit (plain values: it crosses processes).

    Attributes:
        makespan / lower_bound: time units (None: no schedule / no bound, e.g. on error).
        status: the solver's status (``OPTIMAL``, ``FEASIBLE``, ...) or ``ERROR``.
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


@dataclass(frozen=True)
class SolveTask:
    """One solve: instance ``index`` of a study at memory ``limit`` (None: unlimited)."""

    index: int
    limit: float | None
    instance: Instance
    time_limit: float | None
    workers: int
    parameters: Mapping[str, Any] | None


def solve_task(task: SolveTask) -> LimitSolve:
    """Worker: solve one instance at one memory limit, warm-started from every applicable
    known schedule.  Never raises: a crash is an ``ERROR`` outcome naming the exception."""
    try:
        inst = with_memory_limit(task.instance, task.limit)
        # CP-SAT must not catch Ctrl-C: it would end the search as if at its time limit
        params = {"catch_sigint_signal": False, **(task.parameters or {})}
        res = solve(inst, time_limit=task.time_limit, workers=task.workers,
                    candidates=run_all(inst), parameters=params)
        sch = res.schedule
        return LimitSolve(
            makespan=res.makespan, status=res.status, gap=res.gap, lower_bound=res.lower_bound,
            solve_seconds=res.solve_seconds, warm_start=res.warm_start,
            bubble_fraction=None if sch is None else sch.bubble_fraction,
            peak_memory=None if sch is None else list(sch.peak_memory), message=res.message)
    except Exception as exc:  # noqa: BLE001  (reported in the table, never lost)
        return LimitSolve(makespan=None, status="ERROR", message=f"{type(exc).__name__}: {exc}")


class SolvesInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`solve_limits`; ``results`` holds every solve that finished (same
    shape as the function's return value, with limits missing where unfinished)."""

    def __init__(self, results: list[dict[float | None, LimitSolve]]) -> None:
        super().__init__("interrupted")
        self.results = results


def ignore_sigint() -> None:
    """Worker-process initializer: Ctrl-C is handled by the parent, which terminates the
    workers (a worker interrupted mid-task would only print a traceback)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def stop_executor(executor: Executor) -> None:
    """Cancel what has not started and terminate the worker processes, without waiting for
    running solves."""
    procs = list((getattr(executor, "_processes", None) or {}).values())
    executor.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    for proc in procs:
        proc.join(timeout=2)


class InlineExecutor(Executor):
    """Runs each task at submit time (``jobs = 1``: no process start-up, easy to debug)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        fut: Future = Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001
            fut.set_exception(exc)
        return fut


def mp_context() -> BaseContext:
    """``fork`` on Linux: no re-import of ``__main__`` (works from unguarded scripts and
    notebooks) and no start-up cost; the parent runs no solver threads while forking (CP-SAT
    joins its threads when a solve returns, and the progress bar refreshes without a thread).
    Elsewhere the platform default (spawn: scripts need ``if __name__ == "__main__":``)."""
    return get_context("fork") if sys.platform.startswith("linux") else get_context()


def progress_bar(enabled: bool) -> Progress:
    """A rich progress bar (description, bar, done/total, elapsed), refreshed by hand."""
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), disable=not enabled, transient=False,
                    auto_refresh=False)


def _fits(unlimited: LimitSolve, limit: float) -> bool:
    """The unlimited optimum is proven and its peak memory is within ``limit``."""
    peaks = unlimited.peak_memory
    if unlimited.status != "OPTIMAL" or not peaks:
        return False
    return max(peaks) <= limit + 1e-9


def solve_limits(
    instances: Sequence[Instance],
    limits: Sequence[Sequence[float | None]],
    *,
    time_limit: float | None,
    workers: int,
    jobs: int | None,
    parameters: Mapping[str, Any] | None,
    progress: bool,
) -> list[dict[float | None, LimitSolve]]:
    """Solve every instance at each of its memory limits (``None`` first: unlimited).

    Args:
        instances: the instances.
        limits: per instance, the distinct limits to solve (activation units; keys of the
            result as given, so round them with :func:`~cpsched.study.memory.limit_key`).
        time_limit: wall-clock seconds per solve (None: none).
        workers: CP-SAT workers per solve.
        jobs: parallel processes (default: CPU count), capped by the number of solves; 1
            solves in this process.
        parameters: CP-SAT parameters for every solve.
        progress: show a progress bar.

    Returns:
        Per instance, ``{limit: outcome}`` for every limit in ``limits`` plus None.

    Raises:
        SolvesInterrupted: on Ctrl-C, with the solves finished so far.
    """
    results: list[dict[float | None, LimitSolve]] = [{} for _ in instances]
    n_jobs = max(1, min(jobs or os.cpu_count() or 1, sum(len(w) for w in limits)))
    executor: Executor = (InlineExecutor() if n_jobs == 1 else ProcessPoolExecutor(
        n_jobs, mp_context=mp_context(), initializer=ignore_sigint))
    make_task = functools.partial(SolveTask, time_limit=time_limit, workers=workers,
                                  parameters=parameters)
    try:
        with progress_bar(progress) as bar:
            _run(executor, bar, instances, limits, results, make_task)
    except KeyboardInterrupt:
        stop_executor(executor)
        raise SolvesInterrupted(results) from None
    except BaseException:
        stop_executor(executor)
        raise
    executor.shutdown(wait=True)
    return results


def _run(executor: Executor, bar: Progress, instances: Sequence[Instance],
         limits: Sequence[Sequence[float | None]],
         results: list[dict[float | None, LimitSolve]],
         make_task: Callable[..., SolveTask]) -> None:
    """Submit every unlimited solve, then each instance's limited solves as its unlimited one
    finishes (reusing it where it fits); record each outcome in ``results`` as it arrives."""
    bar_id = bar.add_task("solving", total=len(instances))
    pending: dict[Future, SolveTask] = {}
    submitted = 0

    def submit(index: int, limit: float | None) -> None:
        nonlocal submitted
        submitted += 1
        bar.update(bar_id, total=max(submitted, len(instances)), refresh=True)
        task = make_task(index=index, limit=limit, instance=instances[index])
        pending[executor.submit(solve_task, task)] = task

    for i in range(len(instances)):
        submit(i, None)
    while pending:
        done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
        for fut in done:
            task = pending.pop(fut)
            results[task.index][task.limit] = fut.result()
            if task.limit is None:  # phase 2: the limited solves of this instance
                unlimited = results[task.index][None]
                for lim in limits[task.index]:
                    if lim is None:
                        continue
                    if _fits(unlimited, lim):
                        results[task.index][lim] = replace(unlimited, solve_seconds=0.0,
                                                           reused=True)
                    else:
                        submit(task.index, lim)
            bar.update(bar_id, advance=1, refresh=True)
