"""The pipeline rules written once (cpsched.rules): durations, dependencies with lags, release
points, completeness, and the integer tables the engine runs on (docs/spec.md §1)."""

from __future__ import annotations

import pytest
from conftest import make

from cpsched.actions import B, F, I, Overlap, W, default_actions
from cpsched.graph import build_task_graph, lower_bound
from cpsched.rules import (
    Fault,
    action_fault,
    chain_heads_tails,
    default_tasks,
    dependencies,
    duration,
    fused_rule_from,
    gaps,
    overlap_duration,
    pair_kinds_ok,
    release_actions,
    released_fraction,
    stage_ticks,
)


def test_durations_in_ticks() -> None:
    inst = make(2, 1, 2, F=1.5, I=1, W=0.25)
    assert inst.time_scale == 100
    assert duration(inst, F(0, 0)) == 150
    assert duration(inst, I(1, 0)) == 100 and duration(inst, W(1, 0)) == 25
    assert duration(inst, B(1, 0)) == 125  # a fused B lasts I + W
    assert overlap_duration(inst, Overlap(F(1, 1), B(0, 0))) == 150 + 125
    ov = make(2, 1, 2, F=2, B=3, overlap=4)
    assert overlap_duration(ov, Overlap(F(1, 1), B(1, 0))) == 4


def test_dependencies_and_lags() -> None:
    inst = make(2, 2, 1, F=1, B=2, latency=0.5)  # loop: stages 0, 2 on device 0
    unfused = fused_rule_from([])
    assert dependencies(inst, F(0, 0), unfused) == []
    assert dependencies(inst, F(1, 0), unfused) == [(F(0, 0), 5)]
    assert dependencies(inst, B(3, 0), unfused) == [(F(3, 0), 0)]
    assert dependencies(inst, B(2, 0), unfused) == [(B(3, 0), 5)]
    split = make(2, 1, 1, F=1, I=1, W=1)
    assert dependencies(split, W(0, 0), unfused) == [(I(0, 0), 0)]
    assert dependencies(split, I(0, 0), unfused) == [(I(1, 0), 0)]
    fused = fused_rule_from([B(1, 0)])
    assert dependencies(split, I(0, 0), fused) == [(B(1, 0), 0)]


def test_release_points_add_up() -> None:
    inst = make(1, 1, 1, F=1, I=1, W=1, released_by_input=0.25)
    assert release_actions(inst, 0, 0) == [(I(0, 0), 0.25), (W(0, 0), 0.75)]
    assert released_fraction(inst, "I") + released_fraction(inst, "W") == 1.0
    assert released_fraction(inst, "B") == 1.0 and released_fraction(inst, "F") == 0.0
    assert release_actions(make(1, 1, 1), 0, 0) == [(B(0, 0), 1.0)]


def test_action_faults_in_order() -> None:
    inst = make(2, 1, 2, F=1, B=1)
    assert action_fault(inst, F(0, 0), 0, set()) is None
    assert action_fault(inst, F(2, 0), 0, set()) == Fault.STAGE
    assert action_fault(inst, F(0, 5), 0, set()) == Fault.MICROBATCH
    assert action_fault(inst, I(0, 0), 0, set()) == Fault.KIND
    assert action_fault(inst, F(1, 0), 0, set()) == Fault.DEVICE
    assert action_fault(inst, F(0, 0), 0, {F(0, 0)}) == Fault.TWICE
    assert pair_kinds_ok(Overlap(F(0, 1), B(0, 0)))
    assert not pair_kinds_ok(Overlap(F(0, 1), F(0, 0)))


def test_gaps() -> None:
    inst = make(1, 1, 2, F=1, I=1, W=1)
    full = set(default_actions(inst))
    assert list(gaps(inst, full)) == []
    fused = (full - {I(0, 1), W(0, 1)}) | {B(0, 1)}
    assert list(gaps(inst, fused)) == []
    (g,) = gaps(inst, full - {F(0, 0), W(0, 0)})
    assert (g.stage, g.microbatch, g.forward_missing, g.mixed, g.backward_missing) == (
        0, 0, True, False, ("W",))
    (g,) = gaps(inst, full | {B(0, 1)})
    assert g.mixed and g.backward_missing == ()
    (g,) = gaps(inst, full - {I(0, 1), W(0, 1)})
    assert g.backward_missing == ("I", "W")
    (g,) = gaps(make(1, 1, 1), {F(0, 0)})
    assert g.backward_missing == ("B",)


def test_stage_ticks_bidirectional_directions() -> None:
    inst = make(4, 1, 4, F=1, B=2, placement="bidirectional", latency=1)
    tk = stage_ticks(inst)
    assert tk.half == 2
    assert tk.device[0] == (0, 1, 2, 3) and tk.device[1] == (3, 2, 1, 0)
    assert tk.forward_lag[1][1] == 1 and tk.backward_lag[0][3] == 0


@pytest.mark.parametrize("kw", [
    dict(p=4, v=2, m=8),
    dict(p=3, v=1, m=5, F=1, I=2, W=1, latency=1),
    dict(p=2, v=2, m=4, F=[1, 2, 1, 3], I=1, W=[0, 1, 1, 1], placement="v", latency=0.5),
    dict(p=4, v=1, m=6, F=2, B=[3, 1, 4, 1]),
    # bidirectional: direction 1 on its own devices, and uneven costs make the per-device
    # work differ from m times direction 0's stage
    dict(p=4, v=1, m=8, F=[1, 1, 1, 1.4], I=1, W=[0.65, 0.65, 0.65, 1.1],
         placement="bidirectional", latency=0.5),
    dict(p=2, v=1, m=6, F=[1, 3], B=[2, 5], placement="bidirectional"),
])
def test_default_tasks_match_the_task_graph(kw: dict) -> None:
    """Heads, tails and the bound computed per (kind, stage) equal the networkx graph's."""
    inst = make(**kw)
    tasks = default_tasks(inst)
    g = build_task_graph(inst)
    assert tasks.bound == lower_bound(inst, g).value
    head, tail = chain_heads_tails(inst)
    from cpsched.core import heads_and_tails

    gh, gt = heads_and_tails(g)
    for a in g:
        assert (head[a.kind][a.stage], tail[a.kind][a.stage]) == (gh[a], gt[a])
    for t, a in enumerate(tasks.action(t) for t in range(len(tasks.duration))):
        assert tasks.duration[t] == g.nodes[a]["duration"]
        assert tasks.device[t] == g.nodes[a]["device"]
        assert {tasks.action(w) for w, _ in tasks.succ[t]} == set(g.successors(a))
