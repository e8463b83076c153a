"""The registry's ``run_all``: a broken generator is left out and reported, not fatal; the
expensive generators side by side in forked children give the schedules of one at a time."""

from __future__ import annotations

import time

import pytest
from typer.testing import CliRunner

from cpsched.actions import Action, Kind
from cpsched.cli.app import app
from cpsched.instance import Instance
from cpsched.schedules import registry
from cpsched.simulate import OrderError
from cpsched.validate import exceeds_memory_limit, validate


@pytest.fixture
def broken(monkeypatch: pytest.MonkeyPatch) -> str:
    """A registered schedule whose orders miss every action but one (an OrderError)."""
    name = "broken-for-test"
    spec = registry.ScheduleSpec(
        name, "test", "none", "test", check=lambda inst: None,
        generate=lambda inst: [[Action(Kind.F, 0, 0)]] + [[] for _ in range(inst.p - 1)])
    monkeypatch.setitem(registry.REGISTRY, name, spec)
    return name


def _inst() -> Instance:
    return Instance.from_dict({"name": "t", "pipeline": {"devices": 2, "microbatches": 3},
                               "costs": {"forward": 1, "backward": 2}})


def test_run_all_raises_without_failed(broken: str) -> None:
    with pytest.raises(OrderError):
        registry.run_all(_inst())


def test_run_all_leaves_out_and_records_a_broken_generator(broken: str) -> None:
    failed: dict[str, str] = {}
    known = registry.run_all(_inst(), failed=failed)
    assert broken not in known and "1f1b" in known and "gpipe" in known
    assert list(failed) == [broken] and "missing" in failed[broken]
    # 1F1B on p=2 m=3, F=1 B=2: (m + p - 1)(F + B) = 12
    assert known["1f1b"].makespan == 12


def test_solve_command_warns_and_still_solves(broken: str, tmp_path) -> None:  # noqa: ANN001
    res = CliRunner().invoke(app, ["solve", "-p", "2", "-m", "3", "--forward", "1",
                                   "--backward", "2", "-o", str(tmp_path), "--no-plot",
                                   "-w", "1"])
    assert res.exit_code == 0, res.output
    assert f"known schedule {broken} failed and is left out" in res.output
    assert "OPTIMAL" in res.output


# ------------------------------------------------------- validation once per schedule object
def test_validated_once_per_schedule(validate_calls: list[str]) -> None:
    """``validated`` runs the validator once per schedule object and reuses the answer only
    while the schedule's instance and actions are unchanged."""
    import gc

    calls, real = validate_calls, validate
    limited = _inst().replace(**{"memory.limit": 1})  # gpipe holds 3, 1f1b 2 on device 0
    # run_all checks those at the lower bound (to skip searches); the ones over the memory
    # limit are passed over by the memory rule alone (exceeds_memory_limit), not validated
    known = registry.run_all(limited)
    assert set(calls) < set(known)
    assert not {n for n in calls if exceeds_memory_limit(known[n])}
    first = {name: registry.validated(s) for name, s in known.items()}
    assert sorted(calls) == sorted(known)  # each validated once over both ...
    assert {name: registry.validated(s) for name, s in known.items()} == first
    assert sorted(calls) == sorted(known)  # ... and not again
    assert first["gpipe"] and all("memory limit" in v for v in first["gpipe"])
    assert first == {name: real(s) for name, s in known.items()}  # the same answers
    first["gpipe"].clear()  # a copy: the cached answer is not changed
    assert registry.validated(known["gpipe"]) == real(known["gpipe"])

    sch = known["1f1b"]
    a = sch.actions[0]
    sch.actions[0] = a._replace(start=a.start + 0.5, end=a.end + 0.5)  # changed in place
    calls.clear()
    assert registry.validated(sch) == real(sch) != first["1f1b"]
    assert calls == ["1f1b"]
    calls.clear()
    free = _inst()  # another instance: validated against it, not cached
    assert registry.validated(known["gpipe"], free) == [] and calls == ["gpipe"]
    assert registry.validated(known["gpipe"], free) == [] and calls == ["gpipe", "gpipe"]

    n = len(registry._VALIDATED)
    del known, sch, first
    gc.collect()
    assert len(registry._VALIDATED) < n  # entries go with their schedules


