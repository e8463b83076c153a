"""The one event engine (cpsched.engine): fixed orders (simulation, the PyTorch dependency
scan), deadlock cycles, and list scheduling by named rules (core and pipeline)."""

from __future__ import annotations

import random

import pytest
from conftest import make

from cpsched.actions import B, F, I, Overlap, W
from cpsched.core import ResourceGraph, by_name, latest_start, list_schedule, makespan_of
from cpsched.engine import (
    ADMIT,
    OrderError,
    TaskTable,
    dispatch,
    lexicographic,
    run_orders,
    waiting_cycle,
)
from cpsched.rules import dependencies, duration, fused_rule_from
from cpsched.schedules import get_schedule
from cpsched.schedules.listsched import (
    PRIORITY_RULES,
    Problem,
    pipeline_list_schedule,
    rule_function,
    run_rule,
)


def _reference_times(inst, orders) -> dict:  # noqa: ANN001
    """A deliberately naive simulator: repeat until nothing changes."""
    rule = fused_rule_from(a for steps in orders for a in steps)
    end: dict = {}
    free = [0] * inst.p
    ptr = [0] * inst.p
    moved = True
    while moved:
        moved = False
        for d, steps in enumerate(orders):
            while ptr[d] < len(steps):
                a = steps[ptr[d]]
                deps = dependencies(inst, a, rule)
                if any(p not in end for p, _ in deps):
                    break
                start = max([free[d], *(end[p] + lag for p, lag in deps)])
                end[a] = free[d] = start + duration(inst, a)
                ptr[d] += 1
                moved = True
    return end


@pytest.mark.parametrize("name,kw", [
    ("1f1b", dict(p=4, m=8, latency=1)),
    ("interleaved-1f1b", dict(p=4, v=2, m=8, F=[1, 2, 1, 3, 1, 2, 1, 3])),
    ("zb-h2", dict(p=3, m=6, F=1, I=2, W=1, latency=0.5)),
    ("zbv", dict(p=2, v=2, m=4, F=1, I=1, W=1, placement="v")),
    ("dualpipe", dict(p=4, m=8, F=2, I=1, W=1, placement="bidirectional", overlap=3)),
])
def test_run_orders_matches_a_naive_simulator(name: str, kw: dict) -> None:
    inst = make(**kw)
    orders = get_schedule(name).generate(inst)
    assert get_schedule(name).check(inst) is None
    run = run_orders(inst, orders)
    assert not run.stuck and not run.suspect
    if name == "dualpipe":  # overlapped pairs: the naive simulator knows no pairs
        assert max(max(e) for e in run.ends) > 0
        return
    ref = _reference_times(inst, orders)
    for d, steps in enumerate(orders):
        for a, e in zip(steps, run.ends[d], strict=True):
            assert ref[a] == e


def test_run_orders_stops_at_broken_orders() -> None:
    """Broken orders end suspect (met on the way) or stuck (never reached); the simulator then
    asks the completeness rule which problem it is (tests/test_simulate_validate.py)."""
    inst = make(2, 1, 1, F=1, B=1)
    missing = run_orders(inst, [[F(0, 0), B(0, 0)], [F(1, 0)]])  # 1B0 missing: 0B0 waits
    assert missing.stuck[0].waits_for == B(1, 0)
    assert run_orders(inst, [[F(0, 0), B(0, 0), F(0, 0)], [F(1, 0), B(1, 0)]]).suspect
    misplaced = run_orders(inst, [[F(0, 0), B(0, 0), F(1, 0)], [B(1, 0)]])
    assert misplaced.stuck and not misplaced.suspect  # 0B0 waits before 1F0 is reached
    assert run_orders(inst, [[F(0, 0), B(0, 0)]]).suspect
    assert run_orders(inst, [[F(0, 0), I(0, 0)], [F(1, 0), B(1, 0)]]).suspect  # no split


