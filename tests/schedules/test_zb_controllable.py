"""V-Half and V-Min: the orders recorded from the authors' code, simulation, validity, peak
memory against the paper's figures, preconditions.

The recordings (tests/data/zb/v-half.json, v-min.json) were made by tests/data/zb/record.py
from the Zero Bubble repository's V-Half/V-Min scheduler (docs/references.md#controllable-memory)
on p = 2..16 and m in {1, 2, p, 2p + 1, 64}, with uniform and uneven costs.
"""

from __future__ import annotations

import pytest
from zb_recordings import cases, decode, instance

from cpsched.actions import Kind, fuse_backwards, step_actions
from cpsched.metrics import peak_memory
from cpsched.schedules import NotApplicable, get_schedule, run_schedule
from cpsched.validate import validate

NAMES = ["v-half", "v-min"]
#: The paper's activation memory, in microbatches (Qi et al. 2024, Table 1; the authors'
#: table: V-Half (p + 2) // 2, V-Min (p + 4) // 3, 1F1B p).
PAPER_MICROBATCHES = {"v-half": lambda p: (p + 2) // 2, "v-min": lambda p: (p + 4) // 3}


@pytest.mark.parametrize("name", NAMES)
def test_orders_equal_the_recorded_reference_orders_simulate_and_meet_the_paper_memory(
        name: str) -> None:
    recorded = cases(name)
    grid = {(c["p"], c["m"]) for c in recorded}
    assert {p for p, _ in grid} == set(range(2, 17)) and max(m for _, m in grid) == 64
    mismatches = []
    for case in recorded:
        p, m = case["p"], case["m"]
        inst = instance(case, limit=False)
        got = [[str(a) for a in row] for row in get_schedule(name).orders(inst)]
        want = decode(p, case["orders"])
        assert sum(map(len, want)) == 3 * m * inst.num_stages
        if got != want:
            mismatches.append((p, m))
        sched = run_schedule(name, inst)  # a deadlock would raise
        assert validate(sched) == [], (p, m)
        # activation 1 per stage, all released by W: a microbatch holds 2 on a device
        peak = max(peak_memory(sched))
        paper = PAPER_MICROBATCHES[name](p)
        assert peak <= 2 * paper, (p, m, peak)
        assert peak == 2 * min(paper, m), (p, m, peak)  # the figure is reached once m allows
        if p >= 5:
            assert peak < 2 * p  # 1F1B holds p microbatches
    assert mismatches == []


def test_orders_ignore_costs() -> None:
    """The authors' code times the order with the costs but never changes it."""
    base = {"p": 6, "m": 13, "act": 1, "r": 0.0, "limit": None}
    a = instance({**base, "F": 1, "I": 1, "W": 1, "lat": 0})
    b = instance({**base, "F": [1, 9, 2, 8, 3, 7, 4, 6, 5, 5, 6, 4], "I": 0.5, "W": 7,
                  "lat": 3})
    for name in NAMES:
        assert get_schedule(name).orders(a) == get_schedule(name).orders(b)


@pytest.mark.parametrize("name", NAMES)
def test_preconditions_name_field_value_and_requirement(name: str) -> None:
    spec = get_schedule(name)
    case = {"p": 4, "m": 8, "F": 1, "I": 1, "W": 1, "lat": 0, "act": 1, "r": 0.0,
            "limit": None}
    loop = instance(case, placement="loop")
    why = spec.reason_not_applicable(loop)
    assert why is not None and 'pipeline.placement = "loop"' in why and '"v"' in why
    with pytest.raises(NotApplicable, match=name):
        spec.orders(loop)
    fused = instance(case).replace(**{"pipeline.split_backward": False, "costs.backward": 2,
                                      "costs.backward_input": None,
                                      "costs.backward_weight": None})
    assert spec.reason_not_applicable(fused) is None  # I runs as B, no W
    assert spec.reason_not_applicable(instance(case)) is None
    assert "docs/references.md#controllable-memory" in spec.source


@pytest.mark.parametrize("name", [*NAMES, "zbv", "dualpipev"])
@pytest.mark.parametrize("p", [2, 3, 4, 6, 8])
def test_fused_backward_runs_i_as_b_and_no_w(name: str, p: int) -> None:
    """With a fused backward the V schedules run every I as B and no W
    (cpsched.actions.fuse_backwards): the orders are the split ones mapped so, the schedule is
    valid, holds no more than the split one and no more than the paper's figure, and its
    makespan is the split orders' with I lasting B and W lasting almost nothing."""
    m = 2 * p + 3
    case = {"p": p, "m": m, "F": 1, "I": 2, "W": 1, "lat": 0.5, "act": 1, "r": 0.0,
            "limit": None}
    split = instance(case)
    fused = split.replace(**{"pipeline.split_backward": False, "costs.backward": 3,
                             "costs.backward_input": None, "costs.backward_weight": None})
    spec = get_schedule(name)
    got = spec.orders(fused)
    assert got == fuse_backwards(spec.orders(split))
    assert {a.kind for row in got for s in row for a in step_actions(s)} == {Kind.F, Kind.B}
    sched = run_schedule(name, fused)
    assert validate(sched) == []
    held = max(peak_memory(sched))
    assert held <= max(peak_memory(run_schedule(name, split)))
    if name in PAPER_MICROBATCHES:
        assert held <= 2 * PAPER_MICROBATCHES[name](p)  # stage activations of 1
    # the split orders timed with I = B = 3 and W = 0.001: the same up to 0.001 per W
    thin = instance({**case, "I": 3, "W": 0.001})
    thin_ms = run_schedule(name, thin).makespan
    assert thin_ms - 0.001 * m * 2 * p <= sched.makespan <= thin_ms + 1e-9