def test_memory_rule_and_plain_bound_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """``run_all`` asks the memory rule of every schedule so far before each expensive
    generator, and the plain lower bound before each: each is computed once per schedule
    object and once per instance, and the memory rule again only after a change."""
    import cpsched.graph

    rule: list[str] = []
    bounds: list[int] = []
    real_rule, real_bound = registry.exceeds_memory_limit, cpsched.graph.lower_bound

    def counting_rule(schedule, instance=None):  # noqa: ANN001, ANN202
        rule.append(schedule.method)
        return real_rule(schedule, instance)

    def counting_bound(*a, **k):  # noqa: ANN002, ANN003, ANN202
        bounds.append(1)
        return real_bound(*a, **k)

    monkeypatch.setattr(registry, "exceeds_memory_limit", counting_rule)
    monkeypatch.setattr(cpsched.graph, "lower_bound", counting_bound)
    # p=4 v=2 m=8 F=5 B=10, latency 0.5, limit 6 (docs/spec.md §6 with a latency): both
    # list portfolios run (nothing closed-form meets the bound), some closed-form ones fit
    limited = _inst().replace(**{"pipeline.devices": 4, "pipeline.stages_per_device": 2,
                                 "pipeline.microbatches": 8, "costs.forward": 5,
                                 "costs.backward": 10, "costs.p2p_latency": 0.5,
                                 "memory.limit": 6})
    known = registry.run_all(limited)
    assert {"list", "list-retimed"} <= set(known)
    assert sorted(rule) == sorted(set(rule)) and set(rule) <= set(known)
    assert len(bounds) == 1
    for s in known.values():
        assert registry.over_memory_limit(s) == real_rule(s)
    assert sorted(rule) == sorted(set(rule))  # answers reused: no second ask
    sch = known["gpipe"]
    asked = rule.count("gpipe")
    sch.actions[:] = [a._replace(start=a.start * 0.5, end=a.end * 0.5) for a in sch.actions]
    assert registry.over_memory_limit(sch) == real_rule(sch)
    assert rule.count("gpipe") == asked + 1  # changed in place: asked again
    other = limited.replace(**{"memory.limit": 100})  # another instance: asked, not cached
    before = rule.count("list")
    assert not registry.over_memory_limit(known["list"], other)
    assert not registry.over_memory_limit(known["list"], other)
    assert rule.count("list") == before + 2


def test_past_the_deadline_the_list_scheduler_still_runs_once_when_nothing_fits() -> None:
    # a caller's deadline already passed (a loaded machine, a short time limit): the
    # expensive list portfolio is skipped only when some schedule so far is valid; on
    # DualPipe's shape under a limit below DualPipe's own peak none is, and one list pass
    # (strict reservation: it fits) keeps the warm start from being the sequential schedule
    from conftest import make

    from cpsched.validate import validate

    capped = make(4, 1, 16, F=1, B=2, placement="bidirectional", limit=2)
    past = time.perf_counter() - 1.0
    known = registry.run_all(capped, past)
    assert "list" in known and not validate(known["list"])
    assert all(validate(s) for name, s in known.items() if name != "list")
    roomy = make(4, 1, 16, F=1, B=2, limit=4)  # 1F1B fits: nothing expensive runs
    known = registry.run_all(roomy, past)
    assert "list" not in known and "1f1b" in known and not validate(known["1f1b"])


