"""DualPipe: orders hand-derived from the visualizer's generator, the real minimum number of
microbatches, DeepSeek's bubble and memory figures, validity on random instances."""

from __future__ import annotations

import pytest
from conftest import overlap_in_range
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpsched.instance import Instance
from cpsched.metrics import busy_time
from cpsched.model import Kind, Overlap
from cpsched.schedules import NotApplicable, get_schedule, run_schedule
from cpsched.simulate import simulate
from cpsched.validate import validate


def make(p: int, m: int, F: float = 1, I: float = 1, W: float = 1,  # noqa: N803, E741
         *, fb: float | None = None, placement: str = "bidirectional", split: bool = True,
         latency: float = 0) -> Instance:
    costs: dict[str, object] = {"forward": F, "p2p_latency": latency}
    if split:
        costs.update(backward_input=I, backward_weight=W)
    else:
        costs["backward"] = I + W
    if fb is not None:
        costs["overlap_forward_backward"] = fb
    return Instance.from_dict({
        "name": "dp",
        "pipeline": {"devices": p, "microbatches": m, "placement": placement,
                     "split_backward": split},
        "costs": costs,
    })


def test_orders_p4_m8() -> None:
    # Steps 1-8 of ppviz generate_dualpipe_schedule, by hand.  Rank 0 (half rank 0):
    # 2 F0 | F0 F1 | I1 W F1 | (F0&B1)(F1&B0) | B1 (F1&B0) | B1 I0 | W I0 | W.
    # Rank 1 (half rank 1): F0 F1 F0 F1 | 2 x (F0&B1)(F1&B0) | B1 B0 I1 I0 | W W.
    got = [" ".join(str(s) for s in ops) for ops in get_schedule("dualpipe").generate(
        make(4, 8))]
    assert got == [
        "0F0 0F1 0F2 3F4 3I4 3W4 3F5 (0F3;3B5)OVERLAP_F_B (3F6;0B0)OVERLAP_F_B 3B6 "
        "(3F7;0B1)OVERLAP_F_B 3B7 0I2 0W2 0I3 0W3",
        "1F0 2F4 1F1 2F5 (1F2;2B4)OVERLAP_F_B (2F6;1B0)OVERLAP_F_B (1F3;2B5)OVERLAP_F_B "
        "(2F7;1B1)OVERLAP_F_B 2B6 1B2 2I7 1I3 2W7 1W3",
        "1F4 2F0 1F5 2F1 (1F6;2B0)OVERLAP_F_B (2F2;1B4)OVERLAP_F_B (1F7;2B1)OVERLAP_F_B "
        "(2F3;1B5)OVERLAP_F_B 2B2 1B6 2I3 1I7 2W3 1W7",
        "0F4 0F5 0F6 3F0 3I0 3W0 3F1 (0F7;3B1)OVERLAP_F_B (3F2;0B4)OVERLAP_F_B 3B2 "
        "(3F3;0B5)OVERLAP_F_B 3B3 0I6 0W6 0I7 0W7",
    ]


def test_mixes_fused_split_and_overlapped_backwards() -> None:
    orders = get_schedule("dualpipe").generate(make(8, 20))
    steps = [s for ops in orders for s in ops]
    assert any(isinstance(s, Overlap) and s.backward.kind == Kind.B for s in steps)
    kinds = {s.kind for s in steps if not isinstance(s, Overlap)}
    assert {Kind.F, Kind.B, Kind.I, Kind.W} <= kinds


@pytest.mark.parametrize("p", [2, 4, 6, 8, 10])
def test_real_minimum_is_2p_minus_2(p: int) -> None:
    spec = get_schedule("dualpipe")
    need = max(2, 2 * p - 2)
    for m in range(2, 4 * p + 3, 2):
        inst = make(p, m)
        why = spec.check(inst)
        if m < need:
            assert why == f"pipeline.microbatches = {m}: dualpipe needs >= 2p - 2 = {need}"
            with pytest.raises(NotApplicable):
                run_schedule("dualpipe", inst)
        else:
            assert why is None
            assert not validate(run_schedule("dualpipe", inst))


def test_other_preconditions() -> None:
    spec = get_schedule("dualpipe")
    assert spec.check(make(4, 8, placement="loop")) == (
        'pipeline.placement = "loop": dualpipe needs "bidirectional"')


@pytest.mark.parametrize("p", [2, 4, 6, 8])
@pytest.mark.parametrize("F,B", [(1, 2), (2, 3), (1, 1)])
def test_fused_backward_is_the_split_one_with_zero_w(p: int, F: int, B: int) -> None:  # noqa: N803
    # with a fused backward every I is a B and no W runs: the same times as the split
    # instance with I = B and W = 0, so the bubble is (p/2 - 1)(F&B + B) (the formula, W = 0)
    m = max(2, 2 * p - 2) + 4
    fused = run_schedule("dualpipe", make(p, m, F, B, 0, split=False))
    split = run_schedule("dualpipe", make(p, m, F, B, 0))
    assert not validate(fused) and fused.makespan == split.makespan
    assert {a.kind for a in fused.actions} == {Kind.F, Kind.B}
    idle = fused.makespan - sum(busy_time(fused)) / p
    assert idle == pytest.approx((p / 2 - 1) * ((F + B) + B))


@pytest.mark.parametrize("p", [2, 4, 6, 8])
@pytest.mark.parametrize("dm", [0, 2, 6])
@pytest.mark.parametrize("F,I,W", [(1, 1, 1), (2, 3, 1), (1, 2, 2), (3, 4, 2), (5, 5, 5)])  # noqa: E741
def test_bubble_formula(p: int, dm: int, F: int, I: int, W: int) -> None:  # noqa: N803, E741
    """docs/spec.md §6 (DeepSeek-V3 Table 2): bubble (p/2 - 1)(F&B + B - 3W), measured as the mean
    idle time per device (bubble_fraction x makespan); exact here with F&B = F + B (no
    overlap cost given), F <= I and W <= I."""
    m = 2 * p - 2 + dm if p > 2 else 2 + dm
    sched = run_schedule("dualpipe", make(p, m, F, I, W))
    assert not validate(sched)
    B = I + W
    idle = sched.makespan - sum(busy_time(sched)) / p
    assert idle == pytest.approx((p / 2 - 1) * ((F + B) + B - 3 * W))
    assert sched.bubble_fraction * sched.makespan == pytest.approx(idle)


@pytest.mark.parametrize("p", [2, 4, 6, 8])
def test_activations_p_plus_1(p: int) -> None:
    sched = run_schedule("dualpipe", make(p, 2 * p + 4))
    assert max(sched.peak_memory) == p + 1


def test_overlap_cost_shortens_the_schedule() -> None:
    slow = run_schedule("dualpipe", make(8, 20, 1, 1, 1)).makespan
    fast = run_schedule("dualpipe", make(8, 20, 1, 1, 1, fb=2)).makespan
    assert fast < slow


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(h=st.integers(1, 5), extra=st.integers(0, 4), F=st.integers(0, 3), I=st.integers(1, 3),
       W=st.integers(0, 3), fb=st.sampled_from([None, 2, 4]), lat=st.sampled_from([0, 0.5]))
def test_valid_on_random_instances(h: int, extra: int, F: int, I: int, W: int,  # noqa: N803, E741
                                   fb: int | None, lat: float) -> None:
    p = 2 * h
    m = max(2, 2 * p - 2) + 2 * extra
    inst = overlap_in_range(lambda: make(p, m, F, I, W, fb=fb, latency=lat))
    assert not validate(simulate(inst, get_schedule("dualpipe").generate(inst)))
