"""The CP-SAT model: known optima, properties on random instances, JSON round trip."""

from __future__ import annotations

import json

import pytest
from conftest import make
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpsched.graph import lower_bound
from cpsched.instance import Instance
from cpsched.model import Schedule
from cpsched.schedules import run_all
from cpsched.solver import fifo_relabel, sequential_schedule, solve, split_fused
from cpsched.validate import validate

DET = {"workers": 1, "time_limit": None}


def test_article_optimum_285(article: Instance) -> None:
    res = solve(article, **DET)
    assert res.status == "OPTIMAL" and res.makespan == 285 and res.lower_bound == 285
    assert res.gap == 0.0
    assert validate(res.schedule) == []


def test_article_memory_limit_6_optimum_325(article: Instance) -> None:
    # docs/modelling.md §1: p=4 v=2 m=8 F=5 B=10, memory limit 6 -> 325
    res = solve(article.replace(**{"memory.limit": 6}), **DET)
    assert res.status == "OPTIMAL" and res.makespan == 325
    assert max(res.schedule.peak_memory) <= 6
    assert validate(res.schedule) == []


@pytest.mark.parametrize(("p", "m"), [(2, 3), (3, 4), (4, 4)])
def test_v1_optimum_is_1f1b(p: int, m: int) -> None:
    # docs/spec.md §6: 1F1B is optimal for v = 1 without latency: (m + p - 1)(F + B)
    res = solve(make(p, 1, m, F=2, B=3), **DET)
    assert res.status == "OPTIMAL" and res.makespan == (m + p - 1) * 5


def test_every_feature(every_feature: Instance) -> None:
    res = solve(every_feature, **DET)
    assert res.status == "OPTIMAL"
    assert validate(res.schedule) == []
    assert max(res.schedule.peak_memory) <= 5
    assert res.makespan >= res.lower_bound


def test_split_backward_beats_fused_on_memory_limit() -> None:
    # With I/W split and memory released at W, the optimum under a 1F1B-sized limit is
    # ZB-H1-like: m(F+I+W) + (p-1)(F+I-W)... check it is never worse than fused 1F1B.
    inst = make(4, 1, 8, F=1, I=1, W=1, limit=4)
    res = solve(inst, **DET)
    assert res.status == "OPTIMAL"
    assert res.makespan <= (8 + 4 - 1) * 3
    assert res.makespan == lower_bound(inst).value


def test_float_costs_exact() -> None:
    inst = make(3, 1, 3, F=1.125, B=2.25, latency=0.5)
    res = solve(inst, **DET)
    assert res.status == "OPTIMAL"
    assert res.makespan == pytest.approx((3 + 3 - 1) * 3.375 + 2 * 2 * 0.5)
    assert validate(res.schedule) == []


def test_parameters_pass_through_and_unknown_rejected(tiny: Instance) -> None:
    res = solve(tiny, workers=1, parameters={"max_deterministic_time": 5.0})
    assert res.status == "OPTIMAL"
    with pytest.raises(ValueError, match="unknown"):
        solve(tiny, parameters={"no_such_parameter": 1})


def test_progress_callback(article: Instance) -> None:
    seen = []
    solve(article.replace(**{"memory.limit": 6}), workers=1,
          on_progress=lambda t, inc, bd: seen.append((t, inc, bd)))
    assert seen and all(bd is None or inc is None or bd <= inc for _, inc, bd in seen)


def test_never_worse_than_hint_even_at_tiny_time_limit() -> None:
    inst = make(4, 2, 8, limit=6)
    res = solve(inst, workers=1, time_limit=None, parameters={"max_deterministic_time": 0.0})
    assert res.makespan <= sequential_schedule(inst).makespan
    assert validate(res.schedule) == []
    assert res.lower_bound <= res.makespan


def test_fifo_relabel_keeps_validity_and_memory(article: Instance) -> None:
    sch = run_all(article)["interleaved-1f1b"]
    acts = fifo_relabel(article, split_fused(sch))
    again = Schedule(article, acts, method="x")
    assert validate(again) == []
    assert again.makespan == sch.makespan and again.peak_memory == sch.peak_memory


