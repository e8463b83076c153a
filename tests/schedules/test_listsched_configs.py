"""The memory-aware list portfolio's runs (cpsched/schedules/listsched_configs.py)."""

from __future__ import annotations

from conftest import make
from hypothesis import given
from hypothesis import strategies as st

from cpsched.schedules.listsched_configs import (
    PORTFOLIO_RULES,
    SLACKS,
    WINDOWS,
    ilv_configs,
    portfolio_configs,
    spread,
    window_of,
)
from cpsched.schedules.listsched_rules import Problem, default_window, interleaved_cap


def test_window_of() -> None:
    inst = make(4, 2, 8)
    assert window_of(inst, None) is None
    # round(a p + b (p - 1 - d)) for d = 0..3
    assert window_of(inst, (1.0, 1.0)) == (7, 6, 5, 4)
    assert window_of(inst, (0.0, 0.0)) == (1, 1, 1, 1)  # at least one microbatch


def test_memory_aware_runs_fused_and_split() -> None:
    fused = make(4, 2, 8, limit=6)
    runs = portfolio_configs(fused, memory=True)
    # every rule x window x slack, W lazy (no W to place)
    assert len(runs) == len(PORTFOLIO_RULES) * len(WINDOWS) * len(SLACKS)
    assert {r[0] for r in runs} == set(PORTFOLIO_RULES)
    assert all(r[3] == "lazy" and r[4] is None and r[5] is None for r in runs)
    assert {r[2] for r in runs} == {None, 0.0, 1.0, 2.0}  # the largest activation is 1
    split = make(4, 2, 8, F=1, I=1, W=1, limit=6, activation=0.5)
    runs = portfolio_configs(split, memory=True)
    eager = [r for r in runs if r[3] == "eager"]
    # eager W only without a window: one per rule and slack
    assert len(eager) == len(PORTFOLIO_RULES) * len(SLACKS)
    assert all(r[1] is None for r in eager)
    assert {r[2] for r in runs} == {None, 0.0, 0.5, 1.0}  # slacks in largest activations


def test_without_a_limit_the_dfs_window_joins_and_no_slack() -> None:
    inst = make(4, 2, 8)
    runs = portfolio_configs(inst, memory=False)
    assert {r[2] for r in runs} == {None}
    assert default_window(inst) in {r[1] for r in runs}
    assert len(runs) == len(PORTFOLIO_RULES) * (len(WINDOWS) + 1)


def test_ilv_runs() -> None:
    capped = Problem(make(4, 2, 8, limit=6))
    assert ilv_configs(capped, memory=True) == [
        ("ilv", None, 0.0, "lazy", None, None), ("ilv", None, None, "lazy", None, None)]
    free = Problem(make(4, 2, 8))
    assert ilv_configs(free, memory=False) == [
        ("ilv", None, None, "lazy", interleaved_cap(free), None),
        ("ilv", None, None, "lazy", None, None)]
    paired = Problem(make(4, 1, 8, overlap=12.0, limit=6))
    runs = ilv_configs(paired, memory=True)
    assert len(runs) > 2 and {r[5] for r in runs} > {None}  # once per pairing mode


@given(st.integers(0, 40), st.integers(0, 50))
def test_spread_keeps_k_in_order(n: int, k: int) -> None:
    items = [("dfs", None, float(j), "lazy", None, None) for j in range(n)]
    out = spread(items, k)
    assert len(out) == min(n, k)
    assert len(set(out)) == len(out)  # distinct
    assert [x[2] for x in out] == sorted(x[2] for x in out)  # in their order
    if k >= n:
        assert out == items
    elif k > 0:
        assert out[0] == items[0]
