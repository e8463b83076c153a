"""The counting bound's integer program beside the window search (docs/modelling.md §57):
the child's bound is the integer program's, joins the certified bound, and a child that is
stopped, late or failing costs nothing but its bound."""

from __future__ import annotations

import dataclasses
import json
import time
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import make

from cpsched import solve
from cpsched.solver import count_beside, facade, prelude
from cpsched.solver.count_bound import count_bound, integer_bound


def _shape() -> tuple[Any, ...]:
    """The limit-24 row's shape at m = 32 (docs/modelling.md §56: LP 1310, integer 1315,
    the optimum in [1315, 1329]) with its combinatorial bound, graph and heads and tails."""
    inst = make(16, 2, 32, F=5, B=10, limit=24)
    lb, g, _, _, ordered = facade._bounds(inst)  # noqa: SLF001
    return inst, lb, g, ordered


def test_integer_bound_is_the_integer_stage_of_count_bound() -> None:
    """Run alone from the LP's end, the integer stage proves what ``count_bound`` with
    ``integer`` does: 1315 (a generous limit: the programs take seconds)."""
    inst, lb, g, ordered = _shape()
    r = count_bound(inst, g, ordered, lb, 1329, [0])
    assert (r.lp_bound, r.complete) == (1310, True) and r.lp_seconds > 0
    told: list[tuple[int, int, bool]] = []
    got = integer_bound(inst, g, ordered, 0, r.lp_bound, 1329, 600.0, r.lp_seconds,
                        on_refuted=lambda b, grid, integer: told.append((b, grid, integer)))
    assert (got.bound, got.complete, got.grid) == (1315, True, 5) and got.programs >= 2
    assert got.lps == 0  # the LP search had ended
    assert 0 < got.seconds < 600 and told == [(1315, 5, True)]  # 1310 refuted: 1315 at least
    assert count_bound(inst, g, ordered, lb, 1329, [0], integer=True).bound == got.bound


def test_integer_bound_goes_on_with_an_lp_search_cut_short() -> None:
    """From the combinatorial bound with the LP search not ended (docs/modelling.md §61),
    the child's function first finishes the LPs (1305 refuted: 1310, the LP's own bound)
    and then the integer programs (1315), each bound told with what proved it."""
    inst, lb, g, ordered = _shape()
    assert lb == 1305
    told: list[tuple[int, int, bool]] = []
    got = integer_bound(inst, g, ordered, 0, lb, 1329, 600.0, 0.0, lp_done=False,
                        on_refuted=lambda b, grid, integer: told.append((b, grid, integer)))
    assert (got.bound, got.complete, got.grid) == (1315, True, 5)
    assert got.lps >= 2 and got.programs >= 2  # 1305 refuted, 1310 feasible; then programs
    assert told == [(1310, 5, False), (1315, 5, True)]


def _stop(requested: bool = False) -> SimpleNamespace:
    return SimpleNamespace(requested=requested)


def test_prelude_starts_the_child_and_collect_joins_its_bound() -> None:
    """With a deadline and two workers the LP runs in the step and the integer program in
    the child; :func:`count_beside.collect` raises the bound to the child's and leaves
    plain stats (JSON) behind."""
    inst, lb, g, ordered = _shape()
    deadline = time.perf_counter() + 600.0
    bound, stats = prelude.count(inst, g, ordered, lb, 1329, deadline, _stop(), workers=2)
    assert bound == 1310 and stats is not None and stats["programs"] == 0
    assert isinstance(stats[count_beside.KEY], count_beside.Beside)
    pre: dict[str, Any] = {"count": stats}
    handle = stats[count_beside.KEY]
    assert handle.call.ready(600.0)  # wait for the child here, not in collect's 2 s
    assert count_beside.collect(pre, bound, deadline) == 1315
    assert stats["bound"] == 1315 and stats["programs"] >= 2
    assert stats[count_beside.KEY]["complete"] is True
    json.dumps(pre)
    assert count_beside.collect(pre, 1320, deadline) == 1320  # collected once


def test_a_child_goes_on_with_an_lp_search_the_step_cut_short() -> None:
    """An LP search the step's share ended early (``complete`` False) no longer keeps the
    child from starting: it finishes the LPs, then the programs, and ``collect`` counts
    the child's LPs with the step's (docs/modelling.md §61)."""
    from cpsched.solver.count_bound import CountBound

    inst, lb, g, ordered = _shape()
    r = CountBound(lb, None, 5, 266, 1, 0.05, False, 0, lb, 0.05)  # 1 LP, nothing refuted
    handle = count_beside.start(inst, g, ordered, 0, r, 1329, time.perf_counter() + 600.0,
                                _stop())
    assert isinstance(handle, count_beside.Beside)
    pre: dict[str, Any] = {"count": {"bound": inst.from_ticks(lb), "device": None, "grid": 0,
                                     "lps": 1, "programs": 0, count_beside.KEY: handle}}
    assert handle.call.ready(600.0)
    assert count_beside.collect(pre, lb, time.perf_counter() + 600.0) == 1315
    cb = pre["count"]
    assert cb[count_beside.KEY]["complete"] is True and cb[count_beside.KEY]["lps"] >= 2
    assert cb["lps"] == 1 + cb[count_beside.KEY]["lps"] and cb["programs"] >= 2
    assert (cb["device"], cb["grid"]) == (0, 5)
    done = dataclasses.replace(r, complete=True, lp_bound=1329)  # met the schedule: none
    assert count_beside.start(inst, g, ordered, 0, done, 1329, time.perf_counter() + 600.0,
                              _stop()) is None


