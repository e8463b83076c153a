"""The PyTorch-family schedules without PyTorch: docs/spec.md §6 formulas, hand-derived
orders, golden orders, preconditions, and validity on random small instances (hypothesis)."""

from __future__ import annotations

import re

import pytest
from conftest import overlap_in_range
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpsched.instance import Instance
from cpsched.model import Action, Overlap, Step
from cpsched.schedules import NotApplicable, get_schedule, run_schedule
from cpsched.schedules.basic import chunk_table, interleaved_1f1b
from cpsched.simulate import simulate
from cpsched.validate import validate

#: The schedules this module covers (the PyTorch family).
TORCH_FAMILY = ("gpipe", "1f1b", "interleaved-1f1b", "looped-bfs", "interleaved-zb", "zbv",
                "dualpipev")


def make(p: int, m: int, v: int = 1, *, placement: str = "loop", split: bool = False,
         **costs: object) -> Instance:
    """A uniform instance; costs default to F = 1 and B = 2 (or I = W = 1 when split)."""
    c: dict[str, object] = ({"forward": 1, "backward_input": 1, "backward_weight": 1} if split
                            else {"forward": 1, "backward": 2})
    c.update(costs)
    return Instance.from_dict({
        "name": "t",
        "pipeline": {"devices": p, "stages_per_device": v, "microbatches": m,
                     "placement": placement, "split_backward": split},
        "costs": c,
    })


_OVERLAP = re.compile(r"\((\w+);(\w+)\)OVERLAP_F_B")


def parse_rank(text: str) -> list[Step]:
    """``"0F0 (0F3;3B1)OVERLAP_F_B 0B0"`` -> steps."""
    out: list[Step] = []
    for tok in text.split():
        mt = _OVERLAP.fullmatch(tok)
        out.append(Overlap(Action.parse(mt.group(1)), Action.parse(mt.group(2))) if mt
                   else Action.parse(tok))
    return out


def orders_of(name: str, inst: Instance) -> list[list[Step]]:
    return get_schedule(name).orders(inst)


def timed_orders(name: str, inst: Instance) -> list[list[Step]]:
    """Run the schedule through the simulator, validate it, and read back the per-device
    order (actions by start time, F first on ties)."""
    sched = run_schedule(name, inst)
    assert validate(sched) == []
    return sched.orders()


# ------------------------------------------------------------ docs/spec.md §6 formulas


