"""The span bound (docs/modelling.md §53): never above a proven optimum or the marker gaps of
any valid schedule, exact where a device holds one microbatch's turn, only where it applies."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import known_upper, make, model_optimum
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from cpsched.actions import Kind
from cpsched.cli import app
from cpsched.instance import Instance
from cpsched.solver import facade
from cpsched.solver.span_bound import (
    applies,
    combine,
    compose,
    marker,
    min_span,
    peak_count,
    span_bound,
)
from cpsched.validate import validate


def _profiled(p: int, v: int, m: int, limit: float | None) -> Instance:
    """The limit-8 scale row's costs (F = I = 1, W = 0.65; the last stage F = 1.4,
    W = 1.105; p2p 0.016), activation 0.25 a stage, released by ``W``."""
    S = p * v
    return make(p, v, m, F=[1.0] * (S - 1) + [1.4], I=1.0,  # type: ignore[arg-type]
                W=[0.65] * (S - 1) + [1.105], latency=0.016, activation=0.25,  # type: ignore[arg-type]
                limit=limit, name="span")


def _bound(inst: Instance, upper: int | None = None, **kw: object) -> tuple[int, object]:
    """The combinatorial bound and the span bound from it against ``upper`` (ticks; default
    :func:`conftest.known_upper`), one worker, deterministic."""
    lb, g, _, _, ordered = facade._bounds(inst)  # noqa: SLF001
    r = span_bound(inst, ordered, lambda a: g.nodes[a]["duration"], lb,
                   known_upper(inst) if upper is None else upper, **kw)  # type: ignore[arg-type]
    return lb, r


def test_compose_adds_the_best_spans() -> None:
    assert compose([5], 3) == [0, 5, 10, 15]
    assert compose([3, 10], 4) == [0, 3, 10, 13, 20]
    assert compose([], 2) == [0, 0, 0]


def test_applies_marker_and_peak_count() -> None:
    inst = _profiled(4, 4, 8, 1.0)
    assert applies(inst) and peak_count(inst) == 1 and marker(inst) == 12
    assert peak_count(_profiled(8, 4, 16, 2.0)) == 2
    assert not applies(_profiled(4, 4, 8, None))
    assert not applies(_profiled(4, 4, 1, 1.0))  # one microbatch: no span
    assert not applies(_profiled(4, 4, 8, 100.0))  # 100 turns at once: the model too large
    assert not applies(make(2, 1, 4, placement="bidirectional", limit=4))
    assert not applies(make(2, 1, 4, limit=4, overlap=12.0))
    with pytest.raises(ValueError, match="two microbatches"):
        min_span(inst, 12, 0, 10**6, deterministic_time=1.0)


def test_limit_one_microbatch_meets_the_optimum() -> None:
    """p = 4, v = 4, m = 8, limit 1 (a device holds one microbatch's four activations): the
    optimum 192.57 (proven by the full model, docs/modelling.md §21; 22.72 a microbatch from
    m = 1 to 5, §53) is the span bound, from Δ_1 = 22.72 alone."""
    inst = _profiled(4, 4, 8, 1.0)
    lb, r = _bound(inst, deterministic_time=1.0)
    assert lb == inst.ticks(178.346)
    assert r.stage == 12 and r.spans[0] == inst.ticks(22.72) and r.solved[0]  # type: ignore[attr-defined]
    assert r.bound == inst.ticks(192.57)  # type: ignore[attr-defined]
    head = inst.ticks(12.192)  # twelve forwards and latencies before F(12)
    rest = inst.ticks(192.57 - 12.192 - 7 * 22.72)
    assert combine(inst, 12, [inst.ticks(22.72)], facade._bounds(inst)[4],  # noqa: SLF001
                   inst.ticks(1.0)) == head + 7 * inst.ticks(22.72) + rest


def test_article_memory6_proves_its_optimum() -> None:
    """The article's instance at limit 6: combinatorial 315, the optimum 325 (the instance
    file's description) — the span bound is 325."""
    from cpsched.instance.io import load_instance
    inst = load_instance(Path(__file__).resolve().parents[1] / "instances"
                         / "article-memory6.toml")
    lb, r = _bound(inst, deterministic_time=1.0)
    assert lb == inst.ticks(315) and r.bound == inst.ticks(325)  # type: ignore[attr-defined]


def test_solve_reports_it_and_proves_the_optimum() -> None:
    inst = _profiled(4, 4, 8, 1.0)
    res = facade.solve(inst, time_limit=None, workers=1)
    span = res.stats["span"]
    assert span is not None and span["bound"] == 192.57 and span["spans"][0] == 22.72
    assert res.schedule.makespan == pytest.approx(192.57)
    assert res.schedule.lower_bound == pytest.approx(192.57)


def test_marker_gaps_of_known_schedules_are_at_least_the_spans() -> None:
    """Every valid schedule that fits, its marker starts sorted: any ``n`` steps apart are
    at least ``Δ_n`` (the restriction argument holds for every schedule, not only FIFO)."""
    inst = _profiled(2, 2, 6, 0.5)
    _, r = _bound(inst, deterministic_time=1.0)
    assert r.spans  # type: ignore[attr-defined]
    known = facade._known(inst, None, time.perf_counter(), 1)  # noqa: SLF001
    checked = 0
    for sched in known.values():
        if validate(sched):  # any fault, the memory limit's among them
            continue
        t = sorted(a.start for a in sched.actions
                   if a.kind == Kind.F and a.stage == r.stage)  # type: ignore[attr-defined]
        for n, span in enumerate(r.spans, 1):  # type: ignore[attr-defined]
            assert all(inst.ticks(t[i + n] - t[i]) >= span for i in range(len(t) - n))
        checked += 1
    assert checked


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(p=st.integers(2, 3), v=st.integers(1, 2), m=st.integers(2, 4),
       placement=st.sampled_from(["loop", "v"]), split=st.booleans(),
       extra=st.sampled_from([0.0, 0.25, 0.5]), latency=st.sampled_from([0.0, 0.1]))
def test_never_above_the_optimum(p: int, v: int, m: int, placement: str, split: bool,
                                 extra: float, latency: float) -> None:
    """On small instances with a limit of one or two microbatches' activations per device,
    the span bound never exceeds the full model's proven optimum (no bound of ours in it)."""
    if placement == "v" and v != 2:
        v = 2
    inst = make(p, v, m, F=1.0, B=None if split else 2.0, I=1.0 if split else None,
                W=0.5 if split else None, placement=placement, latency=latency,
                activation=0.5, limit=0.5 * v + extra, name="prop")
    if not applies(inst):
        return
    upper = known_upper(inst)
    opt = model_optimum(inst, upper)
    if opt is None:
        return
    _, r = _bound(inst, upper, deterministic_time=0.5)
    assert r.bound <= opt  # type: ignore[attr-defined]


def test_cli_reports_the_span_bound(tmp_path: Path) -> None:
    """p=4 v=2 m=8 F=2 B=3 limit 3 (the relaxations' instance of tests/test_cli.py, optimum
    192): the tent bound gives 180, the span bound 192 before the search."""
    r = CliRunner().invoke(app, [
        "solve", "-p", "4", "-v", "2", "-m", "8", "--forward", "2", "--backward", "3",
        "--memory-limit", "3", "--out", str(tmp_path), "-w", "1", "--no-plot",
        "--param", "max_number_of_conflicts=10", "-t", "120"])
    assert r.exit_code == 0, r.output
    line = next(x for x in r.output.splitlines() if x.startswith("span bound:"))
    assert line.startswith("span bound: 180 -> 192 in ")
    assert "cpsat: OPTIMAL, makespan 192, lower bound 192" in r.output
