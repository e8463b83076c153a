"""The pair window bound (docs/modelling.md §28): values by hand, never above an optimum
(brute force, CP-SAT proofs) or a valid schedule, and nothing without an overlap cost."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import INSTANCES, make
from hypothesis import HealthCheck, given, settings
from test_bounds import assert_below_a_proven_optimum, assert_below_every_valid_schedule
from test_solver_overlap import TINY, brute_force, overlap_instances

from cpsched.bounds import pair_fill_drain_bound
from cpsched.graph import overlap_lower_bound
from cpsched.instance import Instance, load_instance
from cpsched.pair_window_bound import pair_window_bound
from cpsched.solver import solve
from cpsched.validate import validate

BIDIRECTIONAL = INSTANCES / "scale" / "p16-dualpipe-m64-profiled.toml"
R10_1 = Path(__file__).parent / "data" / "r10-1-bidirectional.toml"


def test_nothing_without_an_overlap_cost() -> None:
    assert pair_window_bound(make(4, 1, 8), lower=17) == 17


def test_pairs_only_where_both_halves_are_available() -> None:
    # p=2 m=4 F=1 B=2, pair 2 (saves 1; docs/modelling.md §28).  Device 0 runs F(0) from 0,
    # its first B(0) from 4 on; a pair F(0)+B(0) needs another microbatch's F(0) then.  The
    # LP of device 0: 12 = the brute-force optimum (the relaxed bound of §4.3: 11)
    inst = make(2, 1, 4, F=1, B=2, overlap=2)
    assert overlap_lower_bound(inst) == 11
    assert pair_window_bound(inst) == 12 == brute_force(inst, 15)


@pytest.mark.parametrize("case", range(len(TINY)))
def test_below_the_brute_force_optimum(case: int) -> None:
    p, v, m, placement, costs = TINY[case]
    inst = make(p, v, m, placement=placement, **costs)
    best = solve(inst, workers=1, time_limit=None)
    assert pair_window_bound(inst) <= brute_force(inst, inst.ticks(best.makespan))


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(overlap_instances())
def test_below_every_valid_schedule(inst: Instance) -> None:
    assert_below_every_valid_schedule(inst, pair_window_bound(inst))


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(overlap_instances())
def test_below_a_proven_optimum(inst: Instance) -> None:
    # CP-SAT's proof uses only §4.3's bound, never this one
    assert_below_a_proven_optimum(inst, lambda opt: pair_window_bound(inst))


def test_on_a_random_bidirectional_instance_at_1f1b_memory() -> None:
    # p=8 m=32 bidirectional, random costs, pairs, limit 8 (benchmarks/make_scale_instances.py
    # --random 10, instance 1).  §4.3 and §16.1 credit device 0 with 16 pairs F(0)+B(0)
    # (0.81 each): 128 - 12.96 = 115.04.  Its forwards of stage 0 can pair only once their
    # own backwards come back, and until then device 0 has little else: 118.02
    inst = load_instance(R10_1)
    assert inst.from_ticks(overlap_lower_bound(inst)) == pytest.approx(115.04)
    assert inst.from_ticks(pair_fill_drain_bound(inst)) == pytest.approx(115.04)
    assert inst.from_ticks(pair_window_bound(inst)) == pytest.approx(118.02)


def test_deadline_keeps_what_was_refuted() -> None:
    inst = load_instance(BIDIRECTIONAL)
    assert pair_window_bound(inst, lower=5, deadline=0.0) == 5


def test_solve_reports_it() -> None:
    # solve runs it after the warm start (docs/modelling.md §28) and keeps the larger bound
    inst = load_instance(R10_1)
    res = solve(inst, workers=1, time_limit=None, parameters={"max_deterministic_time": 1.0})
    assert res.stats["pair_windows"]["before"] == pytest.approx(115.04)
    assert res.stats["pair_windows"]["bound"] == pytest.approx(118.02)
    assert res.lower_bound >= 118.02 - 1e-9
    assert validate(res.schedule) == []