@pytest.mark.parametrize("name", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p", [1, 2, 3, 4, 6])
@pytest.mark.parametrize("m", [1, 2, 5, 8])
@pytest.mark.parametrize(("f", "b"), [(5, 10), (1, 1), (2.5, 1.25)])
def test_gpipe_1f1b_makespan(name: str, p: int, m: int, f: float, b: float) -> None:
    sched = run_schedule(name, make(p, m, forward=f, backward=b))
    assert validate(sched) == []
    assert sched.makespan == pytest.approx((m + p - 1) * (f + b))


@pytest.mark.parametrize("p", [1, 2, 4, 8])
@pytest.mark.parametrize("m", [1, 3, 8, 16])
def test_1f1b_peak_memory(p: int, m: int) -> None:
    sched = run_schedule("1f1b", make(p, m, forward=5, backward=10))
    assert sched.peak_memory[0] == min(p, m)
    # and every rank r holds at most p - r microbatches
    assert all(sched.peak_memory[r] <= p - r for r in range(p))


def test_gpipe_peak_memory_is_all_microbatches() -> None:
    assert run_schedule("gpipe", make(4, 8)).peak_memory == [8, 8, 8, 8]


@pytest.mark.parametrize("p", [2, 3, 4])
@pytest.mark.parametrize("v", [2, 3])
@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize(("f", "b"), [(5, 10), (1, 2), (3, 1), (2, 2)])
def test_interleaved_makespan(p: int, v: int, k: int, f: int, b: int) -> None:
    m = k * p
    sched = run_schedule("interleaved-1f1b", make(p, m, v, forward=f, backward=b))
    assert validate(sched) == []
    assert sched.makespan == m * v * (f + b) + (p - 1) * (f + b)


def test_interleaved_article_example() -> None:
    sched = run_schedule("interleaved-1f1b", make(4, 8, 2, forward=5, backward=10))
    assert validate(sched) == []
    assert sched.makespan == 285


@pytest.mark.parametrize("p", [2, 3, 4])
@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize(("f", "i", "w"), [(1, 1, 1), (2, 1, 1), (3, 2, 1), (2, 3, 2)])
def test_interleaved_zb_single_chunk_is_zb_h1(p: int, k: int, f: int, i: int, w: int) -> None:
    """PyTorch's interleaved ZB with one chunk per rank is ZB-H1: bubble (p-1)(F + B - 2W),
    peak memory as 1F1B (docs/spec.md §6; the formula assumes W <= F)."""
    m = k * p
    sched = run_schedule("interleaved-zb", make(p, m, split=True, forward=f,
                                                backward_input=i, backward_weight=w))
    assert validate(sched) == []
    b = i + w
    assert sched.makespan == m * (f + b) + (p - 1) * (f + b - 2 * w)
    assert sched.peak_memory[0] == p


# ------------------------------------------------------------- hand-derived orders

ONE_F_ONE_B_P3_M4 = [
    "0F0 0F1 0F2 0B0 0F3 0B1 0B2 0B3",
    "1F0 1F1 1B0 1F2 1B1 1F3 1B2 1B3",
    "2F0 2B0 2F1 2B1 2F2 2B2 2F3 2B3",
]


def test_1f1b_hand_derived() -> None:
    """Rank r: p - r - 1 warm-up forwards, F/B pairs, remaining backwards.  The last rank runs
    F0 .. F(m-1) (PyTorch 2.13 emits F1 .. Fm there, docs/modelling.md §10)."""
    expected = [parse_rank(t) for t in ONE_F_ONE_B_P3_M4]
    assert orders_of("1f1b", make(3, 4)) == expected
    assert timed_orders("1f1b", make(3, 4)) == expected


def test_1f1b_fewer_microbatches_than_devices() -> None:
    """PyTorch rejects m < p; the standard rule caps the warm-up at m."""
    assert orders_of("1f1b", make(4, 2)) == [
        parse_rank("0F0 0F1 0B0 0B1"), parse_rank("1F0 1F1 1B0 1B1"),
        parse_rank("2F0 2F1 2B0 2B1"), parse_rank("3F0 3B0 3F1 3B1")]


def test_gpipe_hand_derived() -> None:
    assert orders_of("gpipe", make(2, 3)) == [parse_rank("0F0 0F1 0F2 0B0 0B1 0B2"),
                                             parse_rank("1F0 1F1 1F2 1B0 1B1 1B2")]
    # v > 1: breadth-first forwards, backwards from the last local stage, FIFO
    assert orders_of("gpipe", make(2, 2, 2)) == [
        parse_rank("0F0 0F1 2F0 2F1 2B0 2B1 0B0 0B1"),
        parse_rank("1F0 1F1 3F0 3F1 3B0 3B1 1B0 1B1")]


def test_interleaved_hand_derived() -> None:
    """p = 2, v = 2, m = 4: 2 rounds of 2 microbatches; rank 0 warms up with
    (v-1)*2 + 2*(p-1) = 4 forwards, rank 1 with 2."""
    expected = [parse_rank("0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 2F3 0B1 2B2 2B3 0B2 0B3"),
                parse_rank("1F0 1F1 3F0 3B0 3F1 3B1 1F2 1B0 1F3 1B1 3F2 3B2 3F3 3B3 1B2 1B3")]
    assert orders_of("interleaved-1f1b", make(2, 4, 2)) == expected
    assert timed_orders("interleaved-1f1b", make(2, 4, 2)) == expected


def test_chunk_table_megatron_example() -> None:
    """Megatron's documented table for PP2 N3 M5 VP2."""
    assert chunk_table(5, 2, 3) == [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1),
                                    (3, 0), (4, 0), (3, 1), (4, 1)]


def test_interleaved_group_size_keyword() -> None:
    inst = make(4, 8, 2)
    assert interleaved_1f1b(inst, microbatch_group_size_per_vp_stage=4) == interleaved_1f1b(inst)
    # g = 8: one group; every rank runs its whole chunk 0 first (more warm-up)
    one_group = interleaved_1f1b(inst, microbatch_group_size_per_vp_stage=8)
    assert one_group[3][:9] == [Action.parse(f"3F{i}") for i in range(8)] + [
        Action.parse("7F0")]
    sched = simulate(inst, one_group)
    assert validate(sched) == []
    # m = 10, Megatron's default g = p = 4 leaves a last group of 2 < p: rejected (Megatron too)
    with pytest.raises(NotApplicable, match="microbatch_group_size_per_vp_stage = 4"):
        interleaved_1f1b(make(4, 10, 2), microbatch_group_size_per_vp_stage=4)
    with pytest.raises(NotApplicable, match="microbatch_group_size_per_vp_stage = 2"):
        interleaved_1f1b(make(4, 8, 2), microbatch_group_size_per_vp_stage=2)
    with pytest.raises(NotApplicable, match="1 .. microbatches = 8"):
        interleaved_1f1b(make(4, 8, 2), microbatch_group_size_per_vp_stage=9)


