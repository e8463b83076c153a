"""``cpsched.forked``: a function in a forked child, its value or its exception back."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
import time

import pytest

from cpsched.forked import ForkedCall, can_fork, usable_cores


class OddError(ValueError):
    """An exception of the project's kind: it must come back as itself."""


def _square(x: int) -> tuple[int, int]:
    return x * x, os.getpid()


def _raise(message: str) -> None:
    raise OddError(message)


def _unpicklable() -> object:
    return threading.Lock()


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _sleep() -> None:
    time.sleep(60)


def test_value_comes_back_from_another_process() -> None:
    value, pid = ForkedCall(_square, 12).result()
    assert value == 144 and pid != os.getpid()


def test_exception_is_raised_in_the_parent_as_itself() -> None:
    call = ForkedCall(_raise, "field x = 3: not allowed")
    with pytest.raises(OddError, match="field x = 3"):
        call.result()


def test_a_value_that_does_not_pickle_is_an_error_naming_it() -> None:
    with pytest.raises(RuntimeError, match="pickle"):
        ForkedCall(_unpicklable).result()


def test_a_child_that_dies_is_an_error_with_its_exit_code() -> None:
    with pytest.raises(RuntimeError, match="without an answer.*-9"):
        ForkedCall(_die).result()


def test_ready_waits_at_most_its_timeout() -> None:
    call = ForkedCall(_sleep)
    t = time.perf_counter()
    assert not call.ready(0.2) and time.perf_counter() - t < 5.0
    call.cancel()
    done = ForkedCall(_square, 3)
    assert done.ready(30.0) and done.result()[0] == 9


def test_cancel_kills_a_running_child() -> None:
    call = ForkedCall(_sleep)
    t = time.perf_counter()
    call.cancel()
    assert time.perf_counter() - t < 5.0
    assert not call._proc.is_alive() and call._proc.exitcode == -signal.SIGKILL


def test_the_child_ignores_ctrl_c() -> None:
    # the parent decides when a child stops (it kills it); a Ctrl-C to the process group
    # must not end the child with a traceback of its own
    call = ForkedCall(_square, 3)
    assert call.result()[0] == 9
    call = ForkedCall(_sleep)
    time.sleep(0.5)  # past the child's SIG_IGN
    os.kill(call._proc.pid, signal.SIGINT)
    time.sleep(0.3)
    assert call._proc.is_alive()
    call.cancel()


def test_no_fork_in_a_daemonic_process(monkeypatch: pytest.MonkeyPatch) -> None:
    assert can_fork()  # Linux, a normal process
    monkeypatch.setattr(mp.current_process(), "_config",
                        {**mp.current_process()._config, "daemon": True})
    assert not can_fork()


def test_usable_cores_is_the_affinity() -> None:
    cores = len(os.sched_getaffinity(0))
    assert usable_cores() == cores >= 1
    assert usable_cores(1) == 1 and usable_cores(0) == 1 and usable_cores(cores + 8) == cores
