"""The solve methods (cpsched.solver.prelude): which of the window search and the full model
run, and what each returns (docs/modelling.md §17)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import make
from typer.testing import CliRunner

import cpsched.solver.facade as facade
import cpsched.solver.lns as lns
import cpsched.solver.prelude as prelude
import cpsched.solver.relaxation as relaxation
from cpsched import solve
from cpsched.cli import app
from cpsched.instance import Instance
from cpsched.schedules.transforms import sequential_schedule
from cpsched.solver.prelude import METHODS, check_method
from cpsched.validate import validate

# memory-capped p = 4, v = 2, m = 16: the sequential schedule leaves a gap to close
INST = make(4, 2, 16, limit=6)


def test_methods_and_a_bad_one() -> None:
    assert METHODS == ("auto", "model", "search")
    for m in METHODS:
        check_method(m)
    with pytest.raises(ValueError, match="method = 'fast': must be one of auto, model, search"):
        check_method("fast")
    with pytest.raises(ValueError, match="must be one of"):
        solve(INST, time_limit=None, method="fast")


def test_search_runs_the_window_search_on_any_size_and_builds_no_model() -> None:
    # below lns.MIN_ACTIONS: auto would build the full model only
    assert INST.n_actions < lns.MIN_ACTIONS
    seq = sequential_schedule(INST)
    res = solve(INST, time_limit=None, workers=1, candidates={"sequential": seq},
                parameters={"max_deterministic_time": 0.5}, method="search")
    assert res.message == facade.SEARCH_MESSAGE and res.solver_status == "UNKNOWN"
    assert res.schedule is not None and validate(res.schedule) == []
    ws = res.stats["window_search"]
    assert ws is not None and ws["windows"] >= 1
    assert res.makespan == ws["makespan"] < seq.makespan
    # no model: the bound is the combinatorial one
    assert res.schedule.lower_bound == res.stats["combinatorial_bound"]
    assert "restricted" not in res.stats  # the model's stats


def test_model_skips_the_window_search_where_auto_runs_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lns, "MIN_ACTIONS_LIMITED", 10)  # auto searches windows on this model
    seq = sequential_schedule(INST)
    kw = {"time_limit": None, "workers": 1, "candidates": {"sequential": seq},
          "parameters": {"max_deterministic_time": 0.5}}
    auto = solve(INST, **kw)
    assert auto.stats["window_search"] is not None
    res = solve(INST, method="model", **kw)
    assert res.stats["window_search"] is None and "restricted" in res.stats
    assert res.schedule is not None and validate(res.schedule) == []
    assert res.makespan <= seq.makespan


def test_cli_method(tmp_path: Path) -> None:
    runner = CliRunner()
    path = Path(__file__).resolve().parents[1] / "instances" / "article-memory6.toml"
    bad = runner.invoke(app, ["solve", str(path), "--method", "fast", "-o", str(tmp_path)])
    assert bad.exit_code == 2
    assert "--method = 'fast': must be one of auto, model, search" in bad.output
    assert not list(tmp_path.iterdir())
    ok = runner.invoke(app, ["solve", str(path), "--method", "search", "-o", str(tmp_path),
                             "--no-plot", "-t", "10", "-w", "1"])
    assert ok.exit_code == 0, ok.output
    assert "method search" in ok.output
    assert (tmp_path / "article-memory6.json").exists()


def test_search_with_an_optimal_warm_start_says_so() -> None:
    # no memory limit: 1F1B meets the bound, the window search has nothing to do
    inst = make(4, 1, 8)
    res = solve(inst, time_limit=None, workers=1, method="search")
    assert res.message == facade.SEARCH_DONE_MESSAGE and res.stats["window_search"] is None
    assert res.schedule is not None and validate(res.schedule) == []
    assert res.status == "OPTIMAL" and res.makespan == res.lower_bound


def test_no_model_when_the_warm_start_meets_the_bound() -> None:
    # no memory limit: 1F1B meets the bound, so the model could only prove it again
    res = solve(make(4, 1, 8), time_limit=None, workers=1)
    assert res.status == "OPTIMAL" and res.makespan == res.lower_bound
    assert res.message == "" and "restricted" not in res.stats  # no model was built
    assert res.schedule is not None and validate(res.schedule) == []


def test_no_window_search_or_model_without_time_for_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # with less time left than setting up the window search takes, neither it nor the model
    # runs: the warm start comes back, validated, with the combinatorial bound, and says so
    monkeypatch.setattr(lns, "MIN_ACTIONS_LIMITED", 10)  # auto would search windows on it
    monkeypatch.setattr(prelude, "MIN_WINDOW_SECONDS", 1e6)
    monkeypatch.setattr(facade, "MODEL_SECONDS_PER_ACTION", 1e6)
    monkeypatch.setattr(prelude, "MODULO_MIN_ACTIONS_LIMITED", 10**9)  # keep the warm start
    seq = sequential_schedule(INST)
    for method in ("auto", "search"):
        res = solve(INST, time_limit=20, workers=1, candidates={"sequential": seq},
                    method=method)
        assert res.message == facade.NO_TIME_WARM_MESSAGE, method
        assert res.stats["window_search"] is None and "restricted" not in res.stats
        assert res.schedule is not None and validate(res.schedule) == []
        assert res.makespan == seq.makespan and res.status == "FEASIBLE"
        assert res.schedule.lower_bound == res.stats["combinatorial_bound"]


def test_window_setup_seconds_grow_with_the_model() -> None:
    small, large = make(4, 1, 8), make(32, 2, 256)
    assert prelude.window_setup_seconds(small) == pytest.approx(
        prelude.MIN_WINDOW_SECONDS + prelude.WINDOW_SETUP_SECONDS_PER_ACTION * small.n_actions)
    assert prelude.window_setup_seconds(large) > prelude.window_setup_seconds(small)


def test_auto_searches_windows_from_fewer_actions_with_pairs_or_a_limit() -> None:
    # with an overlap cost the full model finds little from lns.MIN_ACTIONS_PAIRS actions on
    # (docs/modelling.md §17, *Pairs below 1500 actions*), under a memory limit from
    # lns.MIN_ACTIONS_LIMITED (§32); without either, from lns.MIN_ACTIONS
    plain = make(8, 1, 32, F=1, I=1, W=1, placement="bidirectional")
    pairs = make(8, 1, 32, F=1, I=1, W=1, placement="bidirectional", overlap=2.5)
    capped = make(8, 1, 32, F=1, I=1, W=1, placement="bidirectional", limit=8)
    assert lns.MIN_ACTIONS_PAIRS <= plain.n_actions == pairs.n_actions < lns.MIN_ACTIONS
    assert lns.MIN_ACTIONS_LIMITED <= capped.n_actions < lns.MIN_ACTIONS
    assert not prelude.search_applies(plain)
    assert prelude.search_applies(pairs)
    assert prelude.search_applies(capped)
    assert not prelude.search_applies(make(4, 1, 8, F=1, I=1, W=1, placement="bidirectional",
                                           overlap=2.5))
    assert not prelude.search_applies(make(4, 1, 8, F=1, I=1, W=1, limit=2))


@pytest.mark.parametrize(("overlap", "improver"), [(2.5, "improve_overlap"),
                                                  (None, "improve")])
def test_auto_leaves_the_full_model_half_of_the_time_below_min_actions(
        monkeypatch: pytest.MonkeyPatch, overlap: float | None, improver: str) -> None:
    # a small pair model, or a small memory-capped one (docs/modelling.md §32), gets
    # WINDOW_SHARE_SMALL of the time left for its windows
    inst = make(8, 1, 32, F=1, I=1, W=1, placement="bidirectional", overlap=overlap, limit=8)
    seen: dict[str, float] = {}

    def improve(inst, g, hint, *, deadline, **kw):  # noqa: ANN001, ANN003, ANN202
        seen["until"], seen["now"] = deadline, prelude.time.perf_counter()
        raise StopIteration

    monkeypatch.setattr(lns, improver, improve)
    end = prelude.time.perf_counter() + 20
    with pytest.raises(StopIteration):
        solve(inst, time_limit=20, workers=1,
              candidates={"sequential": sequential_schedule(inst)})
    share = (seen["until"] - seen["now"]) / (end - seen["now"])
    assert share == pytest.approx(prelude.WINDOW_SHARE_SMALL, abs=0.02)


def test_search_share_by_size_and_what_may_follow() -> None:
    # docs/modelling.md §33: all of the time from lns.MIN_ACTIONS actions on, unless the
    # one-device relaxation may follow (a limit, no overlap cost, few actions a device)
    small = make(8, 1, 32, F=1, I=1, W=1, placement="bidirectional", limit=8)
    plain = make(32, 2, 64)
    pairs = make(16, 1, 64, F=1, I=1, W=1, placement="bidirectional", overlap=2.5)
    relaxable = make(16, 1, 64, F=1, I=1, W=1, limit=8)  # 192 actions a device
    crowded = make(16, 2, 64, limit=8)  # 256 actions a device
    assert small.n_actions < lns.MIN_ACTIONS
    for inst in (plain, pairs, relaxable, crowded):
        assert inst.n_actions >= lns.MIN_ACTIONS
        assert prelude.search_share(inst, "search") == 1.0
    assert prelude.search_share(small) == prelude.WINDOW_SHARE_SMALL
    assert prelude.search_share(small, "search") == 1.0
    assert relaxable.n_actions // relaxable.p <= relaxation.MAX_ACTIONS
    assert prelude.search_share(relaxable) == prelude.WINDOW_SHARE
    assert relaxation.may_follow_search(relaxable)
    assert not any(relaxation.may_follow_search(i) for i in (plain, pairs, crowded))
    assert crowded.n_actions // crowded.p > relaxation.MAX_ACTIONS
    for inst in (plain, pairs, crowded):
        assert prelude.search_share(inst) == 1.0


def test_a_large_model_is_searched_to_the_time_limit_without_a_full_model(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a window search that runs until its deadline (all of the time left on a large model,
    # §33) leaves no model: its schedule comes back, validated, and the result says why
    inst = make(4, 2, 16)
    seq = sequential_schedule(inst)
    monkeypatch.setattr(lns, "MIN_ACTIONS", 10)
    seen: dict[str, float] = {}

    def improve(inst, g, hint, *, deadline, **kw):  # noqa: ANN001, ANN003, ANN202
        seen["until"], seen["now"] = deadline, prelude.time.perf_counter()
        prelude.time.sleep(max(0.0, deadline - prelude.time.perf_counter()))
        return dict(hint), lns.LnsStats(windows=1, makespan=2**40)

    monkeypatch.setattr(lns, "improve", improve)
    end = prelude.time.perf_counter() + 4
    res = solve(inst, time_limit=4, workers=1, candidates={"sequential": seq})
    share = (seen["until"] - seen["now"]) / (end - seen["now"])
    assert share > 0.8  # all of it but what is kept back for the end
    assert res.message == facade.SEARCH_TIME_MESSAGE and res.solver_status == "UNKNOWN"
    assert "restricted" not in res.stats  # no model was built
    assert res.schedule is not None and validate(res.schedule) == []
    assert res.makespan == seq.makespan


def test_the_model_runs_when_the_search_ends_early(monkeypatch: pytest.MonkeyPatch) -> None:
    # a search that ends before its deadline (sweeps that change nothing) leaves the rest
    # of the time to the full model, which may prove an optimum the search cannot
    inst = make(4, 2, 16)
    seq = sequential_schedule(inst)
    monkeypatch.setattr(lns, "MIN_ACTIONS", 10)

    def improve(inst, g, hint, **kw):  # noqa: ANN001, ANN003, ANN202
        return dict(hint), lns.LnsStats(windows=1, makespan=2**40)

    monkeypatch.setattr(lns, "improve", improve)
    res = solve(inst, time_limit=30, workers=1, candidates={"sequential": seq})
    assert "restricted" in res.stats and res.stats["window_search"] is not None
    assert res.status == "OPTIMAL" and res.schedule is not None
    assert validate(res.schedule) == []


def _dualpipe_shape(p: int, m: int, **more: Any) -> Instance:
    """DualPipe's shape (docs/modelling.md §40): F = I = W = 1, F&B pair 2.5."""
    return make(p, 1, m, F=1, I=1, W=1, overlap=2.5, placement="bidirectional", **more)


def test_solve_takes_the_dualpipe_family_schedule_when_shorter() -> None:
    """p = 6, m = 12: DualPipe 36, the bound 35; the family's tight middle (§47) and then
    the family (§40) find 35.5 and ``solve`` keeps it — one worker, no time limit, a
    deterministic budget for the full model."""
    inst = _dualpipe_shape(6, 12)
    res = solve(inst, workers=1, time_limit=None, parameters={"max_deterministic_time": 2.0})
    assert res.stats["dualpipe_family"]["makespan"] == 35.5
    assert res.stats["dualpipe_family"]["tight"] == 35.5
    assert res.makespan <= 35.5 and validate(res.schedule) == []
    assert 35 <= res.lower_bound <= res.makespan
    model = solve(inst, workers=1, time_limit=None, method="model",
                  parameters={"max_deterministic_time": 2.0})
    assert model.stats["dualpipe_family"] is None  # the full model alone, as asked
    loop = make(6, 1, 12, F=1, I=1, W=1)  # no pairs: it does not run
    assert solve(loop, workers=1, time_limit=None,
                 parameters={"max_deterministic_time": 2.0}).stats["dualpipe_family"] is None