def test_json_round_trip(every_feature: Instance, tmp_path) -> None:
    res = solve(every_feature, **DET)
    path = tmp_path / "s.json"
    res.schedule.to_json(path)
    data = json.loads(path.read_text())
    assert data["format"] == "cpsched.schedule/1" and data["status"] == "OPTIMAL"
    assert data["makespan"] == res.makespan and data["gap"] == 0.0
    back = Schedule.from_json(path)
    assert back.instance == every_feature
    assert back.makespan == res.schedule.makespan
    assert back.peak_memory == res.schedule.peak_memory
    assert validate(back) == []
    assert len(back.actions) == len(data["actions"]) == 4 * 4 * 3


@st.composite
def small_instances(draw) -> Instance:
    placement = draw(st.sampled_from(["loop", "loop", "v"]))
    p = draw(st.integers(1, 3)) if placement == "loop" else draw(st.integers(1, 2))
    v = 2 if placement == "v" else draw(st.integers(1, 2))
    m = draw(st.integers(1, 4))
    S = p * v
    split = draw(st.booleans())
    cost = st.integers(1, 4)
    costs: dict = {"forward": draw(st.lists(cost, min_size=S, max_size=S)),
                   "p2p_latency": draw(st.sampled_from([0, 0, 1, 0.5]))}
    if split:
        costs["backward_input"] = draw(st.lists(cost, min_size=S, max_size=S))
        costs["backward_weight"] = draw(st.lists(st.integers(0, 3), min_size=S, max_size=S))
    else:
        costs["backward"] = draw(st.lists(cost, min_size=S, max_size=S))
    act = draw(st.lists(st.sampled_from([1, 1, 2, 0.5]), min_size=S, max_size=S))
    memory: dict = {"activation": act,
                    "released_by_input": draw(st.sampled_from([0.0, 0.5, 1.0]))}
    inst = Instance.from_dict({"name": "h", "pipeline": {
        "devices": p, "stages_per_device": v, "microbatches": m, "placement": placement,
        "split_backward": split}, "costs": costs, "memory": memory})
    if draw(st.booleans()):
        need = inst.min_memory_limit()
        inst = inst.replace(**{"memory.limit": need + draw(st.sampled_from([0, 0.5, 1, 2]))})
    return inst


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_instances())
def test_solver_properties(inst: Instance) -> None:
    baselines = run_all(inst)
    res = solve(inst, candidates=baselines, workers=1, time_limit=None,
                parameters={"max_deterministic_time": 2.0})
    assert validate(res.schedule) == []
    assert res.lower_bound <= res.makespan + 1e-9
    assert res.lower_bound >= lower_bound(inst).value / inst.time_scale - 1e-9
    for name, sch in baselines.items():
        if not validate(sch):
            assert res.makespan <= sch.makespan + 1e-9, name
    if res.status == "OPTIMAL":
        assert res.makespan == pytest.approx(res.lower_bound)


def test_default_workers_by_model_size() -> None:
    from cpsched.solver.facade import LARGE_MODEL_ACTIONS, default_workers

    small = make(4, 2, 8)
    assert small.n_actions <= LARGE_MODEL_ACTIONS and default_workers(small) == 8
    large = make(32, 2, 256)  # 32768 actions: the 8-worker search peaked at 4.7 GB
    assert large.n_actions > LARGE_MODEL_ACTIONS and default_workers(large) == 4


def test_warm_start_passes_over_limit_candidates_without_validating(monkeypatch) -> None:
    # p=4 v=2 m=8 F=5 B=10, limit 6 (docs/spec.md §6): interleaved 1F1B and GPipe hold more
    # than 6; the warm start must skip them on their peak memory alone and still pick the
    # shortest candidate the validator accepts
    from cpsched.solver import warm_start

    inst = make(4, 2, 8, F=5, B=10, limit=6)
    known = run_all(inst)
    over = {n for n, s in known.items() if max(s.peak_memory) > 6}
    assert over  # the instance has candidates over the limit
    checked: list[float] = []

    def spy(sch: Schedule, instance: Instance | None = None) -> list[str]:
        checked.append(max(sch.peak_memory))
        return validate(sch, instance)

    monkeypatch.setattr(warm_start, "validated", spy)
    name, rows, horizon = warm_start.best_warm_start(inst, known)
    assert checked and max(checked) <= 6
    valid = [s for s in known.values() if not validate(s)]
    assert horizon == min(inst.ticks(s.makespan) for s in valid)
    assert name not in over