def test_min_seconds_skips_a_generator_that_only_improves(monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    # list-retimed asks for some time left (ScheduleSpec.min_seconds): with less than that
    # before the deadline and a valid schedule so far, run_all does not start it; the list
    # portfolio, which has no such need, still runs
    import dataclasses

    from conftest import make

    inst = make(4, 1, 8, F=1, B=2, latency=0.5, limit=4)
    spec = registry.REGISTRY["list-retimed"]
    assert spec.min_seconds is not None and spec.min_seconds(inst) > 0
    soon = time.perf_counter() + 60.0
    monkeypatch.setitem(registry.REGISTRY, "list-retimed",
                        dataclasses.replace(spec, min_seconds=lambda inst: 3600.0))
    known = registry.run_all(inst, soon)
    assert "list" in known and "list-retimed" not in known
    monkeypatch.setitem(registry.REGISTRY, "list-retimed", spec)
    known = registry.run_all(inst, soon)
    assert "list" in known and "list-retimed" in known


# ------------------------------------------------ expensive generators side by side (§45)
def _pid_file_generator(path, generate):  # noqa: ANN001, ANN202
    """``generate`` that first writes the process id it runs in to ``path``."""
    import os

    def gen(inst: Instance):  # noqa: ANN202
        path.write_text(str(os.getpid()))
        return generate(inst)

    return gen


def _expensive(name: str, generate) -> registry.ScheduleSpec:  # noqa: ANN001
    return registry.ScheduleSpec(name, "test", "none", "test", check=lambda inst: None,
                                 generate=generate, expensive=True)


def test_two_processes_give_the_schedules_of_one() -> None:
    # list and list-retimed (a latency and a memory limit): the second runs in a forked
    # child; every schedule, action by action, as when they run one after the other
    from conftest import make

    inst = make(4, 2, 16, F=1, B=2, W=1, latency=0.5, limit=6)
    timing: dict[str, float] = {}
    one = registry.run_all(inst)
    two = registry.run_all(inst, processes=2, timing=timing)
    assert list(one) == list(two) and {"list", "list-retimed"} <= set(two)
    for name in one:
        assert one[name].actions == two[name].actions, name
    assert 0.0 <= timing["waited"] < 60.0


def test_the_second_expensive_generator_runs_in_another_process(
        monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # noqa: ANN001
    import os

    from conftest import make

    # GPipe's orders over the memory limit: never optimal, so neither is skipped
    inst, gen = make(2, 1, 3, F=1, B=2, limit=1), registry.REGISTRY["gpipe"].generate
    first, second = tmp_path / "first", tmp_path / "second"
    monkeypatch.setattr(registry, "REGISTRY", {
        "a": _expensive("a", _pid_file_generator(first, gen)),
        "b": _expensive("b", _pid_file_generator(second, gen))})
    known = registry.run_all(inst, processes=2)
    assert set(known) == {"a", "b"} and known["a"].actions == known["b"].actions
    assert int(first.read_text()) == os.getpid() != int(second.read_text())
    known = registry.run_all(inst, processes=1)  # one process: both here
    assert int(first.read_text()) == os.getpid() == int(second.read_text())


def test_an_error_in_the_child_is_raised_here(monkeypatch: pytest.MonkeyPatch) -> None:
    from conftest import make

    inst, gen = make(2, 1, 3, F=1, B=2, limit=1), registry.REGISTRY["gpipe"].generate

    def stuck(inst: Instance):  # noqa: ANN202
        raise ZeroDivisionError("the list scheduler got stuck at t = 3")

    monkeypatch.setattr(registry, "REGISTRY", {"a": _expensive("a", gen),
                                               "b": _expensive("b", stuck)})
    with pytest.raises(ZeroDivisionError, match="stuck at t = 3"):
        registry.run_all(inst, processes=2, failed={})


def test_a_child_is_stopped_when_the_first_meets_the_bound(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # as one at a time: once a schedule meets the lower bound, the later expensive ones are
    # not needed; the child still running is killed, not waited for
    gen = registry.REGISTRY["1f1b"].generate  # optimal on _inst(): 12 = the lower bound

    def slow(inst: Instance):  # noqa: ANN202
        time.sleep(60)
        return gen(inst)

    monkeypatch.setattr(registry, "REGISTRY", {"a": _expensive("a", gen),
                                               "b": _expensive("b", slow)})
    t = time.perf_counter()
    known = registry.run_all(_inst(), processes=2)
    assert list(known) == ["a"] and known["a"].makespan == 12
    assert time.perf_counter() - t < 30.0


def test_one_at_a_time_where_no_child_can_start(monkeypatch: pytest.MonkeyPatch) -> None:
    import multiprocessing as mp

    from conftest import make

    inst = make(4, 2, 16, F=1, B=2, W=1, latency=0.5, limit=6)
    monkeypatch.setattr(mp.current_process(), "_config",
                        {**mp.current_process()._config, "daemon": True})

    def no_fork(*args, **kw):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("forked in a daemonic process")

    monkeypatch.setattr(registry, "ForkedCall", no_fork)
    known = registry.run_all(inst, processes=2)
    assert {"list", "list-retimed"} <= set(known)


def test_a_child_past_the_deadline_is_dropped_as_one_at_a_time_would_skip_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the first expensive generator ends past the deadline with a valid schedule: one at a
    # time, the second would not start, so its child's result is not waited for or timed
    # (a short --time-limit keeps its length: docs/modelling.md §45)
    def one_by_one(inst: Instance):  # noqa: ANN202  (valid, 18 > the bound 12)
        time.sleep(1.0)
        row = [Action(k, s, i) for i in range(3) for s, k in ((0, Kind.F), (0, Kind.B))]
        return [[a if a.stage == d else Action(a.kind, d, a.microbatch) for a in row]
                for d in range(2)]

    gen = registry.REGISTRY["gpipe"].generate
    monkeypatch.setattr(registry, "REGISTRY", {"a": _expensive("a", one_by_one),
                                               "b": _expensive("b", gen)})
    for processes in (1, 2):
        known = registry.run_all(_inst(), time.perf_counter() + 0.5, processes=processes)
        assert list(known) == ["a"] and known["a"].makespan == 18
    known = registry.run_all(_inst(), None, processes=2)
    assert list(known) == ["a", "b"]
