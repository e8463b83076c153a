"""The one-device relaxation bound (cpsched/solver/relaxation.py, docs/modelling.md §21):
never above a proven optimum, above the combinatorial bound where memory makes a device's own
actions collide, and used by ``solve`` only where it applies."""

from __future__ import annotations

import pytest
from conftest import make
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cpsched.solver.facade as facade
from cpsched import solve
from cpsched.instance import Instance, InstanceError
from cpsched.solver import relaxation
from cpsched.solver.relaxation import (
    pressured_devices,
    relax_device,
    relaxation_bound,
    relaxed_groups,
)


def _without_relaxation(monkeypatch: pytest.MonkeyPatch, inst: Instance) -> facade.Result:
    """The full model's proof alone (relaxation switched off), deterministic."""
    with monkeypatch.context() as mp:
        mp.setattr(facade, "relaxation_bound", lambda inst, g, ht, lb, up, **kw: (lb, []))
        return solve(inst, time_limit=None, workers=1)


def _relax_all(inst: Instance, upper: int) -> list[int]:
    lb, g, ht, _, _ = facade._bounds(inst)  # noqa: SLF001
    return [relax_device(inst, g, ht, d, 0, upper, deterministic_time=5).bound
            for d in range(inst.p)]


def test_relaxation_proves_what_the_other_bounds_miss(monkeypatch: pytest.MonkeyPatch) -> None:
    # p=3 v=2 m=12, F=5 B=10, limit 3: the combinatorial bound is 550 (the area bound with
    # its ramps; 540 without them); the full model proves 585 optimal; device 0's relaxation
    # alone gives the same 585
    inst = make(3, 2, 12, limit=3)
    assert facade.combinatorial_bound(inst) == 550
    full = _without_relaxation(monkeypatch, inst)
    assert full.status == "OPTIMAL" and full.makespan == 585
    lb, g, ht, _, _ = facade._bounds(inst)  # noqa: SLF001
    r = relax_device(inst, g, ht, 0, lb, 600, deterministic_time=20)
    assert r.solved and r.bound == 585


def _profiled_p8_v2_m16() -> Instance:
    """p=8 v=2 m=16, split backward, profiled costs (F = I = 1, W = 0.65; the last stage
    F = 1.4, W = 1.105; p2p 0.016), activation 0.25, limit 1: a quarter of what 1F1B holds."""
    f, w = [1.0] * 15 + [1.4], [0.65] * 15 + [1.105]
    return Instance.from_dict({
        "name": "prof-p8-v2-m16-lim1",
        "pipeline": {"devices": 8, "stages_per_device": 2, "microbatches": 16,
                     "split_backward": True},
        "costs": {"forward": f, "backward_input": [1.0] * 16, "backward_weight": w,
                  "p2p_latency": 0.016},
        "memory": {"activation": 0.25, "limit": 1}})


def test_the_ladder_lifts_the_bound_where_minimising_is_stuck() -> None:
    # device 0 of this instance: minimising the relaxed makespan from the upper end 229.96
    # stays at the combinatorial bound 205.073 for 30 s (session 14; with the upper end 240
    # it is solved at 213.994 only after 224 s), while the decisions "makespan <= T?" just
    # above the bound are proven infeasible at once: within one deterministic unit the
    # ladder reaches 207.983 (docs/modelling.md §21)
    inst = _profiled_p8_v2_m16()
    lb, g, ht, _, _ = facade._bounds(inst)  # noqa: SLF001
    assert inst.from_ticks(lb) == pytest.approx(205.073)
    r = relax_device(inst, g, ht, 0, lb, inst.ticks(229.96), deterministic_time=1)
    assert inst.ticks(207) <= r.bound <= inst.ticks(213.994)


def test_the_ladder_alone_reaches_a_small_relaxation_optimum() -> None:
    inst = make(3, 2, 12, limit=3)  # device 0's relaxation optimum: 585 (test above)
    lb, g, ht, _, _ = facade._bounds(inst)  # noqa: SLF001
    dur, dev = g.nodes(data="duration"), g.nodes(data="device")
    nodes = [a for a in g if dev[a] == 0]
    lags = relaxation._device_lags(inst, g, dict(dur), nodes)  # noqa: SLF001
    device = relaxation.DeviceActions(nodes, dict(dur), dict(dur), lags)
    budget = relaxation._Budget(20, None)  # noqa: SLF001
    lo, hi = relaxation._ladder(inst, ht, device, lb, 600,  # noqa: SLF001
                                budget, None, lambda: False)
    assert (lo, hi) == (585, 585) and budget.deterministic < 20
    stopped = relaxation._ladder(inst, ht, device, lb, 600,  # noqa: SLF001
                                 relaxation._Budget(20, None), None, lambda: True)  # noqa: SLF001
    assert stopped == (lb, 600)  # a stop asked for: no question is put