def test_deadlock_cycle() -> None:
    inst = make(2, 1, 2, F=1, B=1)
    orders = [[F(0, 0), B(0, 0), F(0, 1), B(0, 1)], [F(1, 1), F(1, 0), B(1, 0), B(1, 1)]]
    run = run_orders(inst, orders)
    assert {s.rank for s in run.stuck} == {0, 1}
    cycle = waiting_cycle(orders, run.stuck)
    assert [owner for _, owner in cycle] == [cycle[1][0].rank, cycle[0][0].rank]
    assert cycle[0][0].waits_for in (B(1, 0), F(0, 1))


def test_pair_with_its_own_predecessor() -> None:
    inst = make(1, 1, 1, F=1, B=2)
    orders = [[Overlap(F(0, 0), B(0, 0))]]
    with pytest.raises(OrderError, match="own predecessor 0F0"):
        run_orders(inst, orders)
    run = run_orders(inst, orders, strict=False)  # PyTorch's scan ignores that dependency
    assert not run.stuck and run.ends == [[3]]


def test_pairs_and_fused_backward_times() -> None:
    inst = make(2, 1, 2, F=2, I=1, W=1, overlap=3)
    orders = [[F(0, 0), F(0, 1), B(0, 0), I(0, 1), W(0, 1)],
              [F(1, 0), Overlap(F(1, 1), B(1, 0)), I(1, 1), W(1, 1)]]
    run = run_orders(inst, orders)
    assert run.pair_ids == {(1, 1): 0}
    assert run.starts[1][1] == 4 and run.ends[1][1] == 7  # F(1,1) needs 0F1 (ends 4)


# ------------------------------------------------------------------------------ dispatch
def _table(durations, resources, capacity, edges, queues=None):  # noqa: ANN001, ANN202
    n = len(durations)
    succ = [[] for _ in range(n)]
    for u, v, lag in edges:
        succ[u].append((v, lag))
    queues = queues or [[t] for t in range(n)]
    rq = [[] for _ in range(len(capacity) + 1)]
    for q, ts in enumerate(queues):
        rq[resources[ts[0]]].append(q)
    return TaskTable(durations, resources, capacity, succ, queues, rq)


def test_dispatch_chain_capacity_and_queues() -> None:
    tt = _table([2, 2, 2, 1], [0, 0, 0, -1], [2], [(0, 3, 1)])
    res = dispatch(tt, [0, 1, 2, 3])
    assert res.starts == [0, 0, 2, 3] and res.makespan == 4 and res.complete
    fifo = _table([1, 1, 1], [0, 0, 0], [3], [], queues=[[2, 1, 0]])
    res = dispatch(fifo, [0, 1, 2])  # a queue starts in its order, capacity 3: all at 0
    assert res.sequence == [2, 1, 0] and res.starts == [0, 0, 0]


def test_dispatch_admission_and_hooks() -> None:
    tt = _table([1, 1], [0, 1], [1, 1], [])
    refused = dispatch(tt, [0, 0], admit=lambda t: t == 0)
    assert not refused.complete and refused.waiting == [1]
    calls: list = []
    dispatch(tt, [0, 0], admit=lambda t: calls.append(t) or True, hooked=[ADMIT, 0])
    assert calls == [0]


def test_dispatch_pairs_share_one_unit_and_end_together() -> None:
    # 0 starts first and takes 1 as its mate and 2 (behind 4 in its queue) as a rider: all
    # three end at 4 on one unit; 3 then 4 follow, and 4's queue skips the rider
    tt = _table([2, 3, 1, 1, 1], [0] * 5, [1], [(1, 2, 0)],
                queues=[[0], [1], [4, 2], [3]])
    res = dispatch(tt, [0, 1, 2, 3, 4],
                   pair=lambda t, cands: (1, 4, 2) if t == 0 and 1 in cands else None)
    assert res.complete and res.starts == [0, 0, 0, 4, 5] and res.makespan == 6
    assert res.order == [[0, 3, 4]] and res.pairs == {0: 1} and res.fused == {2}
    # a mate that is not available yet leaves the task alone
    tt = _table([2, 3], [0, 0], [1], [(0, 1, 0)])
    res = dispatch(tt, [0, 1], pair=lambda t, cands: (1, 4, -1) if t == 0 else None)
    assert res.starts == [0, 2] and res.pairs == {} and res.makespan == 5


