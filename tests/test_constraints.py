"""Heads and tails with the implied orders (cpsched.solver.constraints.ordered_heads_tails,
docs/modelling.md §30): at least the plain ones, kept by every schedule of the model (FIFO,
memory and footprint precedences hold there), and the bound they give is never above a
proven optimum or a valid schedule."""

from __future__ import annotations

import time

import networkx as nx
import pytest
from conftest import make
from hypothesis import HealthCheck, given, settings
from ortools.sat.python import cp_model
from test_bounds import (
    assert_below_a_proven_optimum,
    assert_below_every_valid_schedule,
    limited_instances,
    starved_instances,
)
from test_solver_overlap import overlap_instances

import cpsched.solver.facade as facade
from cpsched.graph import (
    build_task_graph,
    heads_and_tails,
    lower_bound,
    overlap_heads_tails,
    overlap_lower_bound,
)
from cpsched.instance import Instance
from cpsched.solver import PipelineModel
from cpsched.solver.constraints import ordered_heads_tails
from cpsched.solver.facade import combinatorial_bound


def _both(inst: Instance) -> tuple[nx.DiGraph, dict, tuple, tuple]:
    """The graph, the durations along chains, the plain and the ordered heads and tails."""
    g = build_task_graph(inst)
    if inst.overlap_forward_backward is None:
        dur = nx.get_node_attributes(g, "duration")
        return g, dur, heads_and_tails(g), ordered_heads_tails(inst, g)
    rel, ht = overlap_heads_tails(inst, g)
    return g, rel, ht, ordered_heads_tails(inst, g, rel)


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(limited_instances())
def test_every_schedule_of_the_model_keeps_them(inst: Instance) -> None:
    """The model imposes FIFO and the memory limit, so each of its schedules starts every
    action at or after its ordered head and ends the makespan at least the tail later."""
    g, dur, (head0, tail0), (head, tail) = _both(inst)
    assert all(head[a] >= head0[a] and tail[a] >= tail0[a] for a in g)
    horizon = 10 * sum(dur.values()) + 100
    model = PipelineModel(inst, horizon, 0)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_deterministic_time = 5.0
    assert solver.solve(model.model) in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    start = model.read(solver)
    makespan = max(start[a] + dur[a] for a in g)
    assert all(start[a] >= head[a] for a in g)
    assert all(start[a] + dur[a] + tail[a] <= makespan for a in g)


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(limited_instances())
def test_the_bound_is_below_a_proven_optimum(inst: Instance) -> None:
    # the oracle's proof uses only the plain bound (test_bounds.proven_optimum)
    g, _, _, ordered = _both(inst)
    assert_below_a_proven_optimum(inst, lambda opt: lower_bound(inst, g, ht=ordered).value)


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(starved_instances())
def test_below_every_valid_schedule_of_starved_instances(inst: Instance) -> None:
    # larger instances at tight limits (half of them get a higher bound than the plain one)
    g, _, _, ordered = _both(inst)
    assert_below_every_valid_schedule(inst, lower_bound(inst, g, ht=ordered).value)


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(overlap_instances())
def test_with_pairs_below_every_valid_schedule_and_a_proven_optimum(inst: Instance) -> None:
    g, rel, (head0, tail0), ordered = _both(inst)
    assert all(ordered[0][a] >= head0[a] and ordered[1][a] >= tail0[a] for a in g)
    bound = overlap_lower_bound(inst, g, relaxed=(rel, ordered))
    assert_below_every_valid_schedule(inst, bound)
    assert_below_a_proven_optimum(inst, lambda opt: bound)


def test_without_a_limit_only_fifo_is_added() -> None:
    # FIFO alone: F(0, i) waits for F(0, i - 1) on device 0, so head F(0, 3) = 3 F; the
    # critical path is unchanged (a device's own work already counts it)
    inst = make(2, 1, 4, F=1, B=2)
    g, _, (head0, _), ordered = _both(inst)
    f3 = next(a for a in g if a.kind.value == "F" and a.stage == 0 and a.microbatch == 3)
    assert head0[f3] == 0 and inst.from_ticks(ordered[0][f3]) == 3
    assert lower_bound(inst, g, ht=ordered).value == lower_bound(inst).value


def test_memory_limit_known_value() -> None:
    # p = 2, one stage per device, F = 1, B = 2, m = 6, limit 1 activation: the memory
    # precedences F(0, i + 1) >= end B(0, i) chain the microbatches one after another on
    # device 0, each a round trip F0 F1 B1 B0 = 6 long: 6 * 6 = 36, the optimum (nothing
    # overlaps on device 0, which holds one activation at a time); the plain bound is 21
    inst = make(2, 1, 6, F=1, B=2, limit=1)
    g, _, _, ordered = _both(inst)
    assert inst.from_ticks(lower_bound(inst).value) == 21
    assert inst.from_ticks(lower_bound(inst, g, ht=ordered).value) == 36
    assert inst.from_ticks(combinatorial_bound(inst)) == 36


@pytest.mark.parametrize("pairs", [False, True])
def test_the_combinatorial_bound_with_and_without_pairs(pairs: bool) -> None:
    # the same instance with an overlap cost (pairs never save here: F + B = 3 <= 3)
    inst = make(2, 1, 6, F=1, B=2, limit=1, overlap=3.0 if pairs else None)
    assert inst.from_ticks(combinatorial_bound(inst)) == 36


def test_left_out_when_the_deadline_is_near() -> None:
    # a time limit bounds the whole command: with no time left the implied orders are not
    # computed: the plain heads and tails stand in for them
    inst = make(2, 1, 6, F=1, B=2, limit=1)
    near = facade._time_for_ordered(inst, time.perf_counter())  # noqa: SLF001
    far = facade._time_for_ordered(inst, time.perf_counter() + 60)  # noqa: SLF001
    assert not near and far and facade._time_for_ordered(inst, None)  # noqa: SLF001
    _, _, ht, _, ordered = facade._bounds(inst, near)  # noqa: SLF001
    assert ordered is ht
    _, _, ht, _, ordered = facade._bounds(inst, far)  # noqa: SLF001
    assert ordered[0] != ht[0] and ordered == _both(inst)[3]
