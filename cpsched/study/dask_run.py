"""Running a study's solves on Dask distributed — a local cluster by default, or any cluster
given by its scheduler address — or, with one job, in this process.

Each instance is solved first without a memory limit; when that solve arrives the instance's
other limits are asked for (``follow_up``): a limit the unlimited optimum fits under is that
limit's optimum too and is reused without a solve, the others become tasks.  Every outcome is
written to the study directory as it arrives (:class:`~cpsched.study.directory.StudyDir`), and
a task whose id is there already is not run again, so a rerun computes only what is missing.

A worker that dies mid-task is replaced and its task rescheduled by Dask; a task that fails
for good (e.g. its worker died repeatedly) is an ``ERROR`` outcome naming the reason.  Ctrl-C
cancels what is queued or running and raises :class:`SolvesInterrupted` with every outcome
that finished — all of them already on disk.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from cpsched.instance import Instance
from cpsched.study.directory import SolverSettings, StudyDir, task_id
from cpsched.study.memory import limit_key
from cpsched.study.parallel import (
    PENDING,
    LimitSolve,
    SolvesInterrupted,
    SolveTask,
    fits,
    run_task,
)

#: ``follow_up(index, unlimited outcome)`` → the other memory limits instance ``index``
#: needs once its unlimited solve is known.
FollowUp = Callable[[int, LimitSolve], Sequence[float | None]]

#: Called with ``(task, outcome, worker)`` as each solve arrives (tests, logging).
OnResult = Callable[[SolveTask, LimitSolve, str], None]


@dataclass
class Solved:
    """A study's outcomes: ``outcomes[task id]`` and the id of each (instance, limit)."""

    instances: Sequence[Instance]
    settings: SolverSettings
    outcomes: dict[str, LimitSolve] = field(default_factory=dict)
    ids: dict[tuple[int, float | None], str] = field(default_factory=dict)

    def tid(self, index: int, limit: float | None) -> str:
        """The task id of instance ``index`` at ``limit`` (computed once)."""
        key = (index, limit_key(limit))
        if key not in self.ids:
            self.ids[key] = task_id(self.instances[index], key[1], self.settings)
        return self.ids[key]

    def get(self, index: int, limit: float | None) -> LimitSolve:
        """The outcome at ``limit``: solved, reused from the unlimited optimum (it fits), or
        :data:`~cpsched.study.parallel.PENDING`."""
        out = self.outcomes.get(self.tid(index, limit))
        if out is not None:
            return out
        unlimited = self.outcomes.get(self.tid(index, None))
        if fits(unlimited, limit):
            assert unlimited is not None
            return replace(unlimited, solve_seconds=0.0, reused=True)
        return PENDING


class _State:
    """What is done, what is needed next; writes each outcome to the store."""

    def __init__(self, solved: Solved, follow_up: FollowUp, store: StudyDir | None,
                 on_result: OnResult | None) -> None:
        self.solved, self.follow_up, self.store, self.on_result = (
            solved, follow_up, store, on_result)
        self.users: dict[str, list[tuple[int, float | None]]] = {}  # id -> (index, limit)
        self.seen: set[str] = set()
        self.done = self.failed = self.skipped = 0
        self.planned = 0
        self.interrupted: Callable[[], bool] = lambda: False
        #: a section in which Ctrl-C is only noted (:func:`_sigint_noted`), raised after it
        self.hold: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext

    def check(self) -> None:
        """Raise KeyboardInterrupt if Ctrl-C was noted (:func:`_sigint_noted`)."""
        if self.interrupted():
            raise KeyboardInterrupt

    def _task(self, index: int, limit: float | None) -> SolveTask | None:
        """The task for (index, limit), or None when it is done, reused or already queued."""
        s = self.solved
        tid = s.tid(index, limit)
        self.users.setdefault(tid, []).append((index, limit_key(limit)))
        if tid in self.seen:
            return None
        self.seen.add(tid)
        self.planned += 1
        if tid in s.outcomes:
            self.skipped += 1
            return None
        if limit is not None and fits(s.outcomes.get(s.tid(index, None)), limit):
            self.skipped += 1
            return None
        st = s.settings
        return SolveTask(task_id=tid, instance=s.instances[index], limit=limit_key(limit),
                         time_limit=st.time_limit, workers=st.workers, seed=st.seed,
                         parameters=dict(st.parameters))

    def _phase2(self, index: int) -> list[SolveTask]:
        unlimited = self.solved.outcomes[self.solved.tid(index, None)]
        tasks = [self._task(index, lim) for lim in dict.fromkeys(
            limit_key(x) for x in self.follow_up(index, unlimited)) if lim is not None]
        return [t for t in tasks if t is not None]

    def initial(self) -> list[SolveTask]:
        """Every unlimited solve not done yet, and the follow-ups of those that are."""
        out: list[SolveTask] = []
        for i in range(len(self.solved.instances)):
            t = self._task(i, None)
            if t is not None:
                out.append(t)
            elif self.solved.tid(i, None) in self.solved.outcomes:
                out += self._phase2(i)
        return out

    def arrive(self, task: SolveTask, outcome: LimitSolve, worker: str) -> list[SolveTask]:
        """Record (and write) one outcome; return the follow-up tasks it makes needed.
        Ctrl-C waits until the outcome is written, recorded and reported (:attr:`hold`): a
        result on disk is always one the run counts (the next :meth:`check` raises)."""
        with self.hold():
            if self.store is not None:
                self.store.write_result(task.task_id, task.instance.name, task.limit, worker,
                                        outcome)
            self.solved.outcomes[task.task_id] = outcome
            self.done += 1
            self.failed += outcome.status == "ERROR"
            if self.on_result is not None:
                self.on_result(task, outcome, worker)
        if task.limit is not None:  # (a failed unlimited solve still has follow-ups)
            return []
        out: list[SolveTask] = []
        for index, _ in self.users.get(task.task_id, []):
            out += self._phase2(index)
        return out


