"""Running a CP-SAT solve from the command line so that Ctrl-C keeps the best schedule.

The solve runs in a worker thread while the main thread waits in short joins, where Python
delivers ``KeyboardInterrupt``.  On Ctrl-C the main thread calls ``stop_search()`` on what
:func:`cpsched.solver.solve` handed over through ``on_solver`` (the search's stop handle, or
the CP-SAT solver itself when there is no time limit) and waits a short grace period for the
solve to return its best schedule.  CP-SAT's own SIGINT handler is switched off
(``catch_sigint_signal = false``): it would swallow the signal and report the stop as a time
limit.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: Seconds to wait after Ctrl-C for the search to stop and hand back its best schedule.
GRACE_SECONDS = 0.7

OnSolver = Callable[[Any], None]


@dataclass
class SolveRun:
    """How a solve run ended.

    Attributes:
        result: what the solve returned (None: it raised, or did not return in time).
        error: what it raised, if anything.
        interrupted: Ctrl-C was pressed.
        finished: the solve thread has ended (False only after an interrupt whose grace
            period ran out: the process must then end without waiting for it).
    """

    result: Any = None
    error: BaseException | None = None
    interrupted: bool = False
    finished: bool = False


def run_interruptible(call: Callable[[OnSolver], Any],
                      grace: float = GRACE_SECONDS) -> SolveRun:
    """Run ``call(on_solver)`` in a worker thread; on Ctrl-C stop the CP-SAT search that
    ``on_solver`` received and wait at most ``grace`` seconds for ``call`` to return."""
    run = SolveRun()
    solvers: list[Any] = []
    # "done" is an Event, not Thread.is_alive(): on Python 3.11 a KeyboardInterrupt that lands
    # inside Thread.join(timeout) can leave is_alive() False while the thread still runs
    # (measured: the solve's result was then lost)
    done = threading.Event()

    def target() -> None:
        try:
            run.result = call(solvers.append)
        except BaseException as exc:  # noqa: BLE001  (handed to the main thread)
            run.error = exc
        finally:
            done.set()

    thread = threading.Thread(target=target, name="cpsched-solve", daemon=True)
    thread.start()
    try:
        while not done.wait(0.1):
            pass
    except KeyboardInterrupt:
        run.interrupted = True
        _stop(done, solvers, grace)
    run.finished = done.is_set()
    return run


def _stop(done: threading.Event, solvers: list[Any], grace: float) -> None:
    """Ask the search to stop (again and again: the solver may only just be starting) until
    the solve is ``done`` or ``grace`` seconds pass; another Ctrl-C ends the wait."""
    end = time.perf_counter() + grace
    try:
        while not done.is_set() and time.perf_counter() < end:
            for solver in solvers:
                solver.stop_search()
            done.wait(0.05)
    except KeyboardInterrupt:
        pass