@pytest.mark.parametrize("p", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("v", [1, 2, 3])
@pytest.mark.parametrize("m", [1, 3, 4, 7, 8, 10])
def test_interleaved_every_accepted_group_size_runs(p: int, v: int, m: int) -> None:
    inst = make(p, m, v)
    for g in range(1, m + 1):
        try:
            orders = interleaved_1f1b(inst, microbatch_group_size_per_vp_stage=g)
        except NotApplicable:
            continue
        assert validate(simulate(inst, orders)) == []


# ----------------------------------------------- golden orders (from PyTorch 2.13)

GOLDEN: dict[tuple[str, int, int, int], list[str]] = {
    ("dualpipev", 2, 4, 2): [
        "0F0 0F1 0F2 3F0 3I0 3W0 3F1 (0F3;3B1)OVERLAP_F_B (3F2;0B0)OVERLAP_F_B 3B2 "
        "(3F3;0B1)OVERLAP_F_B 3B3 0I2 0W2 0I3 0W3",
        "1F0 2F0 1F1 2F1 1F2 2B0 (2F2;1B0)OVERLAP_F_B (1F3;2B1)OVERLAP_F_B "
        "(2F3;1B1)OVERLAP_F_B 2B2 1B2 2I3 1I3 2W3 1W3",
    ],
    ("zbv", 2, 2, 2): [
        "0F0 0F1 3F0 3I0 3W0 3F1 3I1 3W1 0I0 0W0 0I1 0W1",
        "1F0 2F0 1F1 2F1 2I0 2W0 1I0 1W0 2I1 2W1 1I1 1W1",
    ],
    ("interleaved-zb", 2, 3, 2): [
        "0F0 0F1 0F2 2F0 2F1 2I0 2W0 2F2 2I1 2W1 2I2 2W2 0I0 0W0 0I1 0W1 0I2 0W2",
        "1F0 1F1 1F2 3F0 3I0 3F1 3I1 3W0 3F2 3I2 3W1 1I0 3W2 1I1 1W0 1I2 1W1 1W2",
    ],
    ("looped-bfs", 2, 2, 2): [
        "0F0 0F1 2F0 2F1 2B1 2B0 0B1 0B0",
        "1F0 1F1 3F0 3F1 3B1 3B0 1B1 1B0",
    ],
    ("interleaved-1f1b", 3, 4, 2): [
        "0F0 0F1 0F2 0F3 3F0 3F1 3F2 3F3 3B0 3B1 3B2 3B3 0B0 0B1 0B2 0B3",
        "1F0 1F1 1F2 1F3 4F0 4F1 4F2 4B0 4F3 4B1 4B2 4B3 1B0 1B1 1B2 1B3",
        "2F0 2F1 2F2 2F3 5F0 5B0 5F1 5B1 5F2 5B2 5F3 5B3 2B0 2B1 2B2 2B3",
    ],
}


@pytest.mark.parametrize("key", list(GOLDEN), ids=lambda k: f"{k[0]}-p{k[1]}-m{k[2]}-v{k[3]}")
def test_golden_orders(key: tuple[str, int, int, int]) -> None:
    name, p, m, v = key
    split = name in ("interleaved-zb", "zbv", "dualpipev")
    inst = make(p, m, v, placement="v" if name in ("zbv", "dualpipev") else "loop",
                split=split)
    expected = [parse_rank(t) for t in GOLDEN[key]]
    assert orders_of(name, inst) == expected
    assert timed_orders(name, inst) == expected


# ---------------------------------------------------------- overlapped pairs


def test_dualpipev_overlap_timing() -> None:
    base = {"forward": 2, "backward_input": 2, "backward_weight": 1}
    with_ov = run_schedule("dualpipev", make(2, 4, 2, placement="v", split=True,
                                             overlap_forward_backward=4, **base))
    without = run_schedule("dualpipev", make(2, 4, 2, placement="v", split=True, **base))
    for sched, dur in ((with_ov, 4), (without, 2 + 3)):
        assert validate(sched) == []
        pairs = [a for a in sched.actions if a.overlap is not None]
        assert len(pairs) == 2 * 6  # 6 overlapped steps in the golden order above
        assert all(a.end - a.start == dur for a in pairs)
    assert with_ov.makespan < without.makespan


# ------------------------------------------------------------------ preconditions


def test_interleaved_zb_needs_split_backward() -> None:
    # the V schedules (zbv, dualpipev, v-half, v-min) run a fused backward as B for I, no W
    # (tests/schedules/test_zb_controllable.py); interleaved-zb does not
    name = "interleaved-zb"
    inst = make(2, 8, 2, placement="loop")
    why = get_schedule(name).check(inst)
    assert why is not None
    assert "pipeline.split_backward = false" in why and "= true" in why
    with pytest.raises(NotApplicable, match="split_backward"):
        run_schedule(name, inst)


@pytest.mark.parametrize("name", ["gpipe", "1f1b", "interleaved-1f1b", "looped-bfs"])
def test_fused_schedules_run_on_split_instances(name: str) -> None:
    inst = make(2, 4, 1 if name == "1f1b" else 2, split=True, forward=1, backward_input=2,
                backward_weight=3)
    sched = run_schedule(name, inst)
    assert validate(sched) == []
    assert {str(a.kind) for a in sched.actions} == {"F", "B"}


@pytest.mark.parametrize(("name", "inst", "needle"), [
    ("dualpipev", make(3, 5, 2, placement="v", split=True),
     "pipeline.microbatches = 5: dualpipev needs >= 2 * devices = 6"),
    ("zbv", make(2, 4, 2, split=True), 'pipeline.placement = "loop": zbv needs "v"'),
    ("dualpipev", make(2, 4, 2, split=True), 'pipeline.placement = "loop": dualpipev needs "v"'),
    ("interleaved-1f1b", make(4, 9, 2),
     "pipeline.microbatches = 9: interleaved-1f1b needs a multiple of the number of rounds"),
    ("interleaved-zb", make(3, 10, 3, split=True),
     "pipeline.microbatches = 10: interleaved-zb needs a multiple of the number of rounds"),
    ("1f1b", make(2, 4, 2), "pipeline.stages_per_device = 2: 1f1b needs 1"),
    ("gpipe", make(2, 4, 2, placement="v"), 'pipeline.placement = "v": gpipe needs "loop"'),
    ("looped-bfs", make(2, 4, 2, placement="v"), 'pipeline.placement = "v"'),
    ("interleaved-1f1b", make(2, 4, 2, placement="v"), 'pipeline.placement = "v"'),
])
def test_precondition_messages(name: str, inst: Instance, needle: str) -> None:
    why = get_schedule(name).check(inst)
    assert why is not None and needle in why
    with pytest.raises(NotApplicable, match=re.escape(needle)):
        run_schedule(name, inst)


def test_bidirectional_placement_not_applicable() -> None:
    inst = make(2, 4, placement="bidirectional")
    for name in TORCH_FAMILY:
        assert get_schedule(name).check(inst) is not None


# ------------------------------------------------- validity on random instances

_costs = st.one_of(st.integers(0, 6), st.sampled_from([0.5, 1.25, 2.001]))


@st.composite
def instances(draw: st.DrawFn) -> Instance:
    placement = draw(st.sampled_from(["loop", "loop", "v"]))
    p = draw(st.integers(1, 5))
    v = 2 if placement == "v" else draw(st.integers(1, 3))
    m = draw(st.integers(1, 10))
    split = draw(st.booleans())
    S = p * v

    def per_stage(lo: int = 0) -> object:
        if draw(st.booleans()):
            return draw(_costs.filter(lambda x: x >= lo))
        return [draw(_costs.filter(lambda x: x >= lo)) for _ in range(S)]

    costs: dict[str, object] = {"forward": per_stage(1),
                                "p2p_latency": draw(st.sampled_from([0, 0, 1, 0.5]))}
    if split:
        costs["backward_input"] = per_stage()
        costs["backward_weight"] = per_stage()
        if draw(st.booleans()):
            costs["overlap_forward_backward"] = per_stage(1)
    else:
        costs["backward"] = per_stage()
    memory = {"activation": per_stage(), "released_by_input": draw(st.sampled_from([0.0, 0.5]))}
    return overlap_in_range(lambda: Instance.from_dict({
        "name": "h",
        "pipeline": {"devices": p, "stages_per_device": v, "microbatches": m,
                     "placement": placement, "split_backward": split},
        "costs": costs, "memory": memory,
    }))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_every_applicable_schedule_validates(inst: Instance) -> None:
    for name in TORCH_FAMILY:
        spec = get_schedule(name)
        if spec.check(inst) is not None:
            continue
        orders = spec.orders(inst)
        sched = simulate(inst, orders, method=name)  # never deadlocks when applicable
        assert validate(sched) == [], name
        durations = (*inst.forward, *inst.backward) + (
            (*inst.backward_input, *inst.backward_weight) if inst.split_backward else ())
        if all(x > 0 for x in durations):  # zero-length actions may tie with their neighbours
            assert sched.orders() == orders, name


@pytest.mark.parametrize("name", TORCH_FAMILY)
def test_applicable_somewhere(name: str) -> None:
    split = name in ("interleaved-zb", "zbv", "dualpipev")
    inst = make(2, 8, 1 if name == "1f1b" else 2,
                placement="v" if name in ("zbv", "dualpipev") else "loop", split=split)
    assert get_schedule(name).check(inst) is None
    assert validate(run_schedule(name, inst)) == []