def test_solve_reports_the_relaxation_it_used() -> None:
    inst = make(4, 2, 8, limit=4)  # combinatorial 377 (360 before the area bound's ramps),
    assert facade.combinatorial_bound(inst) == 377  # optimum 435 (relaxation: 435)
    # a search too short to prove anything: the bound comes from the relaxation
    res = solve(inst, time_limit=None, workers=1, parameters={"max_number_of_conflicts": 10})
    assert res.lower_bound == 435 and res.makespan >= 435
    # device 0 alone, then the groups on the budget it left — the turn pair (0, 3) (§35),
    # the turn triple (0, 1, 3), devices 0-2 (§31, §36): none can pass the optimum
    assert res.stats["relaxed_devices"] == [(0, 435, True), ((0, 3), 435, True),
                                            ((0, 1, 3), 435, True), ((0, 1, 2), 435, True)]
    assert res.status == ("OPTIMAL" if res.makespan == 435 else "FEASIBLE")


def test_relaxation_not_used_where_it_does_not_apply() -> None:
    g_inst = make(4, 1, 8)  # no memory limit
    lb, g, ht, _, _ = facade._bounds(g_inst)  # noqa: SLF001
    assert relaxation_bound(g_inst, g, ht, lb, lb + 50, deterministic_time=1) == (lb, [])
    ov = make(4, 1, 8, overlap=12, limit=8)  # an overlap cost: only before the search (§29)
    lb, g, ht, _, _ = facade._bounds(ov)  # noqa: SLF001
    assert relaxation_bound(ov, g, ht, lb, lb + 50, deterministic_time=1) == (lb, [])


def test_pressured_devices_start_with_a_first_stage() -> None:
    inst = make(4, 2, 8, limit=4)
    lb, g, ht, _, _ = facade._bounds(inst)  # noqa: SLF001
    assert pressured_devices(inst, g, ht, 2)[0] == 0
    bi = make(4, 1, 8, placement="bidirectional", limit=8)
    lb, g, ht, _, _ = facade._bounds(bi)  # noqa: SLF001
    assert pressured_devices(bi, g, ht, 2) == [0, 3]


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(p=st.integers(2, 3), v=st.integers(1, 2), m=st.integers(2, 6), split=st.booleans(),
       extra=st.integers(0, 3), latency=st.sampled_from([0, 1]),
       placement=st.sampled_from(["loop", "v"]))
def test_relaxation_never_exceeds_a_proven_optimum(
        monkeypatch: pytest.MonkeyPatch, p: int, v: int, m: int, split: bool, extra: int,
        latency: int, placement: str) -> None:
    if placement == "v" and v != 2:
        v = 2
    # the smallest accepted limit is a device's footprint: v activations
    proven = _proven_optimum(monkeypatch, p, v, m, split, v + extra, latency, placement)
    if proven is None:
        return
    inst, opt = proven
    assert max(_relax_all(inst, opt)) <= opt


def _proven_optimum(monkeypatch: pytest.MonkeyPatch, p: int, v: int, m: int, split: bool,
                    limit: float, latency: int, placement: str) -> tuple[Instance, int] | None:
    """The hypothesis tests' instance (F = 2, B = 3 or I = 2 W = 1 with half released by
    I) and its optimum (ticks) as the full model proves it alone; None when the instance is
    refused (a limit below the footprint) or not proven."""
    kw = {"I": 2, "W": 1, "B": None} if split else {"B": 3}
    try:
        inst = make(p, v, m, F=2, limit=limit, latency=latency, placement=placement,
                    released_by_input=0.5 if split else 0.0, **kw)
    except InstanceError:
        return None
    full = _without_relaxation(monkeypatch, inst)
    return (inst, inst.ticks(full.makespan)) if full.status == "OPTIMAL" else None


