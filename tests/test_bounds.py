"""Memory-aware lower bounds (cpsched.bounds): known values, and never above a proven optimum.

The optimum used as the oracle comes from the CP-SAT model given only the plain bound (critical
path, head + work + tail), so a wrong memory bound cannot have helped prove it.
"""

from __future__ import annotations

from collections.abc import Callable

import networkx as nx
import pytest
from conftest import INSTANCES, make
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from ortools.sat.python import cp_model
from test_solver_overlap import TINY, brute_force, overlap_instances

from cpsched.bounds import (
    WindowItem,
    area_bound,
    area_span,
    fill_drain_bound,
    fractional_knapsack,
    pair_fill_drain_bound,
    window_idle,
)
from cpsched.graph import build_task_graph, lower_bound, overlap_lower_bound, pair_savings
from cpsched.instance import Instance, load_instance
from cpsched.schedules import run_all
from cpsched.schedules.registry import run_schedule
from cpsched.solver import PipelineModel, best_warm_start, solve
from cpsched.validate import validate


def proven_optimum(inst: Instance) -> int | None:
    """Optimal makespan in ticks proven by CP-SAT with the plain bound only (§4.3's with an
    overlap cost; 1 worker,
    deterministic budget), or None if not proven."""
    lb = (lower_bound(inst).value if inst.overlap_forward_backward is None
          else overlap_lower_bound(inst))
    _, rows, horizon = best_warm_start(inst, run_all(inst))
    model = PipelineModel(inst, horizon, min(lb, horizon))
    if inst.overlap_forward_backward is None:  # (a pair model takes a PairSolution hint)
        model.add_hint({a.action: inst.ticks(a.start) for a in rows})
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_deterministic_time = 20.0
    code = solver.solve(model.model)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    value = round(solver.objective_value)
    return value if solver.best_objective_bound >= value - 1e-9 else None


def assert_below_a_proven_optimum(inst: Instance, bound: Callable[[int], int]) -> None:
    """``bound(optimum)`` (ticks; the optimum may serve as its upper end) is at most the
    optimum CP-SAT proves with the plain bound only (:func:`proven_optimum`); an example
    without a proof is rejected (``assume``)."""
    opt = proven_optimum(inst)
    assume(opt is not None)
    assert bound(opt) <= opt


def test_fractional_knapsack() -> None:
    # ratio order: 3/1 first (2 copies = 6 work, 2 weight), then half of 4/2 = 2
    assert fractional_knapsack([(4, 2, 5), (3, 1, 2)], 3) == pytest.approx(8.0)
    assert fractional_knapsack([(5, 0, 3), (1, 1, 100)], 2) == pytest.approx(17.0)
    assert fractional_knapsack([], 10) == 0.0


def test_article_memory6_known_values() -> None:
    # p=4 v=2 m=8 F=5 B=10, limit 6: optimum 325 (docs/spec.md §6); plain bound 285
    inst = make(4, 2, 8, F=5, B=10, limit=6)
    value, per_device = fill_drain_bound(inst)
    assert lower_bound(inst).value == 285
    # device 0: backward first possible at 8*5 + 7*10 - 10... = head of B(4, 0) = 70;
    # 6 forwards (30) fit before it: idle 40 in the fill, 35 in the drain
    assert per_device[0].idle_fill == pytest.approx(40.0, abs=0.01)  # less a 1e-3 margin
    assert per_device[0].idle_drain == pytest.approx(35.0, abs=0.01)
    assert value == 315 <= 325


def test_scale_instance_values() -> None:
    # issue 9's instances: p=16 v=2 m=64 loop F=5 B=10 limit 24 (plain bound 2145)
    loop = make(16, 2, 64, F=5, B=10, limit=24)
    assert lower_bound(loop).value == 2145
    assert fill_drain_bound(loop)[0] == 2265
    # V-Half level: p=16 V placement, F=I=W=1, activation 0.5, limit 9 (plain bound 399)
    vhalf = make(16, 2, 64, F=1, I=1, W=1, activation=0.5, limit=9, placement="v")
    assert lower_bound(vhalf).value == 399
    assert fill_drain_bound(vhalf)[0] == 425


