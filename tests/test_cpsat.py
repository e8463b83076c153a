"""CP-SAT's solve kept going through OR-Tools' internal errors (cpsched/solver/cpsat.py,
docs/modelling.md §44): a stored window model whose presolve throws in OR-Tools 9.15 is still
solved to its optimum, a solver that always throws gives UNKNOWN, our own errors pass through,
and the window search and ``solve`` finish with a valid schedule when CP-SAT throws."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest
from conftest import make
from ortools.sat.python import cp_model

import cpsched.solver.cpsat as cpsat
from cpsched import solve
from cpsched.schedules.transforms import sequential_schedule
from cpsched.solver.cpsat import solve_model
from cpsched.validate import validate

DATA = Path(__file__).parent / "data" / "cpsat"


def _stored_window() -> cp_model.CpModel:
    """A window of the window search on instance 7 of ``make_scale_instances.py --random 40``
    (p24 loop v4 m48, split, limit 48; 417 actions, plateau objective, the incumbent as hint)
    whose presolve raises ``IndexError: absl::btree_map::at`` in OR-Tools 9.15.6755."""
    m = cp_model.CpModel()
    text = gzip.decompress((DATA / "window-presolve-error.pb.txt.gz").read_bytes()).decode()
    assert m.proto.parse_text_format(text)
    return m


def test_the_stored_window_is_solved_to_its_optimum() -> None:
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_deterministic_time = 10.0
    code = solve_model(solver, _stored_window())
    # the plateau objective: 417-action window, proven with presolve off (and without hint)
    assert code == cp_model.OPTIMAL
    assert solver.objective_value == 61662


def test_without_the_hint_presolve_solves_it_too() -> None:
    # the error needs the hint (google/or-tools#5288): the model itself is fine
    m = _stored_window()
    m.clear_hints()
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_deterministic_time = 10.0
    assert solver.solve(m) == cp_model.OPTIMAL and solver.objective_value == 61662


class _Throwing(cp_model.CpSolver):
    """A solver whose ``solve`` raises ``error`` while presolve is on (or always) on a model
    with variables (an empty model, which has nothing to presolve, is solved)."""

    def __init__(self, error: BaseException, always: bool = False) -> None:
        super().__init__()
        self.error, self.always, self.calls = error, always, 0

    def solve(self, model: cp_model.CpModel, callback: Any = None) -> Any:
        self.calls += 1
        if len(model.proto.variables) and (self.always or self.parameters.cp_model_presolve):
            raise self.error
        return super().solve(model) if callback is None else super().solve(model, callback)


def _tiny() -> tuple[cp_model.CpModel, Any]:
    m = cp_model.CpModel()
    x = m.new_int_var(0, 10, "x")
    m.add(x >= 3)
    m.minimize(x)
    return m, x


@pytest.mark.parametrize("error", [IndexError("absl::btree_map::at"),
                                   RuntimeError("std::exception")])
def test_second_try_without_presolve(error: BaseException) -> None:
    m, x = _tiny()
    solver = _Throwing(error)
    before = dict(cpsat.recovered)
    assert solve_model(solver, m) == cp_model.OPTIMAL and solver.value(x) == 3
    assert solver.calls == 2 and not solver.parameters.cp_model_presolve
    assert cpsat.recovered["retried"] == before["retried"] + 1
    assert cpsat.recovered["failed"] == before["failed"]


def test_both_tries_failing_gives_unknown() -> None:
    m, _ = _tiny()
    solver = _Throwing(IndexError("absl::btree_map::at"), always=True)
    before = dict(cpsat.recovered)
    assert solve_model(solver, m) == cp_model.UNKNOWN
    assert solver.calls == 3  # the model twice, then an empty one: the solver has a response
    assert solver.deterministic_time == 0 and solver.wall_time >= 0
    assert cpsat.recovered["failed"] == before["failed"] + 1


def test_our_own_errors_are_not_caught() -> None:
    m, _ = _tiny()
    with pytest.raises(ValueError):
        solve_model(_Throwing(ValueError("ours")), m)
    with pytest.raises(KeyboardInterrupt):
        solve_model(_Throwing(KeyboardInterrupt()), m)


def test_callbacks_are_passed_on() -> None:
    m, x = _tiny()
    seen: list[int] = []

    class Cb(cp_model.CpSolverSolutionCallback):
        def on_solution_callback(self) -> None:
            seen.append(self.value(x))

    assert solve_model(_Throwing(IndexError("x")), m, Cb()) == cp_model.OPTIMAL
    assert seen and seen[-1] == 3


@pytest.mark.parametrize("always", [False, True])
def test_solve_finishes_when_cp_sat_throws(monkeypatch: pytest.MonkeyPatch,
                                           always: bool) -> None:
    # every CP-SAT call in this process (windows, relaxations; the full model without a
    # deadline runs here too) raises while presolve is on, or always: the window search and
    # the model still end with a valid schedule no longer than the start
    real = cp_model.CpSolver.solve

    def throwing(self: cp_model.CpSolver, model: Any, callback: Any = None) -> Any:
        if len(model.proto.variables) and (always or self.parameters.cp_model_presolve):
            raise IndexError("absl::btree_map::at")
        return real(self, model) if callback is None else real(self, model, callback)

    monkeypatch.setattr(cp_model.CpSolver, "solve", throwing)
    before = dict(cpsat.recovered)
    inst = make(4, 2, 16, limit=6)
    seq = sequential_schedule(inst)
    res = solve(inst, time_limit=None, workers=1, method="search",
                candidates={"sequential": seq}, parameters={"max_deterministic_time": 0.5})
    assert not validate(res.schedule)
    assert res.makespan <= seq.makespan
    assert cpsat.recovered["retried"] > before["retried"]
    if not always:  # every call answered by its second try: no window lost
        assert cpsat.recovered["failed"] == before["failed"]
        assert res.makespan < seq.makespan
    else:  # no window solved (what no CP-SAT finds, e.g. the modulo pattern, still counts)
        assert cpsat.recovered["failed"] > before["failed"]
        assert res.stats["window_search"]["improvements"] == 0