def progress_bar(enabled: bool, auto_refresh: bool) -> Progress:
    """A rich bar: description, bar, done/total, running and failed counts, elapsed, time
    left (``auto_refresh`` False: refreshed on each event, no thread)."""
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("running {task.fields[running]} failed {task.fields[failed]}"),
                    TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn(),
                    disable=not enabled, transient=False, auto_refresh=auto_refresh)


class _Bar:
    """The progress bar of one run, counting solves (a reused or finished one counts)."""

    def __init__(self, bar: Progress, state: _State, slots: int) -> None:
        self.bar, self.state, self.slots = bar, state, slots
        self.id = bar.add_task("solving", total=1, running=0, failed=0)

    def update(self, in_flight: int) -> None:
        st = self.state
        self.bar.update(self.id, total=max(st.planned, 1), completed=st.skipped + st.done,
                        running=min(in_flight, self.slots), failed=st.failed,
                        description=f"solving ({st.skipped} done before)" if st.skipped
                        else "solving", refresh=True)


def _run_inline(state: _State, first: list[SolveTask], bar: _Bar) -> None:
    queue = deque(first)
    bar.update(len(queue))
    while queue:
        task = queue.popleft()
        outcome, worker = run_task(task)
        queue.extend(state.arrive(task, outcome, worker))
        bar.update(len(queue))
        state.check()


#: statuses of a future whose result was lost with the worker holding it after it was done
#: (as_completed had already given it back): Dask computes it again, so it is waited for once
#: more, not recorded as a failure
_RECOMPUTED = ("lost", "pending")


def _failure(fut: Any) -> LimitSolve:
    """The ``ERROR`` outcome of a Dask future that failed or was cancelled."""
    try:
        exc = fut.exception(timeout=10)
        reason = f"{type(exc).__name__}: {exc}"
    except Exception as err:  # noqa: BLE001 - cancelled, lost scheduler, ...
        reason = f"{type(err).__name__}: {err}"
    return LimitSolve(makespan=None, status="ERROR", message=f"task failed: {reason}")


def _run_dask(state: _State, first: list[SolveTask], client: Any, bar: _Bar) -> None:
    from distributed import as_completed

    futures: dict[Any, SolveTask] = {}

    def submit(tasks: Sequence[SolveTask]) -> None:
        for t in tasks:
            fut = client.submit(run_task, t, key=f"cpsched-solve-{t.task_id}", retries=0)
            futures[fut] = t
            pending.add(fut)

    pending = as_completed(loop=client.loop)
    try:
        submit(first)
        bar.update(len(futures))
        for fut in pending:
            if fut.status in _RECOMPUTED:  # done, then lost with its worker: wait again
                pending.add(fut)
                continue
            task = futures.pop(fut)
            if fut.status == "finished":
                outcome, worker = fut.result()
            else:
                outcome, worker = _failure(fut), "-"
            fut.release()
            submit(state.arrive(task, outcome, worker))
            bar.update(len(futures))
            state.check()
    except BaseException:
        with contextlib.suppress(Exception):
            client.cancel(list(futures), force=True)
        raise


