"""The loose admission slack's search (docs/modelling.md §42): which slacks it runs, where it
stops, and that it finds the bottom of the curves it was made for."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cpsched.schedules.listsched_slack import REFINE, SLACK_GRID, slack_search


def counted(f):  # type: ignore[no-untyped-def]
    calls: list[int] = []

    def g(k: int) -> int | None:
        calls.append(k)
        return f(k)

    return g, calls


def test_finds_the_bottom_of_a_u_shaped_curve() -> None:
    # the p32 loop shape of §42: lowest at 13, between two grid points
    f, calls = counted(lambda k: (k - 13) ** 2)
    seen = slack_search(f)
    assert min(seen, key=seen.__getitem__) == 13
    # the walk passes 14 (best), 18 and 23 (two in a row no shorter), then 13, 15, 12, 16
    assert calls == [4, 6, 8, 11, 14, 18, 23, 13, 15, 12, 16]


def test_stops_after_patience_grid_points_without_a_gain() -> None:
    f, calls = counted(lambda k: k)  # lowest at the smallest slack tried
    seen = slack_search(f)
    assert calls == [4, 6, 8, 3, 5, 2]  # 6 was run already: not again
    assert min(seen.values()) == 2


def test_one_rise_does_not_end_the_walk() -> None:
    # a bump at 6 (the curves are not smooth: one slack more can cost a few per cent)
    values = {4: 100, 6: 104, 8: 96, 11: 90, 14: 95, 18: 99, 23: 98}
    seen = slack_search(lambda k: values.get(k, 200))
    assert seen[11] == 90 and {10, 12, 9, 13} <= seen.keys()
    assert 23 not in seen  # 14 and 18 no shorter than 11: the walk ended there


def test_decreasing_to_the_end_of_the_grid() -> None:
    f, calls = counted(lambda k: -k)
    seen = slack_search(f)
    assert calls == [*SLACK_GRID, 22, 24, 21, 25]
    assert min(seen.values()) == -25


def test_no_time_left_stops_it() -> None:
    budget = iter(range(3))

    def f(k: int) -> int | None:
        return None if next(budget, None) is None else k

    assert slack_search(f) == {4: 4, 6: 6, 8: 8}
    assert slack_search(lambda k: None) == {}


@given(st.lists(st.integers(0, 1000), min_size=40, max_size=40))
def test_runs_what_it_says(values: list[int]) -> None:
    """Every run is a grid slack or a neighbour of the best grid slack, at most once each,
    never negative, at most len(grid) + len(refine) runs; the best grid slack's neighbours
    are always tried."""
    f, calls = counted(lambda k: values[k])
    seen = slack_search(f)
    assert len(calls) == len(set(calls)) == len(seen) <= len(SLACK_GRID) + len(REFINE)
    grid_runs = [k for k in calls if k in SLACK_GRID]  # refining never reaches a new one
    best = min(grid_runs, key=lambda k: (values[k], grid_runs.index(k)))
    assert all(k >= 0 for k in calls)
    assert set(calls) <= set(SLACK_GRID) | {best + d for d in REFINE}
    assert {best + d for d in REFINE if best + d >= 0} <= set(calls)
    assert seen == {k: values[k] for k in calls}
