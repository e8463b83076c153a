"""A CP-SAT search in a child process that ends at its deadline, whatever CP-SAT does.

On large models CP-SAT's own time limit and ``stop_search()`` can be honoured tens of seconds
late (measured: a 28 s limit on p=16 v=2 m=64 with a memory limit returned after 40–99 s; some
LNS and presolve phases do not look at the clock).  A user's ``--time-limit`` bounds the whole
command, so the search runs in a forked child process that streams every improving solution and
bound back through a pipe, and is killed at the deadline: the parent keeps the last solution it
received (the warm start when none came).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from ortools.sat.python import cp_model

from cpsched.forked import die_with_parent
from cpsched.solver.cpsat import solve_model


@dataclass
class Outcome:
    """What a search produced (ticks): CP-SAT status code and name, the last solution as the
    full variable vector (None if none), its objective, the best proven bound, statistics."""

    code: Any = cp_model.UNKNOWN
    status_name: str = "UNKNOWN"
    solution: list[int] | None = None
    objective: float | None = None
    bound: float | None = None
    stats: dict[str, float] = field(default_factory=dict)

    def value(self, var: Any) -> int:
        """Value of an integer variable or literal in :attr:`solution`."""
        if self.solution is None:
            raise ValueError("no solution")
        idx = var.index
        if idx >= 0:
            return self.solution[idx]
        return 1 - self.solution[-idx - 1]  # a negated literal

    def boolean_value(self, lit: Any) -> bool:
        """Value of a literal in :attr:`solution`."""
        return bool(self.value(lit))


class StopHandle:
    """Given to ``on_solver`` callers: :meth:`stop_search` ends the search now (Ctrl-C)."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def stop_search(self) -> None:
        """Stop the search; the best solution received so far is kept."""
        self.event.set()


def _child(model: cp_model.CpModel, params: Any, conn: Connection,
           parent_pid: int) -> None:  # pragma: no cover - runs in the child
    # a forked child: the model and parameters are the parent's, inherited, not copied
    die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    solver = cp_model.CpSolver()
    solver.parameters.copy_from(params)
    solver.parameters.catch_sigint_signal = False

    class Stream(cp_model.CpSolverSolutionCallback):
        def on_solution_callback(self) -> None:
            conn.send(("solution", self.objective_value, self.best_objective_bound,
                       list(self.response_proto.solution)))

    solver.best_bound_callback = lambda b: conn.send(("bound", b))
    code = solve_model(solver, model, Stream())
    resp = solver.response_proto
    conn.send(("done", int(code), solver.status_name(code), resp.objective_value,
               resp.best_objective_bound, list(resp.solution) or None,
               {"conflicts": resp.num_conflicts, "branches": resp.num_branches,
                "wall_time": resp.wall_time}))
    conn.close()


def search(model: cp_model.CpModel, params: Any, deadline: float, *,
           on_solution: Callable[[float, float], None] | None = None,
           on_bound: Callable[[float], None] | None = None,
           stop: StopHandle | None = None) -> Outcome:
    """Solve ``model`` with ``params`` (``SatParameters``) in a forked child until it ends or
    ``deadline`` (a ``time.perf_counter()`` value) or ``stop`` is set.

    ``on_solution(objective, bound)`` and ``on_bound(bound)`` report progress in the parent.
    Returns the :class:`Outcome` (status UNKNOWN/FEASIBLE when cut short).
    """
    out = Outcome()
    parent, child = mp.get_context("fork").Pipe(duplex=False)
    proc = mp.get_context("fork").Process(
        target=_child, args=(model, params, child, os.getpid()), daemon=True)
    proc.start()
    child.close()
    try:
        while True:
            left = deadline - time.perf_counter()
            if left <= 0 or (stop is not None and stop.event.is_set()):
                break
            if not parent.poll(min(left, 0.1)):
                if not proc.is_alive() and not parent.poll():
                    break
                continue
            try:
                msg = parent.recv()
            except EOFError:
                break
            if msg[0] == "solution":
                out.code, out.status_name = cp_model.FEASIBLE, "FEASIBLE"
                out.objective, out.bound, out.solution = msg[1], msg[2], msg[3]
                if on_solution is not None:
                    on_solution(msg[1], msg[2])
            elif msg[0] == "bound":
                out.bound = msg[1] if out.bound is None else max(out.bound, msg[1])
                if on_bound is not None:
                    on_bound(msg[1])
            else:
                _, code, name, obj, bound, sol, stats = msg
                out.code, out.status_name, out.stats = cp_model.CpSolverStatus(code), name, stats
                out.bound = bound
                if sol is not None:
                    out.objective, out.solution = obj, sol
                break
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(timeout=1.0)
        parent.close()
    return out