def test_no_child_without_a_deadline_or_a_second_worker() -> None:
    inst, lb, g, ordered = _shape()
    for deadline, workers in ((None, 2), (time.perf_counter() + 600.0, 1)):
        _, stats = prelude.count(inst, g, ordered, lb, 1329, deadline, _stop(), workers)
        assert stats is not None and count_beside.KEY not in stats
    assert not count_beside.applies(None, 2) and not count_beside.applies(1.0, 1)


def _slow(*_: object, on_refuted: Any, lp_done: bool) -> tuple[int, int, bool, float, int]:
    """Proves 42 on a grid of 5 (an LP when ``lp_done`` is False), then takes longer than
    anyone waits."""
    on_refuted(42, 5, lp_done)
    time.sleep(60)
    return 10**9, 9, True, 60.0, 5  # never reached: the child is killed


def _fail(*_: object, on_refuted: Any, lp_done: bool) -> tuple[int, int, bool, float, int]:
    on_refuted(42, 5, lp_done)
    raise ValueError("a program that failed")


def _beside(monkeypatch: pytest.MonkeyPatch, fn: Any, stop: SimpleNamespace,
            lp_done: bool = True) -> tuple[dict[str, Any], count_beside.Beside]:
    monkeypatch.setattr(count_beside, "integer_bound", fn)
    inst = make(2, 1, 2, limit=2)
    handle = count_beside.Beside(inst, None, None, 0, 0, 10, 60.0, 0.1, stop,
                                 lp_done=lp_done)
    return {"count": {"bound": 0, "device": None, "grid": 0, "programs": 0,
                      count_beside.KEY: handle}}, handle


@pytest.mark.parametrize("lp_done", [True, False])
@pytest.mark.parametrize("case", ["stopped", "late", "failed"])
def test_a_stopped_late_or_failed_child_keeps_what_it_proved(
        monkeypatch: pytest.MonkeyPatch, case: str, lp_done: bool) -> None:
    """Ctrl-C (the stop asked), no answer by the deadline, or an exception in the child:
    the child is gone, collecting takes no longer than the wait it allows, and the bound it
    had proved (shared memory) is used — not complete — and counted as the program or the
    LP (the LP search continued, §61) that proved it."""
    stop = _stop(case == "stopped")
    pre, handle = _beside(monkeypatch, _fail if case == "failed" else _slow, stop, lp_done)
    assert handle.call.ready(60.0) if case == "failed" else True
    deadline = time.perf_counter() + 60.0
    while handle.shared[0] != 42 and time.perf_counter() < deadline:  # the child's first proof
        time.sleep(0.01)
    t = time.perf_counter()
    assert count_beside.collect(pre, 7, time.perf_counter()) == 42
    assert time.perf_counter() - t < count_beside.WAIT_SECONDS + 5.0
    cb = pre["count"]
    assert cb[count_beside.KEY]["complete"] is False
    assert (cb["programs"], cb["lps"], cb[count_beside.KEY]["lps"]) == (
        (1, 0, 0) if lp_done else (0, 1, 1))
    assert (cb["device"], cb["grid"]) == (0, handle.inst.from_ticks(5))
    assert cb["bound"] == handle.inst.from_ticks(42)
    assert count_beside.collect(pre, 50, None) == 50  # collected once
    assert not handle.call._proc.is_alive()  # noqa: SLF001


def test_collect_without_a_child_is_the_bound() -> None:
    assert count_beside.collect({}, 5, None) == 5
    assert count_beside.collect({"count": None}, 5, None) == 5
    assert count_beside.collect({"count": {"bound": 1}}, 5, None) == 5
    none = {"count": {"bound": 1, count_beside.KEY: None}}  # no child started
    assert count_beside.collect(none, 5, None) == 5 and none["count"][count_beside.KEY] is None


def test_solve_with_two_workers_certifies_a_sound_bound() -> None:
    """End to end with a time limit and two workers: whatever the child managed in the
    time, the bound lies between the LP's (1310, the step's own) and the schedule, the
    stats are plain data, and a child that answered proved at least the LP's bound."""
    inst, _, _, _ = _shape()
    res = solve(inst, time_limit=30.0, workers=2, method="search")
    cb = res.stats["count"]
    assert cb is not None  # the LPs take 0.1 s of the step's share
    beside = cb[count_beside.KEY]  # None only when under 10 s were left for the child
    assert beside is None or (beside["seconds"] >= 0 and isinstance(beside["complete"], bool))
    assert 1310 <= (res.lower_bound or 0) <= (res.makespan or 0)
    assert cb["bound"] <= (res.lower_bound or 0)
    json.dumps(res.stats, default=str)