def test_fill_drain_reach_on_the_v_min_scale_instance() -> None:
    # p=16 V m=128 profiled (last stage F 1.4, W 1.105; latency 0.016), limit 6.67 of
    # half-activations 0.5.  Device 0 (stages 0 and 31), work 128 * 6.155 = 787.84.
    # Fill: its first backward I(31, 0) starts at 31 + 30 * 0.016 + 1.4 = 32.88; F(31, .)
    # starts at 31.48 at the earliest, so only 1.4 of it fits: 1.4 + (6.67 - 0.5) / 0.5 * 1
    # = 13.74 busy.  Drain: the last forward's tail is 32 + 0.48 + 0.65 = 33.13; I(31, .)
    # must end 32.13 before the end, so one I(31)+W(31) unit (2.105), then I(0)+W(0) units
    # (1.65 per 0.5): 2.105 + 12.34 * 1.65 = 22.466 busy.  (Without the reach: 807.094.)
    inst = load_instance(INSTANCES / "scale" / "p16-v-m128-vmin-profiled.toml")
    idle_fill = 32.88 - (1.4 + 12.34)
    idle_drain = 33.13 - (2.105 + 12.34 * 1.65)
    assert inst.from_ticks(fill_drain_bound(inst)[0]) == pytest.approx(
        787.84 + idle_fill + idle_drain, abs=0.002)


def test_window_idle_by_hand() -> None:
    # items (ticks, reach), weight, copies: A = 4 ticks anywhere, weight 1; B = 3 ticks that
    # cannot use the window's last 8 ticks, weight 1.  Limit 3, window >= 10:
    # at Y = 10, B has 2 ticks it can use (x_B = 2/3) and A 8 (x_A = 2): held 2.67, idle 0;
    # limit 2: x_A + x_B <= 2, so the work is at most 4 * 2 = 8 at any Y: idle 2
    items = [WindowItem(((4, 0),), 1.0, 5, 0), WindowItem(((3, 8),), 1.0, 5, 1)]
    assert window_idle(items, 3, 10) == pytest.approx(0.0, abs=0.01)
    assert window_idle(items, 2, 10) == pytest.approx(2.0, abs=0.01)
    # an item that needs a longer window than the shortest one, usable only past its reach:
    # at Y = 10 only A (idle 6); at Y >= 12 B adds at most Y - 12, so idle >= 8
    late = [WindowItem(((4, 0),), 1.0, 1, 0), WindowItem(((5, 12),), 0.0, 1, 1)]
    assert window_idle(late, 1, 10) == pytest.approx(6.0, abs=0.01)
    # a shared cap: two kinds of unit of one stage, at most 1 of them in all: 10 - 4
    shared = [WindowItem(((4, 0),), 0.0, 1, 7), WindowItem(((3, 0),), 0.0, 1, 7)]
    assert window_idle(shared, 1, 10, {7: 1}) == pytest.approx(6.0, abs=0.01)
    assert window_idle(shared, 1, 0) == 0.0


def test_no_limit_is_plain_device_bound() -> None:
    inst = make(4, 2, 8, F=5, B=10)
    value, per_device = fill_drain_bound(inst)
    assert all(b.idle_fill == 0 and b.idle_drain == 0 for b in per_device)
    assert value <= lower_bound(inst).value
    assert area_bound(inst) == 0


def test_area_span_by_hand() -> None:
    # area 8 under limit 4, each forward/release 1 long and holding/freeing 1: in a window D
    # the held memory is at most h(u) = min(4, 1 + u, 1 + D - u).  D = 4: the ramps meet at
    # u = 2 (h = 3), integral 2 * (1 + 3) / 2 * 2 = 8 = the area; D = 3: 2 * (1 + 2.5) / 2
    # * 1.5 = 5.25 < 8.  Without ramps (zero-length actions) 8 / 4 = 2
    assert area_span(8, 4, 1, 1, 1) == 4
    assert area_span(8, 4, 1, 0, 0) == 2
    # a long window: both ramps reach the limit (3 ticks each, losing 4.5 of area each)
    # and D = (area + 9) / limit: area 91 -> D = 25
    assert area_span(91, 4, 1, 1, 1) == 25
    assert area_span(0, 4, 1, 1, 1) == 0


def test_area_bound_ramps_on_the_memory_starved_scale_instance() -> None:
    # p=32 v=4 m=64 split, profiled, limit 8 (a quarter of 1F1B's): the area bound binds.
    # Without the ramps: t0 + tau + A / L = 1308.624.  Forwards of 1 holding 0.25 fill the
    # limit in 31: area lost 8 * 31 - 0.25 * (31 + 31**2 / 2) = 120.125; weight gradients
    # of 0.65 drain it, losing 0.65 times that; both over the limit 8
    inst = load_instance(INSTANCES / "scale" / "p32-loop-v4-m64-lim8-profiled.toml")
    lost = 8 * 31 - 0.25 * (31 + 31**2 / 2)
    assert inst.from_ticks(area_bound(inst)) == pytest.approx(
        1308.624 + (lost + 0.65 * lost) / 8, abs=0.002)


