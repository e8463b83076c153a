"""The general core: resources of any capacity, buffers, list scheduler, CP-SAT on it."""

from __future__ import annotations

import networkx as nx
import pytest
from conftest import make

from cpsched.core import (
    ResourceGraph,
    check_starts,
    heads_and_tails,
    hls_example,
    list_schedule,
    makespan_of,
)
from cpsched.graph import lower_bound, pipeline_resource_graph
from cpsched.model import Kind
from cpsched.schedules import run_schedule
from cpsched.solver import solve_graph


def test_hls_tie_breaker_decides_the_multiplier_start() -> None:
    # The article: pairing a+b with c+d lets the multiplier start one cycle earlier.
    rg = hls_example()
    same = list_schedule(rg, key=lambda t: ["a+b", "c+d", "e+f", "g+h", "m1", "m2",
                                            "sum"].index(t))
    cross = list_schedule(rg, key=lambda t: ["a+b", "e+f", "c+d", "g+h", "m1", "m2",
                                             "sum"].index(t))
    assert min(same["m1"], same["m2"]) == 1 and makespan_of(rg, same) == 4
    assert min(cross["m1"], cross["m2"]) == 2 and makespan_of(rg, cross) == 5
    assert check_starts(rg, same) == [] and check_starts(rg, cross) == []
    res = solve_graph(rg, hint=cross)
    assert res.status == "OPTIMAL" and res.makespan == 4
    assert check_starts(rg, res.starts) == []


def test_capacity_k_is_cumulative() -> None:
    rg = ResourceGraph()
    rg.add_resource("gpu", 2)
    for k in range(5):
        rg.add_task(k, 2, "gpu")
    assert rg.lower_bound() == 5  # ceil(10 / 2)
    starts = list_schedule(rg)
    assert makespan_of(rg, starts) == 6 and check_starts(rg, starts) == []
    res = solve_graph(rg)
    assert res.makespan == 6 and res.status == "OPTIMAL"


def test_buffers_limit_and_violation() -> None:
    rg = ResourceGraph()
    rg.add_resource("r", 2)
    rg.add_pool("mem", 1)
    for t in ("a", "b"):
        rg.add_task(t, 3, "r")
        rg.add_buffer("mem", t, t, 1)
    starts = list_schedule(rg)
    assert makespan_of(rg, starts) == 6  # memory serialises them
    assert any("limit" in v for v in check_starts(rg, {"a": 0, "b": 0}))


def test_bad_graphs_rejected() -> None:
    rg = ResourceGraph()
    with pytest.raises(ValueError, match="capacity"):
        rg.add_resource("r", 0)
    with pytest.raises(ValueError, match="unknown resource"):
        rg.add_task("x", 1, "nope")
    rg.add_task("x", 1)
    rg.add_task("y", 1)
    rg.add_edge("x", "y")
    rg.add_edge("y", "x")
    with pytest.raises(ValueError, match="cycle"):
        list_schedule(rg)


def _orders(inst, starts):  # noqa: ANN001, ANN202
    per = [[] for _ in range(inst.p)]
    for a, _t in sorted(starts.items(), key=lambda x: (x[1], x[0].kind != Kind.F)):
        per[inst.device_of(a.stage)].append(a)
    return per


@pytest.mark.parametrize(("p", "m"), [(4, 8), (3, 5), (2, 2)])
def test_pipeline_builder_afab_and_1f1b_from_tie_breakers(p: int, m: int) -> None:
    # The article's point: breadth-first tie-breaking gives GPipe (AFAB), depth-first gives
    # 1F1B (with the 1F1B window of p - d microbatches in flight on device d as a pool).
    inst = make(p, 1, m, F=1, B=2)
    rg = pipeline_resource_graph(inst)
    bfs = list_schedule(rg, key=lambda a: (a.kind != Kind.F, a.microbatch))
    assert _orders(inst, bfs) == run_schedule("gpipe", inst).orders()
    for d in range(p):
        rg.add_pool(("window", d), p - d)
    for a in rg.graph:
        if a.kind == Kind.F:
            rg.add_buffer(("window", a.stage), a, a._replace(kind=Kind.B), 1)
    dfs = list_schedule(rg, key=lambda a: (a.microbatch, a.kind == Kind.F))
    assert _orders(inst, dfs) == run_schedule("1f1b", inst).orders()
    assert makespan_of(rg, dfs) == (m + p - 1) * 3


def test_pipeline_builder_matches_pipeline_bound() -> None:
    inst = make(4, 2, 8, limit=6)
    rg = pipeline_resource_graph(inst)
    assert rg.lower_bound() == lower_bound(inst).value == 285
    assert len(rg.buffers) == 4 * 2 * 8
    # without the pipeline model's FIFO symmetry breaking the proof is slow (docs/modelling.md §1):
    # check what holds for any run against the known optimum 325
    res = solve_graph(rg, time_limit=3, workers=1)
    assert res.status in ("OPTIMAL", "FEASIBLE")
    assert check_starts(rg, res.starts) == []
    assert res.lower_bound <= 325 <= res.makespan


def test_heads_and_tails_with_durations_and_extra_edges() -> None:
    # a -> b (lag 1), c alone; durations a 2, b 3, c 4.  An extra edge b -> c (lag 0) puts
    # c after b: head(c) = 2 + 1 + 3 = 6; with durations {a: 1, b: 1, c: 1} instead, 3.
    # The same values as adding the edge to a copy; an extra edge that g already has keeps
    # g's lag; an extra edge closing a cycle is refused.
    g = nx.DiGraph()
    g.add_nodes_from([("a", {"duration": 2}), ("b", {"duration": 3}), ("c", {"duration": 4})])
    g.add_edge("a", "b", lag=1)
    head, tail = heads_and_tails(g, extra=[("b", "c"), ("a", "b")])
    assert head == {"a": 0, "b": 3, "c": 6} and tail == {"a": 8, "b": 4, "c": 0}
    h = g.copy()
    h.add_edge("b", "c", lag=0)
    assert (head, tail) == heads_and_tails(h)
    assert heads_and_tails(g, {"a": 1, "b": 1, "c": 1}, [("b", "c")])[0]["c"] == 3
    assert g.number_of_edges() == 1  # g itself is not changed
    with pytest.raises(nx.NetworkXUnfeasible):
        heads_and_tails(g, extra=[("b", "a")])
