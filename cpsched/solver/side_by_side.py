"""CP-SAT runs side by side in threads, with one stop handle (docs/modelling.md §36).

The relaxations after the search use one CP-SAT worker each, while the search that ran before
them used every core; on two cores the second one idled.  CP-SAT releases the interpreter
lock while it solves, so two relaxations in two threads use both cores
(:func:`cpsched.solver.relaxation.relaxation_bound` with ``parallel``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any

#: A lane: called with the :class:`SolverHub`; registers each solver with ``add`` before it
#: solves, starts no further run once ``done()``, and may end the others (``stop_search``).
Lane = Callable[["SolverHub"], None]


class SolverHub:
    """One stop handle for the CP-SAT solvers of several threads: ``stop_search()`` stops
    every solver registered with :meth:`add` and marks the hub ``requested``; ``stopped``
    is the caller's own stop (Ctrl-C)."""

    def __init__(self, stopped: Callable[[], bool] = lambda: False) -> None:
        self._lock = threading.Lock()
        self._solvers: list[Any] = []
        self._stopped = stopped
        self.requested = False

    def done(self) -> bool:
        """Whether no further run should start (stopped here or by the caller)."""
        return self.requested or self._stopped()

    def add(self, solver: Any) -> None:
        """Register ``solver`` (an object with ``stop_search()``) before it solves."""
        with self._lock:
            self._solvers.append(solver)

    def stop_search(self) -> None:
        """Stop every registered solver (asynchronously; each keeps what it has proven)."""
        with self._lock:
            self.requested = True
            solvers = list(self._solvers)
        for solver in solvers:
            solver.stop_search()


def side_by_side(lanes: Sequence[Lane], *, on_solver: Callable[[Any], None] | None,
                 stopped: Callable[[], bool]) -> SolverHub:
    """Run each lane in its own thread and wait for all of them.

    ``on_solver`` (if given) receives the :class:`SolverHub` once, before any lane starts:
    its ``stop_search()`` stops every lane's current solver (Ctrl-C).  A lane stops when
    ``hub.done()``: ``stopped()`` or a ``stop_search()``.  An exception in a lane — or an
    interrupt while waiting — stops the other lanes and is raised here.

    Returns:
        The hub.
    """
    hub = SolverHub(stopped)
    if on_solver is not None:
        on_solver(hub)
    with ThreadPoolExecutor(max_workers=len(lanes), thread_name_prefix="relaxation") as pool:
        futures = [pool.submit(lane, hub) for lane in lanes]
        try:
            wait(futures, return_when=FIRST_EXCEPTION)
            for future in futures:
                if future.done() and future.exception() is not None:
                    future.result()  # raises it
        except BaseException:
            hub.stop_search()
            raise
    return hub


__all__ = ["Lane", "SolverHub", "side_by_side"]
