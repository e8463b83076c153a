"""Background CP-SAT solves for the web app: one thread per job, keyed by a job id.

The page keeps only the job id (in a ``dcc.Store`` of its own tab, so two tabs never share a
job) and polls :meth:`JobManager.status` for the incumbent, the bound and the elapsed time that
:func:`cpsched.solve` reports through ``on_progress``.  :meth:`JobManager.cancel` calls
``stop_search()`` on the handle ``solve`` hands over through ``on_solver`` — the same stop the
command line uses on Ctrl-C (docs/spec.md §4.1) — and the solve returns its best schedule so
far.  A failure inside the solve is logged with its traceback on the server; the page only
gets one line.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cpsched.instance import Instance
from cpsched.model import Schedule

log = logging.getLogger("cpsched.serve")

#: Finished jobs kept for their results (the oldest are forgotten first).
MAX_JOBS = 32

Solver = Callable[..., Any]


@dataclass
class Job:
    """One solve.

    Attributes:
        id: the job id the page keeps.
        instance: what is solved.
        state: ``"running"``, ``"done"``, ``"cancelled"`` (stopped, best schedule kept) or
            ``"failed"``.
        elapsed, incumbent, bound: the last progress report (seconds; instance time units;
            None before the first).
        result: :class:`cpsched.Result` once finished.
        error: one line when failed.
        stops: the stop handles ``solve`` handed over (``stop_search()``).
    """

    id: str
    instance: Instance
    state: str = "running"
    started: float = field(default_factory=time.perf_counter)
    elapsed: float = 0.0
    incumbent: float | None = None
    bound: float | None = None
    result: Any = None
    error: str = ""
    stops: list[Any] = field(default_factory=list)
    cancel_requested: bool = False

    @property
    def schedule(self) -> Schedule | None:
        """The solved schedule (None while running or after a failure)."""
        return None if self.result is None else self.result.schedule


class JobManager:
    """Runs solves in daemon threads and answers questions about them by job id.

    Args:
        solver: the solve function (default :func:`cpsched.solve`), called as
            ``solver(inst, time_limit=..., workers=..., on_progress=..., on_solver=...)``.
    """

    def __init__(self, solver: Solver | None = None) -> None:
        self._solver = solver
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._lock = threading.Lock()

    def start(self, inst: Instance, *, time_limit: float | None, workers: int = 1) -> str:
        """Start solving ``inst`` in a new thread; returns the job id.

        Args:
            time_limit: wall-clock seconds for the whole solve (None: until optimal; the
                search then runs in-process and deterministically with ``workers=1``).
            workers: CP-SAT workers.
        """
        job = Job(id=uuid.uuid4().hex, instance=inst)
        with self._lock:
            self._jobs[job.id] = job
            self._forget_old()
        thread = threading.Thread(target=self._run, args=(job, time_limit, workers),
                                  name=f"cpsched-serve-{job.id[:8]}", daemon=True)
        thread.start()
        return job.id

    def _forget_old(self) -> None:
        finished = [k for k, j in self._jobs.items() if j.state != "running"]
        while len(self._jobs) > MAX_JOBS and finished:
            self._jobs.pop(finished.pop(0), None)

    def _run(self, job: Job, time_limit: float | None, workers: int) -> None:
        solver = self._solver
        if solver is None:
            from cpsched.solver import solve as solver

        def progress(elapsed: float, incumbent: float | None, bound: float | None) -> None:
            """Record a progress report (seconds, incumbent, bound)."""
            job.elapsed, job.incumbent, job.bound = elapsed, incumbent, bound

        def on_solver(handle: Any) -> None:
            """Keep the stop handle; stop at once if cancel came first."""
            job.stops.append(handle)
            if job.cancel_requested:
                handle.stop_search()

        try:
            job.result = solver(job.instance, time_limit=time_limit, workers=workers,
                                on_progress=progress, on_solver=on_solver)
            if job.result.schedule is not None:  # the final word, past the last report
                job.incumbent, job.bound = job.result.makespan, job.result.lower_bound
            job.state = "cancelled" if job.cancel_requested else "done"
        except Exception as exc:  # noqa: BLE001 - logged here, one line for the page
            log.exception("solve of %s failed", job.instance.name)
            job.error = f"the solve failed ({type(exc).__name__}); details are in the server log"
            job.state = "failed"
        job.elapsed = time.perf_counter() - job.started

    def get(self, job_id: str | None) -> Job | None:
        """The job ``job_id`` (None: unknown or forgotten)."""
        with self._lock:
            return self._jobs.get(job_id or "")

    def status(self, job_id: str | None) -> dict[str, Any] | None:
        """``{"state", "elapsed", "incumbent", "bound", "error"}`` of a job (None: unknown)."""
        job = self.get(job_id)
        if job is None:
            return None
        elapsed = job.elapsed if job.state != "running" else time.perf_counter() - job.started
        return {"state": job.state, "elapsed": elapsed, "incumbent": job.incumbent,
                "bound": job.bound, "error": job.error}

    def cancel(self, job_id: str | None) -> bool:
        """Ask a running job to stop (it keeps its best schedule); False if not running."""
        job = self.get(job_id)
        if job is None or job.state != "running":
            return False
        job.cancel_requested = True
        for handle in list(job.stops):
            handle.stop_search()
        return True

    def wait(self, job_id: str, timeout: float) -> Job | None:
        """Block until the job has finished or ``timeout`` seconds passed (tests, scripts)."""
        end = time.perf_counter() + timeout
        job = self.get(job_id)
        while job is not None and job.state == "running" and time.perf_counter() < end:
            time.sleep(0.02)
        return job


__all__ = ["MAX_JOBS", "Job", "JobManager"]