# ---------------------------------------------------------------- groups of devices (§31)
def test_a_group_of_devices_sees_what_one_device_misses(monkeypatch: pytest.MonkeyPatch) -> None:
    # p=4 v=2 m=8, F=2 B=3, limit 3: the full model proves 192; the combinatorial bound is
    # 164, device 0 alone 180, devices 0-2 kept together 189 (both solved, deterministic)
    inst = make(4, 2, 8, F=2, B=3, limit=3)
    full = _without_relaxation(monkeypatch, inst)
    assert full.status == "OPTIMAL" and full.makespan == 192
    lb, g, _, _, ht = facade._bounds(inst)  # noqa: SLF001
    assert lb == 164
    one = relax_device(inst, g, ht, 0, lb, 230, deterministic_time=5)
    group = relax_device(inst, g, ht, (0, 1, 2), lb, 230, deterministic_time=10)
    assert (one.bound, one.solved) == (180, True)
    assert (group.bound, group.solved, group.device) == (189, True, (0, 1, 2))
    # with the last device, where every microbatch turns, instead of device 2 (§35): the
    # optimum itself
    turn = relax_device(inst, g, ht, (0, 1, 3), lb, 230, deterministic_time=10)
    assert (turn.bound, turn.solved) == (192, True)
    best, runs = relaxation_bound(inst, g, ht, lb, 230, deterministic_time=10)
    assert best == 192 and [r.device for r in runs] == [0, (0, 3), (0, 1, 3), (0, 1, 2)]


def _profiled_fused_p8_v2_m8() -> Instance:
    """p=8 v=2 m=8 loop, fused backward, profiled costs (F = 1, B = 1.65; the last stage
    F = 1.4, B = 2.105; p2p 0.016), activation 1, limit 10 (V-Half's): r27-4 of
    ``make_scale_instances.py --random 27`` with 8 microbatches instead of 16."""
    return Instance.from_dict({
        "name": "prof-fused-p8-v2-m8-lim10",
        "pipeline": {"devices": 8, "stages_per_device": 2, "microbatches": 8,
                     "split_backward": False},
        "costs": {"forward": [1.0] * 15 + [1.4], "backward": [1.65] * 15 + [2.105],
                  "p2p_latency": 0.016},
        "memory": {"activation": 1, "limit": 10}})


