"""The one-device relaxation with overlapped pairs (cpsched/solver/relaxation_pairs.py,
docs/modelling.md §29): never above a brute-force or proven optimum or a valid schedule,
above the pair window bound where whole pairs and activations decide, and run by ``solve``
before the search."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import pytest
from conftest import make
from hypothesis import HealthCheck, given, settings
from test_bounds import assert_below_a_proven_optimum, assert_below_every_valid_schedule
from test_solver_overlap import TINY, brute_force, overlap_instances

import cpsched.solver.facade as facade
from cpsched.actions import Action, Kind
from cpsched.graph import overlap_relaxed_durations
from cpsched.instance import Instance, load_instance
from cpsched.pair_window_bound import pair_window_bound
from cpsched.solver import solve
from cpsched.solver.relaxation import relax_device, relaxed_devices
from cpsched.validate import validate

B1_0 = Path(__file__).parent / "data" / "b1-0-bidirectional-pairs.toml"


def _relax_all(inst: Instance, upper: int, units: float = 5.0) -> list[int]:
    """Each device's pair relaxation bound (ticks) below ``upper``, one worker."""
    _, g, _, relaxed, _ = facade._bounds(inst)  # noqa: SLF001
    return [relax_device(inst, g, relaxed[1], d, 0, upper, deterministic_time=units).bound
            for d in range(inst.p)]


@pytest.mark.parametrize("case", range(len(TINY)))
def test_below_the_brute_force_optimum(case: int) -> None:
    p, v, m, placement, costs = TINY[case]
    inst = make(p, v, m, placement=placement, **costs)
    best = inst.ticks(solve(inst, workers=1, time_limit=None).makespan)
    assert max(_relax_all(inst, best)) <= brute_force(inst, best)


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(overlap_instances())
def test_below_every_valid_schedule(inst: Instance) -> None:
    _, g, _, _, _ = facade._bounds(inst)  # noqa: SLF001
    upper = 10 * sum(d for _, d in g.nodes(data="duration")) + 100  # above every schedule's
    assert_below_every_valid_schedule(inst, max(_relax_all(inst, upper)))


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(overlap_instances())
def test_below_a_proven_optimum(inst: Instance) -> None:
    # CP-SAT's proof uses only §4.3's bound, never this one
    assert_below_a_proven_optimum(inst, lambda opt: max(_relax_all(inst, opt)))


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(overlap_instances())
def test_a_paired_inputs_tail_is_its_forwards(inst: Instance) -> None:
    # docs/modelling.md §29, *A paired I's tail*: a fused W ends with its pair, yet the
    # relaxation (and the full model's windows) bound the makespan by end(I) + tail(I),
    # whose W branch counts the W again; sound because the pair's F always has the longer
    # tail: its own microbatch's chain F -> ... -> I(t) -> W(t) passes the I's stage t
    if not inst.split_backward:
        return
    _, g, _, relaxed, ordered = facade._bounds(inst)  # noqa: SLF001
    rel = overlap_relaxed_durations(inst, g)
    device = nx.get_node_attributes(g, "device")
    for _, tail in (relaxed[1], ordered):
        for f in (a for a in g if a.kind == Kind.F):
            for i in (a for a in g if a.kind == Kind.I and device[a] == device[f]):
                w = Action(Kind.W, i.stage, i.microbatch)
                assert tail[f] >= rel[w] + tail[w]


def test_whole_pairs_and_activations_on_a_small_bidirectional_instance() -> None:
    # p4 m8 bidirectional, profiled costs, pairs, limit 4 (four activations; 1F1B's
    # memory): the pair window LP (§28) runs fractions of pairs and holds fractions of
    # activations, 21.338; device 0 kept whole, 22.438 (solved); the optimum is 23.847
    # (proven by --method model in 39 s, docs/modelling.md §28)
    inst = load_instance(B1_0)
    _, g, _, relaxed, _ = facade._bounds(inst)  # noqa: SLF001
    pw = pair_window_bound(inst, g, relaxed=relaxed)
    assert inst.from_ticks(pw) == pytest.approx(21.338)
    r = relax_device(inst, g, relaxed[1], 0, pw, inst.ticks(23.847), deterministic_time=2)
    assert r.solved and inst.from_ticks(r.bound) == pytest.approx(22.438)


def test_devices_it_runs_on() -> None:
    ov = make(4, 1, 8, overlap=12, limit=8)  # loop: device 0; with or without a limit
    _, g, ht, relaxed, _ = facade._bounds(ov)  # noqa: SLF001
    assert relaxed_devices(ov, g, relaxed[1], 1, pairs=True) == [0]
    assert relaxed_devices(ov, g, ht, 1) == []  # not after the search
    plain = make(4, 1, 8, limit=8)
    _, g, ht, _, _ = facade._bounds(plain)  # noqa: SLF001
    assert relaxed_devices(plain, g, ht, 1, pairs=True) == []
    bi = make(4, 1, 8, placement="bidirectional", overlap=12)
    _, g, _, relaxed, _ = facade._bounds(bi)  # noqa: SLF001
    assert relaxed_devices(bi, g, relaxed[1], 2, pairs=True) == [0, 3]


def test_solve_runs_it_before_the_search() -> None:
    inst = load_instance(B1_0)
    res = solve(inst, workers=1, time_limit=None, parameters={"max_deterministic_time": 1.0})
    stats = res.stats["pair_relaxation"]
    assert stats["before"] == pytest.approx(21.338)
    assert stats["bound"] == pytest.approx(22.438)
    assert stats["devices"][0][0] == 0 and stats["devices"][0][2]  # device 0 solved
    assert res.lower_bound >= 22.438 - 1e-9
    assert validate(res.schedule) == []
    plain = solve(make(4, 1, 8, limit=8), workers=1, time_limit=None)
    assert plain.stats["pair_relaxation"] is None
