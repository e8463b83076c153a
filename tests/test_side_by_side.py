"""CP-SAT runs side by side in threads with one stop handle
(cpsched/solver/side_by_side.py, docs/modelling.md §36)."""

from __future__ import annotations

import threading

import pytest

from cpsched.solver.side_by_side import SolverHub, side_by_side


class _Solver:
    """Stands for a ``CpSolver``: counts its ``stop_search()`` calls."""

    def __init__(self) -> None:
        self.stops = 0

    def stop_search(self) -> None:
        self.stops += 1


def test_lanes_run_at_the_same_time() -> None:
    # each lane waits for the other at a barrier: only threads running together get past it
    barrier = threading.Barrier(2, timeout=30)
    passed: list[int] = []

    def lane(k: int):  # noqa: ANN202
        def run(hub: SolverHub) -> None:
            barrier.wait()
            passed.append(k)
        return run

    side_by_side([lane(0), lane(1)], on_solver=None, stopped=lambda: False)
    assert sorted(passed) == [0, 1]


def test_one_stop_reaches_every_lane() -> None:
    # on_solver gets the hub once; its stop_search() stops each lane's registered solver, and
    # each lane then sees done()
    solvers = [_Solver(), _Solver()]
    registered = threading.Barrier(3, timeout=30)
    stopped = threading.Event()
    hubs: list[SolverHub] = []
    seen: list[bool] = []

    def lane(solver: _Solver):  # noqa: ANN202
        def run(hub: SolverHub) -> None:
            hub.add(solver)
            registered.wait()
            stopped.wait(30)
            seen.append(hub.done())
        return run

    def stopper() -> None:
        registered.wait()
        hubs[0].stop_search()
        stopped.set()

    t = threading.Thread(target=stopper)
    t.start()
    side_by_side([lane(s) for s in solvers], on_solver=hubs.append, stopped=lambda: False)
    t.join()
    assert len(hubs) == 1 and [s.stops for s in solvers] == [1, 1] and seen == [True, True]


def test_the_callers_stop_is_seen_by_every_lane() -> None:
    seen: list[bool] = []
    side_by_side([lambda hub: seen.append(hub.done())] * 2, on_solver=None,
                 stopped=lambda: True)
    assert seen == [True, True]


def test_an_error_in_one_lane_stops_the_other_and_is_raised() -> None:
    # the failing lane is the second: the first is not waited for before the error is seen
    other = _Solver()
    started = threading.Event()

    def failing(hub: SolverHub) -> None:
        started.wait(30)
        raise ValueError("lane failed")

    def waiting(hub: SolverHub) -> None:
        hub.add(other)
        started.set()
        for _ in range(3000):  # until the hub is stopped (at most 30 s)
            if hub.done():
                return
            threading.Event().wait(0.01)

    with pytest.raises(ValueError, match="lane failed"):
        side_by_side([waiting, failing], on_solver=None, stopped=lambda: False)
    assert other.stops == 1