def test_lexicographic_rules() -> None:
    key = lexicographic(lambda t: t % 2, lambda t: -t)
    assert sorted(range(5), key=key) == [4, 2, 0, 3, 1]
    rg = ResourceGraph()
    rg.add_resource("r")
    for t, d in (("a", 2), ("b", 1)):
        rg.add_task(t, d, "r")
    rg.add_task("c", 1)
    rg.add_edge("b", "c")
    default = list_schedule(rg)
    assert default == list_schedule(rg, lexicographic(latest_start(rg), by_name))
    # latest starts tie (a: 2 - 2, b: 2 - 1 - 1): the name decides, a first
    assert default["a"] == 0 and default["b"] == 2 and makespan_of(rg, default) == 4


def test_core_waits_for_a_later_release() -> None:
    """Nothing can start at 3 (memory), but task 4 becomes ready at 5 and frees it: the old
    scheduler reported 'stuck' here; the engine waits for the release."""
    rg = ResourceGraph()
    rg.add_resource(0, 2)
    rg.add_resource(1, 1)
    rg.add_pool(0, 1)
    for t, (d, r) in enumerate([(2, None), (3, None), (3, 1), (2, 0), (2, None), (0, None),
                                (3, 1), (2, None)]):
        rg.add_task(t, d, r)
    for u, v, lag in [(0, 5, 0), (0, 7, 1), (1, 3, 1), (1, 4, 1), (2, 4, 2), (3, 5, 0),
                      (4, 5, 2)]:
        rg.add_edge(u, v, lag)
    for a, b in [(3, 6), (6, 7), (7, 7), (1, 4)]:
        rg.add_buffer(0, a, b, 1)
    starts = list_schedule(rg, key=lambda t: t % 4)
    assert len(starts) == 8 and starts[4] == 5


# ---------------------------------------------------------------- pipeline list scheduler
def test_named_rules() -> None:
    assert set(PRIORITY_RULES) == {"dfs", "bfs", "cp", "due", "ilv"}
    pb = Problem(make(2, 1, 3, F=1, B=2))
    assert rule_function("due0.5")(pb, F(0, 0).kind, 0, 2) == (2 * 0.5 * pb.work
                                                                - pb.tail["F"][0] - 1, 2)
    with pytest.raises(ValueError, match="tie_break"):
        rule_function("nope")


def test_portfolio_budget_and_early_stop() -> None:
    inst = make(4, 2, 12, limit=5, F=1, B=2)
    full = pipeline_list_schedule(inst, budget=None)
    assert pipeline_list_schedule(inst) .makespan == full.makespan  # small: the whole portfolio
    small = pipeline_list_schedule(inst, budget=1)  # the requested run only
    assert small.config == run_rule(Problem(inst), "dfs", None, True).config
    at_bound = make(4, 1, 8, F=1, I=1, W=1, limit=4)
    res = pipeline_list_schedule(at_bound, budget=None)
    assert res.makespan == Problem(at_bound).bound  # reached the bound: stopped there


def test_random_orders_never_disagree_with_the_reference() -> None:
    rng = random.Random(3)
    for _ in range(20):
        inst = make(rng.randint(1, 4), rng.randint(1, 2), rng.randint(1, 6),
                    F=rng.choice([1, 2]), I=rng.choice([1, 2]), W=rng.choice([0, 1]),
                    latency=rng.choice([0, 1]))
        orders = [list(o) for o in get_schedule("list").generate(inst)]
        run = run_orders(inst, orders)
        ref = _reference_times(inst, orders)
        assert [[ref[a] for a in steps] for steps in orders] == run.ends