@st.composite
def limited_instances(draw) -> Instance:
    placement = draw(st.sampled_from(["loop", "loop", "v", "bidirectional"]))
    p = draw(st.sampled_from([2, 3])) if placement != "bidirectional" else 2
    v = 2 if placement == "v" else (1 if placement == "bidirectional" else draw(st.integers(1, 2)))
    m = draw(st.sampled_from([2, 4])) if placement == "bidirectional" else draw(st.integers(2, 5))
    split = draw(st.booleans())
    S = p * v
    cost = st.integers(1, 4)
    act = draw(st.lists(st.sampled_from([0.5, 1, 2]), min_size=S, max_size=S))
    inst = make(p, v, m, F=draw(cost), B=draw(cost), I=draw(cost) if split else None,
                W=draw(cost) if split else None, placement=placement,
                latency=draw(st.sampled_from([0, 0, 1])), activation=act,
                released_by_input=draw(st.sampled_from([0.0, 0.5])) if split else 0.0)
    lo = inst.min_memory_limit()
    limit = lo + draw(st.sampled_from([0, 0, 0.5, 1, 2, 3]))
    return inst.with_memory_limit(limit)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(limited_instances())
def test_memory_bounds_never_exceed_a_proven_optimum(inst: Instance) -> None:
    opt = proven_optimum(inst)
    if opt is None:
        return
    assert fill_drain_bound(inst)[0] <= opt
    assert area_bound(inst) <= opt


@st.composite
def starved_instances(draw) -> Instance:
    """Larger instances with tight limits and zero-cost actions allowed: where the area
    bound's ramps bind, and where a zero-length forward or release removes a ramp."""
    placement = draw(st.sampled_from(["loop", "v", "bidirectional"]))
    p = draw(st.integers(1, 3)) * 2 if placement == "bidirectional" else draw(st.integers(2, 6))
    v = 2 if placement == "v" else (1 if placement == "bidirectional" else draw(st.integers(1, 3)))
    m = 2 * draw(st.integers(1, 6)) if placement == "bidirectional" else draw(st.integers(2, 12))
    split = draw(st.booleans())
    cost = st.sampled_from([0, 0.5, 1, 2, 3])
    inst = make(p, v, m, F=draw(cost), B=draw(cost) + 1, I=draw(cost) + 0.5 if split else None,
                W=draw(cost) if split else None, placement=placement,
                latency=draw(st.sampled_from([0, 0.25])),
                activation=draw(st.sampled_from([0.25, 0.5, 1])),
                released_by_input=draw(st.sampled_from([0.0, 0.5, 1.0])) if split else 0.0)
    return inst.with_memory_limit(inst.min_memory_limit() + draw(st.sampled_from([0, 0.5, 2])))


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(starved_instances())
def test_area_bound_never_exceeds_a_valid_schedule(inst: Instance) -> None:
    # every valid known schedule, and the list scheduler's, is a feasible point: the bound
    # (docs/modelling.md §11, with its ramps) may not exceed any of them
    bound = area_bound(inst)
    valid = [s for s in run_all(inst).values() if not validate(s)]
    assume(valid)  # at the smallest limit no known schedule may fit
    assert all(bound <= inst.ticks(s.makespan) for s in valid)


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(starved_instances())
def test_fill_drain_bound_never_exceeds_a_valid_schedule(inst: Instance) -> None:
    # the same for the fill/drain bound with its reaches (docs/modelling.md §16)
    bound = fill_drain_bound(inst)[0]
    valid = [s for s in run_all(inst).values() if not validate(s)]
    assume(valid)
    assert all(bound <= inst.ticks(s.makespan) for s in valid)


# ---------------------------------------------------------------- pair fill/drain (§16.1)
def test_pair_bound_by_hand_and_brute_force() -> None:
    # p=2 m=4 F=1 B=2, pair 2 (saves 1).  Device 0: t0 = 0, first B at 4 (F0 F1 B1), last F's
    # tail 5 (F1 B1 B0).  Losing L of the 4 pairs: lost L, fill idle 4 - L, drain idle
    # 5 - 2L; L = 3 or 4 costs 4, so C >= 12 - 4 + 4 = 12 (the relaxed bound of §4.3: 11)

    inst = make(2, 1, 4, F=1, B=2, overlap=2)
    assert overlap_lower_bound(inst) == 11
    assert pair_fill_drain_bound(inst) == 12 == brute_force(inst, 15)