@contextlib.contextmanager
def dask_client(scheduler: Any = None, n_workers: int | None = None) -> Iterator[Any]:
    """A Dask client: on ``scheduler`` (an address ``tcp://HOST:PORT`` or a
    ``distributed.Client``, left open), else on a new local cluster of ``n_workers`` worker
    processes (default: CPU count) with one thread each, on 127.0.0.1, no dashboard, its
    logs silenced below CRITICAL (a failed task is a table row; Dask's own shutdown noise
    after Ctrl-C is not shown) — closed on exit.

    Raises:
        OSError: the scheduler cannot be reached (within 10 s).
    """
    from distributed import Client, LocalCluster

    if scheduler is not None and not isinstance(scheduler, str):
        yield scheduler
        return
    if scheduler is not None:
        with Client(scheduler, timeout="10s", set_as_default=False) as client:
            yield client
        return
    n = n_workers or os.cpu_count() or 1
    with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None, silence_logs=logging.CRITICAL) as cluster, \
            Client(cluster, set_as_default=False) as client:
        yield client


def run_solves(
    instances: Sequence[Instance],
    follow_up: FollowUp,
    settings: SolverSettings,
    *,
    store: StudyDir | None = None,
    scheduler: Any = None,
    jobs: int | None = None,
    progress: bool = False,
    on_result: OnResult | None = None,
) -> Solved:
    """Solve every instance without a memory limit, then at the limits ``follow_up`` asks
    for, skipping every solve already in ``store``.

    Args:
        instances: the instances.
        follow_up: ``follow_up(index, unlimited outcome)`` → limits (activation units) that
            instance ``index`` needs next (None entries are ignored).
        settings: the solver settings of every solve.
        store: the study directory: its finished solves are reused and each new outcome is
            written there as it arrives (None: nothing written).
        scheduler: a Dask scheduler address or ``distributed.Client`` (None: a local cluster
            of ``jobs`` workers; with ``jobs == 1`` no Dask, solves run in this process).
        jobs: local Dask workers (default: CPU count).
        progress: show a progress bar (done / total, running, failed, time left).
        on_result: called as each outcome arrives (after it is written).

    Returns:
        :class:`Solved`: every outcome, ``get(index, limit)`` resolving reuse.

    Raises:
        SolvesInterrupted: Ctrl-C, with every outcome finished (written to ``store``).
        OSError: the scheduler cannot be reached.
    """
    solved = Solved(instances, settings)
    if store is not None:
        solved.outcomes.update(store.read_results()[0])
    state = _State(solved, follow_up, store, on_result)
    first = state.initial()
    if not first:  # everything is done already: no cluster needed
        return solved
    inline = scheduler is None and jobs == 1
    try:
        with _sigint_noted() as (interrupted, hold), progress_bar(
                progress, auto_refresh=not inline) as bar:
            state.interrupted, state.hold = interrupted, hold
            if inline:
                _run_inline(state, first, _Bar(bar, state, 1))
            else:
                with dask_client(scheduler, jobs) as client:
                    slots = sum(client.nthreads().values()) or 1
                    _run_dask(state, first, client, _Bar(bar, state, slots))
            state.check()
    except KeyboardInterrupt:
        raise SolvesInterrupted(dict(solved.outcomes)) from None
    return solved


@contextlib.contextmanager
def _sigint_noted() -> Iterator[tuple[Callable[[], bool],
                                      Callable[[], contextlib.AbstractContextManager[Any]]]]:
    """While the solves run (main thread only): Ctrl-C is also noted in a flag, so that a
    KeyboardInterrupt that lands where Python must drop it (e.g. in a Dask ``Future.__del__``:
    "Exception ignored in ...") is raised again at the next result (measured: the study
    otherwise ran to its end and exited 0).  Yields the flag's reader and a ``hold()``
    context in which Ctrl-C is only noted, not raised (writing and counting one result:
    a SIGINT between the two left a result on disk that the run's summary did not count)."""
    noted, held = [False], [0]

    @contextlib.contextmanager
    def hold() -> Iterator[None]:
        held[0] += 1
        try:
            yield
        finally:
            held[0] -= 1

    if threading.current_thread() is not threading.main_thread():
        yield (lambda: noted[0]), hold
        return
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum: int, frame: Any) -> None:
        noted[0] = True
        if not held[0]:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    try:
        yield (lambda: noted[0]), hold
    finally:
        signal.signal(signal.SIGINT, previous)
