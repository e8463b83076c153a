"""DualPipe's family in ``solve`` (cpsched.solver.family; docs/modelling.md §40, §47, §48)."""

from __future__ import annotations

from typing import Any

from conftest import make

import cpsched.solver.facade as facade
import cpsched.solver.family as family
from cpsched import solve
from cpsched.instance import Instance
from cpsched.schedules import run_schedule
from cpsched.solver.search_run import TrackedStop
from cpsched.validate import validate


def _dualpipe_shape(p: int, m: int, **more: Any) -> Instance:
    """DualPipe's shape (docs/modelling.md §40): F = I = W = 1, F&B pair 2.5."""
    return make(p, 1, m, F=1, I=1, W=1, overlap=2.5, placement="bidirectional", **more)


def test_dualpipe_family_runs_on_dualpipe_shapes_of_its_size_only() -> None:
    inst = _dualpipe_shape(6, 12)
    known = {"dualpipe": run_schedule("dualpipe", inst)}
    lb = facade.combinatorial_bound(inst)
    assert family.family_applies(inst, known, lb)
    assert not family.family_applies(inst, {}, lb)  # no DualPipe candidate
    assert not family.family_applies(inst, known, inst.ticks(known["dualpipe"].makespan))
    big = _dualpipe_shape(16, 64)  # 3072 actions
    assert big.n_actions > family.FAMILY_MAX_ACTIONS
    assert not family.family_applies(big, {"dualpipe": run_schedule("dualpipe", big)}, 0)
    tight = _dualpipe_shape(6, 12, limit=2)  # DualPipe holds more
    assert validate(run_schedule("dualpipe", tight))
    assert not family.family_applies(tight, {"dualpipe": run_schedule("dualpipe", tight)}, 0)


def test_family_candidate_tries_the_tight_middle_at_m_2p_only() -> None:
    """The family's tight middle (§47) runs first where it applies: at p = 6 both find
    35.5; at m = 4p only the family runs (its stats say so) — one worker, deterministic."""
    for m, tight in ((12, 35.5), (24, None)):
        inst = _dualpipe_shape(6, m)
        dualpipe = run_schedule("dualpipe", inst)
        found, stats = family.family_candidate(inst, dualpipe, facade.combinatorial_bound(inst),
                                               None, TrackedStop(None), 1)
        assert stats["tight"] == tight
        assert found is None or (validate(found) == [] and found.makespan < dualpipe.makespan)
        assert stats["makespan"] == (None if found is None else found.makespan)


def test_target_applies_on_the_uniform_shape_at_m_2p_only() -> None:
    assert family.target_applies(_dualpipe_shape(6, 12))
    assert not family.target_applies(_dualpipe_shape(6, 24))  # m = 4p: no tight middle
    profiled = make(6, 1, 12, F=[1, 1, 1, 1, 1, 1.4], I=1, W=1, overlap=2.5,
                    placement="bidirectional")
    assert not family.target_applies(profiled)  # the rules are the uniform shape's (§47)


def test_target_candidate_finds_6p_minus_half_where_it_is_within_one_percent() -> None:
    """At p = 10 the bound is 59 and 59.5 is within 1 % (on the 0.5 grid the cap is 59.5):
    the tight middle finds it; at p = 6 and 8 the cap is the bound itself (35.5 and 47.5
    are 1.4 % and 1.05 % above it), which the family cannot meet (§40 proves 6p - 0.5
    optimal within it), so nothing is found; at p = 12, 71.5 (the outer devices' pairs in
    contiguous ranges, §49, make it quick) — one worker, deterministic."""
    for p, cap, want in ((6, 35, None), (8, 47, None), (10, 59.5, 59.5), (12, 71.5, 71.5)):
        inst = _dualpipe_shape(p, 2 * p)
        dualpipe = run_schedule("dualpipe", inst)
        found, stats = family.target_candidate(inst, dualpipe, facade.combinatorial_bound(inst),
                                               None, TrackedStop(None), 1)
        assert stats["cap"] == cap and stats["makespan"] == want
        if want is not None:
            assert found is not None and validate(found) == [] and found.makespan == want


def test_solve_keeps_the_target_schedule_and_skips_the_family() -> None:
    """p = 10, m = 20 (DualPipe 61, bound 59): the target run (§48) finds 59.5 before the
    window search, which starts from it; the family does not run — one worker, no limit."""
    inst = _dualpipe_shape(10, 20)
    res = solve(inst, workers=1, time_limit=None, parameters={"max_deterministic_time": 2.0})
    assert res.stats["target"]["makespan"] == 59.5
    assert res.stats["dualpipe_family"] is None
    assert res.stats["window_search"]["from"] == 59.5
    assert res.makespan <= 59.5 and validate(res.schedule) == []
    assert 59 <= res.lower_bound <= res.makespan


def test_fitted_start_is_dualpipe_fitted_to_the_limit_when_a_little_longer() -> None:
    """DualPipe over the limit, its pairs over it run backward first (39 at p = 6, limit 6
    against DualPipe's 36 at 7 activations): the window search's start when within
    FITTED_SLACK of the warm start (docs/modelling.md §62)."""
    inst = _dualpipe_shape(6, 12, limit=6)
    known = {"dualpipe": run_schedule("dualpipe", inst)}
    fitted = family.fitted_start(inst, known, inst.ticks(38))
    assert fitted is not None and fitted.makespan == 39.0 and not validate(fitted)
    assert family.fitted_start(inst, known, inst.ticks(37)) is None  # 5.4 % longer
    assert family.fitted_start(inst, {}, inst.ticks(38)) is None
    fits = _dualpipe_shape(6, 12, limit=7)  # DualPipe within the limit: nothing to fit
    assert family.fitted_start(fits, {"dualpipe": run_schedule("dualpipe", fits)},
                               fits.ticks(38)) is None


def test_solve_searches_from_fitted_dualpipe_and_is_never_worse(monkeypatch: Any) -> None:
    """p = 4, limit 4: `list` 24, DualPipe 23.5 over the limit, fitted 25.5.  With the
    slack widened the window search (deterministic, one worker) starts from 25.5; the
    result is valid and never longer than the warm start's 24."""
    inst = _dualpipe_shape(4, 8, limit=4)
    known = {"dualpipe": run_schedule("dualpipe", inst), "list": run_schedule("list", inst)}
    assert known["list"].makespan == 24.0
    monkeypatch.setattr(family, "FITTED_SLACK", 0.1)
    res = solve(inst, time_limit=None, workers=1, method="search", candidates=known)
    fitted = res.stats["dualpipe_fitted"]
    assert fitted["makespan"] == 25.5
    assert fitted["shorter"] == (res.stats["window_search"]["makespan"] < 24.0)
    assert res.stats["window_search"]["from"] == 25.5
    assert res.makespan <= 24.0 and validate(res.schedule) == []