def test_pair_savings_use_each_forwards_own_pair() -> None:
    # p=2 m=4, F = (1, 3), B = (2, 4), pairs 2 and 6 (per stage, indexed by the F's stage).
    # Device 1 (stage 1): 4 F of 3 and 4 B of 4, solo work 28; a pair of F(1) and B(1) lasts
    # 6 and saves 1, so the pairs save at most 4 and the device needs head 1 + 24 + tail 2
    # = 27.  With the shortest pair of the whole instance (2, stage 0's) each pair would
    # "save" 5 and the bound would be the critical path; the optimum is 28 (brute force)

    inst = make(2, 1, 4, F=[1, 3], B=[2, 4], overlap=[2, 6])
    assert sorted(pair_savings(inst, [a for a in build_task_graph(inst)
                                      if inst.device_of(a.stage) == 1],
                               nx.get_node_attributes(build_task_graph(inst), "duration"))
                  ) == [1, 1, 1, 1]
    assert overlap_lower_bound(inst) == 27 == pair_fill_drain_bound(inst)
    assert brute_force(inst, 60) == 28


def test_pair_bound_on_dualpipe_scale_instance() -> None:
    # p=16 m=32 bidirectional, F=I=W=1, pair 2.5: device 7 has t0 = 7, its first backward
    # at 23 and its last forward's tail 24 (relaxed durations); giving up 16 of its 32 pairs
    # (0.5 each) is cheapest: C >= 7 + 96 - 16 + 8 = 95 (the relaxed bound: 87); DualPipe's
    # own schedule takes 98.5

    inst = load_instance(INSTANCES / "scale" / "p16-dualpipe-m32.toml")
    assert inst.from_ticks(overlap_lower_bound(inst)) == 87
    assert inst.from_ticks(pair_fill_drain_bound(inst)) == 95
    assert run_schedule("dualpipe", inst).makespan == 98.5


def test_pair_bound_with_a_limit_on_the_capped_dualpipe_instance() -> None:
    # DualPipe's shape, limit 10 activations (DualPipe holds 17): without the limit 174.362.
    # Device 7: t0 7.112, solo work 169.6, 64 pairs saving 0.05 each.  With §4.3's relaxed
    # durations its first backward can start 16.64 after t0 and only 10 forwards (of 1) fit
    # before it: the fill idles at least 6.64 whatever pairs form; the drain at least 7.90
    # (the window LP); the pairs' own windows make the rest: 188.554
    inst = load_instance(INSTANCES / "scale" / "p16-dualpipe-m64-lim10-profiled.toml")
    free = inst.replace(**{"memory.limit": None})
    assert inst.from_ticks(pair_fill_drain_bound(free)) == pytest.approx(174.362)
    assert inst.from_ticks(pair_fill_drain_bound(inst)) == pytest.approx(188.554)
    assert 7.112 + 169.6 - 64 * 0.05 + 6.64 + 7.90 < 188.554


def test_pair_bound_zero_without_overlap() -> None:

    assert pair_fill_drain_bound(make(4, 1, 8)) == 0


@pytest.mark.parametrize("case", range(10))
def test_pair_bound_below_brute_force_optimum(case: int) -> None:

    p, v, m, placement, costs = TINY[case]
    inst = make(p, v, m, placement=placement, **costs)
    best = solve(inst, workers=1, time_limit=None)
    opt = brute_force(inst, inst.ticks(best.makespan))
    assert pair_fill_drain_bound(inst) <= opt


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(overlap_instances())
def test_pair_bound_below_every_valid_schedule(inst: Instance) -> None:
    assert_below_every_valid_schedule(inst, pair_fill_drain_bound(inst))


def assert_below_every_valid_schedule(inst: Instance, bound: int) -> None:
    """``bound`` (ticks) is below every valid known schedule of a pair instance, and below
    the brute-force optimum when that is cheap (no limit, m <= 2, v = 1)."""
    best = None
    for name, sch in run_all(inst).items():
        if not validate(sch):
            assert bound <= inst.ticks(sch.makespan), name
            best = min(best or sch.makespan, sch.makespan)
    if best is not None and inst.memory_limit is None and inst.m <= 2 and inst.v == 1:
        assert bound <= brute_force(inst, inst.ticks(best))  # the optimum


@pytest.mark.slow
@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(overlap_instances())
def test_pair_bound_with_a_limit_never_exceeds_a_proven_optimum(inst: Instance) -> None:
    # with a memory limit the windows' idle is also the memory one (docs/modelling.md §16.1)
    assume(inst.memory_limit is not None)
    opt = proven_optimum(inst)
    if opt is not None:
        assert pair_fill_drain_bound(inst) <= opt