@pytest.mark.parametrize("shape", [
    {"p": 4, "v": 2, "m": 8},
    {"p": 4, "v": 2, "m": 6, "placement": "v", "I": 1, "W": 0.5, "latency": 0.25},
    {"p": 4, "m": 8, "placement": "bidirectional", "latency": 0.5},
    {"p": 3, "m": 5, "F": 1.5, "B": 2.25},
])
def test_sequential_schedule_is_never_shorter_than_its_floor(shape: dict) -> None:
    # the warm start builds the sequential fallback only when some candidate is at least
    # m (bidirectional: m / 2) times one microbatch's chain of forwards and backwards long;
    # that floor must never exceed the sequential schedule's makespan
    from cpsched.solver import warm_start

    inst = make(**shape)
    seq = sequential_schedule(inst)
    floor = warm_start.sequential_floor(inst)
    assert 0 < floor <= inst.ticks(seq.makespan)
    assert warm_start._sequential_needed(inst, {"seq": seq})  # noqa: SLF001


def test_warm_start_builds_the_sequential_schedule_only_when_it_could_win(monkeypatch) -> None:
    # p=4 v=2 m=8 F=5 B=10, limit 6 (docs/spec.md §6): some known schedules fit, all far
    # shorter than the sequential 8 x 120 = 960: it is not built, and the choice is the same;
    # with only candidates over the limit it is the fallback
    from cpsched.solver import warm_start

    inst = make(4, 2, 8, F=5, B=10, limit=6)
    known = run_all(inst)
    built: list[int] = []
    real = warm_start.sequential_schedule

    def spy(i: Instance) -> Schedule:
        built.append(1)
        return real(i)

    monkeypatch.setattr(warm_start, "sequential_schedule", spy)
    name, _, horizon = warm_start.best_warm_start(inst, known)
    assert not built and name != "sequential"
    valid = [s for s in known.values() if not validate(s)]
    assert horizon == min(inst.ticks(s.makespan) for s in valid)
    over = {n: s for n, s in known.items() if max(s.peak_memory) > 6}
    assert over
    name, rows, horizon = warm_start.best_warm_start(inst, over)
    assert built and name == "sequential" and horizon == inst.ticks(real(inst).makespan)


def test_search_resumes_only_with_a_deadline_an_open_gap_and_time_left() -> None:
    import time

    from cpsched.solver.search_run import RESUME_MIN_SECONDS, time_to_resume

    inst = make(4, 1, 8)
    now = time.perf_counter()
    assert not time_to_resume(inst, None, True)  # no deadline: reproducible, one search
    assert not time_to_resume(inst, now + 60, False)  # the gap is closed
    assert not time_to_resume(inst, now + RESUME_MIN_SECONDS / 2, True)
    assert time_to_resume(inst, now + 60, True)
    assert time_to_resume(inst, now + 60, True, {"log_search_progress": False})
    for user_stop in ({"max_deterministic_time": 5.0}, {"relative_gap_limit": 0.01},
                      {"max_number_of_conflicts": 10}, {"stop_after_first_solution": True}):
        assert not time_to_resume(inst, now + 60, True, user_stop)  # the user's limit holds


def test_time_the_relaxation_leaves_goes_back_to_the_search(monkeypatch) -> None:
    # p=4 m=32 fused, profiled costs, limit 2 (half of 1F1B's): the gap stays open for
    # minutes (200.666 against 192.8 after 60 s). When the one-device relaxation returns at
    # once, the time kept for it goes to a second search hinted with the best schedule; the
    # result is still valid, never worse than the warm start, its bound never above its
    # makespan.
    import cpsched.solver.facade as facade

    inst = make(4, 1, 32, F=[1, 1, 1, 1.4], B=[1.65, 1.65, 1.65, 2.105], limit=2,
                latency=0.016)
    monkeypatch.setattr(facade, "relaxation_bound", lambda inst, g, ht, lb, up, **kw: (lb, []))
    res = solve(inst, time_limit=12, workers=2)
    assert res.stats["resumed"] is True
    assert validate(res.schedule, inst) == []
    assert res.lower_bound <= res.makespan
    known = [s.makespan for s in run_all(inst).values() if not validate(s, inst)]
    assert res.makespan <= min(known)
