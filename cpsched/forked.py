"""A function called in a forked child process, its value or its exception sent back.

The solver's single-threaded work before CP-SAT starts — chiefly the list-scheduling
searches among the known schedules (``list`` and ``list-retimed``, 6-10 s each at 24 576
actions) — leaves the second core of a 2-core machine idle; run side by side in two
processes they take the time of the longer one (docs/modelling.md §45).  A forked child
inherits the parent's memory (the instance, the registry, a deadline set in a
:class:`~contextvars.ContextVar`), so nothing is re-imported or pickled on the way in; the
value comes back pickled through a pipe.

The child dies with its parent (Linux ``PR_SET_PDEATHSIG``) and ignores Ctrl-C (the parent
decides: it kills the child when it stops waiting).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import multiprocessing as mp
import os
import signal
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any


def usable_cores(at_most: int | None = None) -> int:
    """Cores this process may run on (its CPU affinity where the platform tells; else the
    machine's count), no more than ``at_most`` (None: no cap), at least 1."""
    cores = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
             else os.cpu_count() or 1)
    return max(1, cores if at_most is None else min(int(at_most), cores))


def can_fork() -> bool:
    """Whether this process can start a forked child: the ``fork`` start method exists
    (Linux, macOS) and the process is not daemonic (:mod:`multiprocessing` refuses children
    there, e.g. in a Dask worker that has not called
    :func:`cpsched.study.parallel.allow_child_processes`)."""
    return "fork" in mp.get_all_start_methods() and not mp.current_process().daemon


def die_with_parent(parent_pid: int) -> None:  # pragma: no cover - runs in a child
    """Linux: ask for SIGKILL when the parent dies (a killed parent must not leave a child
    running that holds its output pipes open); exit at once if it is already gone."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


def _child(fn: Callable[..., Any], args: tuple[Any, ...], conn: Connection,
           parent_pid: int) -> None:  # pragma: no cover - runs in the child
    die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        msg: tuple[str, Any] = ("value", fn(*args))
    except Exception as exc:  # noqa: BLE001  (sent to the parent, raised there)
        msg = ("error", exc)
    try:
        conn.send(msg)
    except Exception as exc:  # noqa: BLE001  (a value or an exception that does not pickle)
        conn.send(("error", RuntimeError(f"{type(exc).__name__}: {exc}")))
    conn.close()


class ForkedCall:
    """``fn(*args)`` started in a forked child at construction.

    :meth:`result` waits for it and returns its value, or raises the exception it raised
    (the same type, pickled back; one that does not pickle arrives as a ``RuntimeError``
    naming it); :meth:`cancel` kills it.  Use :func:`can_fork` first.

    Raises:
        RuntimeError: from :meth:`result`, when the child ended without an answer (killed,
            or out of memory).
    """

    def __init__(self, fn: Callable[..., Any], *args: Any) -> None:
        ctx = mp.get_context("fork")
        self._conn, child = ctx.Pipe(duplex=False)
        self._proc = ctx.Process(target=_child, args=(fn, args, child, os.getpid()),
                                 daemon=True)
        self._proc.start()
        child.close()

    def result(self) -> Any:
        """The child's value (blocks until it comes); its exception is raised here."""
        try:
            kind, payload = self._conn.recv()
        except EOFError:
            self._proc.join(timeout=5.0)
            raise RuntimeError("child process ended without an answer (exit code "
                               f"{self._proc.exitcode})") from None
        finally:
            self.cancel()
        if kind == "error":
            raise payload
        return payload

    def ready(self, timeout: float = 0.0) -> bool:
        """Whether the child's answer has come (or the child has ended), waiting at most
        ``timeout`` seconds."""
        return bool(self._conn.poll(max(0.0, timeout)))

    def cancel(self) -> None:
        """Kill the child if it still runs, and release the pipe."""
        if self._proc.is_alive():
            self._proc.kill()
        self._proc.join(timeout=5.0)
        self._conn.close()


__all__ = ["ForkedCall", "can_fork", "die_with_parent", "usable_cores"]
