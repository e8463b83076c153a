"""Task graph, windows and lower bounds (docs/spec.md §1, §6; docs/modelling.md §4)."""

from __future__ import annotations

import networkx as nx
import pytest
from conftest import make

from cpsched.graph import build_task_graph, lower_bound, overlap_lower_bound, windows
from cpsched.model import B, F, I, W


def test_edges_and_lags() -> None:
    inst = make(2, 2, 1, F=1, B=2, latency=0.5)
    g = build_task_graph(inst)
    assert g.number_of_nodes() == 8
    assert inst.time_scale == 10
    assert g.edges[F(0, 0), F(1, 0)]["lag"] == 5  # devices 0 -> 1, in ticks
    assert g.edges[F(3, 0), B(3, 0)]["lag"] == 0
    assert g.edges[B(1, 0), B(0, 0)]["lag"] == 5
    assert nx.is_directed_acyclic_graph(g)


def test_split_edges_and_fused_choice() -> None:
    inst = make(2, 1, 1, F=1, I=1, W=1)
    g = build_task_graph(inst)
    assert set(g.predecessors(I(0, 0))) == {I(1, 0)}
    assert set(g.predecessors(W(0, 0))) == {I(0, 0)}
    fused = build_task_graph(inst, [F(0, 0), F(1, 0), B(1, 0), I(0, 0), W(0, 0)])
    assert set(fused.predecessors(I(0, 0))) == {B(1, 0)}
    assert fused.nodes[B(1, 0)]["duration"] == 2


@pytest.mark.parametrize(("p", "m"), [(2, 1), (4, 8), (8, 3), (3, 5)])
def test_v1_bound_is_1f1b_makespan(p: int, m: int) -> None:
    # docs/spec.md §6: (p - 1)(F + B) + m (F + B) for v = 1 without split or latency
    inst = make(p, 1, m, F=5, B=10)
    assert lower_bound(inst).value == (p - 1 + m) * 15


def test_article_bound() -> None:
    assert lower_bound(make(4, 2, 8)).value == 285


def test_windows_contain_asap_and_alap() -> None:
    inst = make(2, 1, 2, F=1, B=2)
    g = build_task_graph(inst)
    w = windows(g, 9)
    # tail of F(0,0): F(1,0) B(1,0) B(0,0) = 1 + 2 + 2; latest start 9 - 5 - 1
    assert w[F(0, 0)] == (0, 3)
    assert w[F(1, 1)][0] == 1  # resources are not in the windows
    for lo, hi in w.values():
        assert lo <= hi


def test_overlap_bound_not_above_plain() -> None:
    plain = make(4, 1, 8, F=2, I=1, W=1, placement="bidirectional")
    ov = make(4, 1, 8, F=2, I=1, W=1, placement="bidirectional", overlap=3)
    assert overlap_lower_bound(plain) == lower_bound(plain).value
    assert overlap_lower_bound(ov) < lower_bound(ov).value


def test_task_graph_is_kept_for_the_last_instance_only() -> None:
    import cpsched.graph as graph_module

    inst = make(4, 2, 8)
    g = graph_module.task_graph(inst)
    assert graph_module.task_graph(inst) is g  # kept
    assert sorted(g.nodes) == sorted(build_task_graph(inst).nodes)
    assert sorted(g.edges) == sorted(build_task_graph(inst).edges)
    assert graph_module.lower_bound(inst).value == graph_module.lower_bound(
        inst, build_task_graph(inst)).value
    nine = inst.replace(**{"pipeline.microbatches": 9})  # another instance: its own graph
    g9 = graph_module.task_graph(nine)
    assert g9 is not g and len(g9) == len(build_task_graph(nine)) > len(g)
    assert graph_module.task_graph(inst) is not g  # only the last one is kept
    other = make(4, 2, 8)  # equal to inst, yet another object: its own graph
    assert graph_module.task_graph(other) is not graph_module.task_graph(inst)
    assert len(graph_module._LAST_GRAPH) == 1