def test_the_turn_group_sees_what_the_first_devices_miss(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # device 0 is paced by its memory (lifespans of 66 a microbatch in 10 slots: 6.6), the
    # last device by its work (6.155 a microbatch); device 0 alone and devices 0-2 stay near
    # the combinatorial bound, device 0 with device 7 proves 83.539 against the optimum
    # 83.907 (the full model's, deterministic: one worker, no time limit)
    inst = _profiled_fused_p8_v2_m8()
    full = _without_relaxation(monkeypatch, inst)
    assert full.status == "OPTIMAL" and full.makespan == pytest.approx(83.907)
    lb, g, _, _, ht = facade._bounds(inst)  # noqa: SLF001
    up = inst.ticks(full.makespan)  # each relaxation's optimum is searched below it
    assert inst.from_ticks(lb) == pytest.approx(79.264)
    one = relax_device(inst, g, ht, 0, lb, up, deterministic_time=2)
    first = relax_device(inst, g, ht, (0, 1, 2), lb, up, deterministic_time=3)
    turn = relax_device(inst, g, ht, (0, 7), lb, up, deterministic_time=2)
    assert one.solved and inst.from_ticks(one.bound) == pytest.approx(79.442)
    assert first.solved and inst.from_ticks(first.bound) == pytest.approx(79.474)
    assert turn.solved and inst.from_ticks(turn.bound) == pytest.approx(83.539)


def test_which_groups_are_kept_together() -> None:
    # the turn pair (device 0 with the last device, §35), the turn triple (devices 0, 1 and
    # p - 1), the first devices (§31; after the triple since §36)
    assert relaxed_groups(*_graph(make(4, 2, 8, limit=3))) == [(0, 3), (0, 1, 3), (0, 1, 2)]
    assert relaxed_groups(*_graph(make(8, 2, 8, limit=3))) == [(0, 7), (0, 1, 7), (0, 1, 2)]
    v = make(4, 2, 8, placement="v", limit=3)
    assert relaxed_groups(*_graph(v)) == [(0, 3), (0, 1, 3), (0, 1, 2)]
    # not all p devices
    assert relaxed_groups(*_graph(make(3, 2, 8, limit=3))) == [(0, 2), (0, 1)]
    assert relaxed_groups(*_graph(make(2, 2, 8, limit=3))) == []
    bi = make(4, 1, 8, placement="bidirectional", limit=4)
    assert relaxed_groups(*_graph(bi)) == [(0, 1, 2), (1, 2, 3)]  # from both ends
    assert relaxed_groups(*_graph(make(4, 2, 8))) == []  # no memory limit
    assert relaxed_groups(*_graph(make(4, 1, 8, overlap=12, limit=8))) == []  # pairs: §29
    # 96 actions a device (v=2, m=16, B fused: F and B): two fit in 240, three do not
    assert relaxed_groups(*_graph(make(4, 2, 24, limit=3))) == [(0, 3), (0, 1)]
    assert relaxed_groups(*_graph(make(4, 2, 64, limit=3))) == []


def _graph(inst: Instance) -> tuple[Instance, object]:
    return inst, facade._bounds(inst)[1]  # noqa: SLF001


def test_a_group_with_pairs_is_refused() -> None:
    ov = make(4, 1, 8, overlap=12, limit=8)
    lb, g, _, relaxed, _ = facade._bounds(ov)  # noqa: SLF001
    with pytest.raises(ValueError, match="one device"):
        relax_device(ov, g, relaxed[1], (0, 1), lb, lb + 50, deterministic_time=1)


@settings(max_examples=10, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(p=st.integers(3, 4), v=st.integers(1, 2), m=st.integers(2, 6), split=st.booleans(),
       extra=st.integers(0, 2), latency=st.sampled_from([0, 1]),
       placement=st.sampled_from(["loop", "v", "bidirectional"]))
def test_a_group_never_exceeds_a_proven_optimum(
        monkeypatch: pytest.MonkeyPatch, p: int, v: int, m: int, split: bool, extra: int,
        latency: int, placement: str) -> None:
    v = {"v": 2, "bidirectional": 1}.get(placement, v)
    p, m = (4, m + m % 2) if placement == "bidirectional" else (p, m)
    # the smallest accepted limit is a device's footprint
    limit = v + extra + (placement == "bidirectional")
    proven = _proven_optimum(monkeypatch, p, v, m, split, limit, latency, placement)
    if proven is None:
        return
    inst, opt = proven
    lb, g, _, _, ht = facade._bounds(inst)  # noqa: SLF001
    groups = [tuple(range(k, k + n)) for n in (2, 3) for k in range(p - n + 1)]
    groups += [(0, p - 1), (0, 1, p - 1)]  # the turn groups (§35)
    # every run of consecutive devices and the turn groups, not only relaxed_groups'
    for group in dict.fromkeys(groups):
        r = relax_device(inst, g, ht, group, 0, opt, deterministic_time=5)
        assert r.bound <= opt
        assert r.bound >= relax_device(inst, g, ht, group[0], 0, opt,
                                       deterministic_time=5).bound or not r.solved


# ---------------------------------------------------------------- side by side (§36)
def test_groups_beside_the_single_devices_prove_the_same() -> None:
    # p=4 v=2 m=8, F=2 B=3, limit 3 (optimum 192, above): two workers take device 0 and the
    # groups in turn, each from whatever bound is proven by then (164, 180, 189 or 192);
    # each relaxation is solved from any of them within its units (the wall limit is never
    # reached), so the result is the sequential one, in any interleaving
    inst = make(4, 2, 8, F=2, B=3, limit=3)
    lb, g, _, _, ht = facade._bounds(inst)  # noqa: SLF001
    best, runs = relaxation_bound(inst, g, ht, lb, 230, deterministic_time=10, time_limit=600,
                                  parallel=True)
    assert best == 192
    assert sorted(map(str, [r.device for r in runs])) == [
        "(0, 1, 2)", "(0, 1, 3)", "(0, 3)", "0"]
    assert all(r.solved for r in runs) and dict((r.device, r.bound) for r in runs)[0] == 180


def test_the_first_side_to_reach_the_schedule_stops_the_other() -> None:
    # upper 180 = the relaxation of device 0 and of the turn pair, which start together:
    # once one proves it, the other is stopped (what it proved is kept, at most 180) and no
    # further group starts
    inst = make(4, 2, 8, F=2, B=3, limit=3)
    lb, g, _, _, ht = facade._bounds(inst)  # noqa: SLF001
    best, runs = relaxation_bound(inst, g, ht, lb, 180, deterministic_time=10, time_limit=600,
                                  parallel=True)
    assert best == 180 and all(lb <= r.bound <= 180 for r in runs)
    assert (0, 1, 2) not in [r.device for r in runs] and (0, 1, 3) not in [r.device for r in runs]


def test_a_stop_before_the_sides_start_runs_nothing() -> None:
    # Ctrl-C: ``on_solver`` receives one hub for both sides; stopped at once, neither runs
    inst = make(4, 2, 8, F=2, B=3, limit=3)
    lb, g, _, _, ht = facade._bounds(inst)  # noqa: SLF001
    hubs: list[object] = []

    def on_solver(hub: object) -> None:
        hubs.append(hub)
        hub.stop_search()  # type: ignore[attr-defined]

    assert relaxation_bound(inst, g, ht, lb, 230, deterministic_time=10, time_limit=600,
                            parallel=True, on_solver=on_solver) == (lb, [])
    assert len(hubs) == 1
