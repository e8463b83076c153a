"""The modulo pattern found by CP-SAT (cpsched/solver/modulo_exact.py, docs/modelling.md §41)."""

from __future__ import annotations

import pytest
from conftest import make
from test_modulo import assert_periodic_timetable, steady_peak

import cpsched.solver.prelude as prelude
from cpsched import solve
from cpsched.graph import memory_buffers
from cpsched.instance import Instance
from cpsched.schedules.modulo import (
    min_period,
    modulo_schedule,
    pattern_peak,
    representatives,
    scan_patterns,
)
from cpsched.solver.modulo_exact import descend, exact_pattern, pattern_actions
from cpsched.validate import validate

#: V placement, fused backward, F = 1 and B = 2, half activations, a V-Min-like limit (the
#: shape of r37-5 in docs/modelling.md §41)
V_FUSED = {"placement": "v", "F": 1, "B": 2, "activation": 0.5}


def _greedy(inst: Instance) -> tuple[int, int]:
    """The greedy's smallest fitting period and the smallest period (ticks)."""
    found = scan_patterns(inst)
    return min(p.period for p in found), min_period(inst)


def test_pattern_actions_are_the_representatives_default_actions() -> None:
    inst = make(4, 1, 16, F=1, B=2, placement="bidirectional", limit=4)
    acts = pattern_actions(inst)
    assert len(acts) == len(set(acts)) == 2 * 2 * inst.num_stages
    assert {a.microbatch for a in acts} == set(representatives(inst)) == {0, 8}


@pytest.mark.parametrize("inst", [
    make(4, 2, 24, limit=2.5, **V_FUSED),
    make(4, 1, 16, F=1, B=2, placement="bidirectional", limit=3, latency=0.1),
    make(4, 2, 16, F=1, I=1, W=1, placement="v", limit=3),
])
def test_every_pattern_found_is_a_periodic_timetable_that_fits(inst: Instance) -> None:
    # the conditions and the steady-state peak checked by brute force (tests/test_modulo.py)
    greedy, _ = _greedy(inst)
    for period in range(greedy, greedy - 4, -1):
        pat, status = exact_pattern(inst, period, deterministic_time=5.0)
        if pat is None:
            assert status in ("INFEASIBLE", "UNKNOWN")
            continue
        assert pat.period == period and status in ("OPTIMAL", "FEASIBLE")
        assert_periodic_timetable(inst, pat)
        assert max(pattern_peak(inst, pat)) <= memory_buffers(inst)[0]
        per = len(representatives(inst))
        long = inst.replace(**{"pipeline.microbatches": per * (
            2 * (pat.span // pat.period) + 6)})
        lp, _ = exact_pattern(long, period, pat, deterministic_time=5.0)
        assert lp is not None  # the offsets do not depend on m, the hint is one
        assert steady_peak(long, lp) == pattern_peak(long, lp) and max(
            pattern_peak(long, lp)) <= memory_buffers(long)[0]


def test_below_the_work_of_a_device_there_is_no_pattern() -> None:
    inst = make(4, 2, 16, limit=4)
    assert exact_pattern(inst, 1)[0] is None
    assert exact_pattern(inst, 0) == (None, "INFEASIBLE")


def test_it_finds_a_shorter_period_than_the_greedy() -> None:
    # p = 4 of r37-5's shape (one tick per time unit): the smallest period is 6, the greedy's
    # patterns fit from 9 on (timed 231), CP-SAT finds one at 8 (timed 210) and proves that
    # none exists at 7 or 6
    inst = make(4, 2, 24, limit=2.5, **V_FUSED)
    assert inst.ticks(1) == 1 and _greedy(inst) == (9, 6)
    greedy = modulo_schedule(inst)
    assert greedy is not None and greedy.makespan == 231
    for period in (6, 7):
        assert exact_pattern(inst, period, deterministic_time=20.0) == (None, "INFEASIBLE")
    start = min((p for p in scan_patterns(inst) if p.period == 9), key=lambda p: p.span)
    sch, stats = descend(inst, start)
    assert sch is not None and validate(sch) == []
    assert stats["period"] == sch.extra["period"] == 8 and sch.makespan == 210
    again, stats2 = descend(inst, start)  # one worker, deterministic limits: reproducible
    assert again is not None and again.makespan == sch.makespan and stats2 == stats


def test_descend_stops_at_once_when_told() -> None:
    inst = make(4, 2, 24, limit=2.5, **V_FUSED)
    start = scan_patterns(inst)[0]
    assert descend(inst, start, stop=lambda: True) == (
        None, {"periods": 0, "period": inst.from_ticks(start.period)})


def test_solve_takes_the_shorter_pattern(monkeypatch: pytest.MonkeyPatch) -> None:
    inst = make(4, 2, 24, limit=2.5, **V_FUSED)
    greedy = modulo_schedule(inst)
    assert greedy is not None
    res = solve(inst, time_limit=None, workers=1, parameters={"max_deterministic_time": 0.5})
    assert res.schedule is not None and validate(res.schedule) == []
    mp = res.stats["modulo"]
    assert mp["exact_periods"] >= 1 and mp["period"] < greedy.extra["period"]
    assert mp["makespan"] <= greedy.makespan and res.makespan <= mp["makespan"]
    monkeypatch.setattr(prelude.modulo_exact, "descend", lambda *a, **k: (None, {"periods": 0}))
    res = solve(inst, time_limit=None, workers=1, parameters={"max_deterministic_time": 0.5})
    assert res.stats["modulo"]["period"] == greedy.extra["period"]
