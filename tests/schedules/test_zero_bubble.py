"""ZB-H1 (ZB-1P) and ZB-H2: hand-derived orders, the paper's formulas, preconditions, validity."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpsched.instance import Instance
from cpsched.schedules import NotApplicable, get_schedule, run_schedule
from cpsched.simulate import simulate
from cpsched.validate import validate


def make(p: int, m: int, F: float = 1, I: float = 1, W: float = 1,  # noqa: N803, E741
         *, v: int = 1, placement: str = "loop", split: bool = True,
         latency: float = 0) -> Instance:
    costs: dict[str, object] = {"forward": F, "p2p_latency": latency}
    if split:
        costs.update(backward_input=I, backward_weight=W)
    else:
        costs["backward"] = I + W
    return Instance.from_dict({
        "name": "zb",
        "pipeline": {"devices": p, "stages_per_device": v, "microbatches": m,
                     "placement": placement, "split_backward": split},
        "costs": costs,
    })


def orders_text(name: str, inst: Instance) -> list[str]:
    return [" ".join(str(a) for a in ops) for ops in get_schedule(name).generate(inst)]


def test_zb_h1_orders_follow_the_visualizer_zb1p_generator() -> None:
    # p = 3, m = 4, derived by hand from ppviz's generate_zero_bubble_1p_schedule:
    # warm-up p - r - 1 F; steady F, I and W once F issued - W issued >= p - 1; I W cool-down.
    assert orders_text("zb-h1", make(3, 4)) == [
        "0F0 0F1 0F2 0I0 0W0 0F3 0I1 0W1 0I2 0W2 0I3 0W3",
        "1F0 1F1 1I0 1F2 1I1 1W0 1F3 1I2 1W1 1I3 1W2 1W3",
        "2F0 2I0 2F1 2I1 2F2 2I2 2W0 2F3 2I3 2W1 2W2 2W3",
    ]


def test_zb_h2_orders_match_the_paper_figure() -> None:
    # Zero Bubble paper, Figure 3 (bottom), p = 4, m = 8 (1-based there): device 1 runs
    # F1..F7 B1 W1 F8 B2 W2 .. B8 W8; device 4 runs F1 B1 .. F7 B7 W1 F8 B8 W2 .. W8.
    got = orders_text("zb-h2", make(4, 8))
    assert got[0] == ("0F0 0F1 0F2 0F3 0F4 0F5 0F6 0I0 0W0 0F7 "
                      + " ".join(f"0I{i} 0W{i}" for i in range(1, 8)))
    assert got[3] == (" ".join(f"3F{i} 3I{i}" for i in range(7)) + " 3W0 3F7 3I7 "
                      + " ".join(f"3W{i}" for i in range(1, 8)))


@pytest.mark.parametrize("p", [2, 3, 4, 8])
@pytest.mark.parametrize("extra", [0, 1, 5])
@pytest.mark.parametrize("F,I,W", [(1, 1, 1), (5, 5, 5), (2, 1, 1), (3, 2, 1), (5, 4, 3),  # noqa: E741
                                   (2, 3, 2)])
def test_zb_h1_formula(p: int, extra: int, F: int, I: int, W: int) -> None:  # noqa: N803, E741
    """docs/spec.md §6 (paper §3.1): bubble (p - 1)(F + B - 2W) with B = I + W, i.e. makespan
    m(F + I + W) + (p - 1)(F + I - W); exact whenever W <= min(F, I), m >= p."""
    m = p + extra
    inst = make(p, m, F, I, W)
    sched = run_schedule("zb-h1", inst)
    assert not validate(sched)
    B = I + W
    assert sched.makespan == m * (F + B) + (p - 1) * (F + B - 2 * W)
    assert sched.peak_memory[0] == p  # as 1F1B: p activations on device 0
    assert max(sched.peak_memory) == p


def test_zb_h1_beats_1f1b_bubble() -> None:
    inst = make(4, 8, 1, 1, 1)
    assert run_schedule("zb-h1", inst).makespan < (8 + 3) * 3  # 1F1B: (m + p - 1)(F + B)


@pytest.mark.parametrize("p", [2, 3, 4, 6])
@pytest.mark.parametrize("extra", [0, 1, 4])
@pytest.mark.parametrize("F,I,W", [(1, 1, 1), (5, 5, 5), (2, 1, 1), (1, 2, 1), (3, 2, 1)])  # noqa: E741
def test_zb_h2_near_zero_bubble(p: int, extra: int, F: int, I: int, W: int) -> None:  # noqa: N803, E741
    """ZB-H2: with m >= 2p - 1 the only idle time is each rank's start-up r F (a
    parallelogram): makespan m(F + I + W) + (p - 1) F, exact whenever I <= 2 min(F, W)
    (the paper draws F = I = W); peak memory 2p - 1 activations."""
    m = 2 * p - 1 + extra
    sched = run_schedule("zb-h2", make(p, m, F, I, W))
    assert not validate(sched)
    assert sched.makespan == m * (F + I + W) + (p - 1) * F
    assert sched.peak_memory[0] == 2 * p - 1


@pytest.mark.parametrize("name", ["zb-h1", "zb-h2"])
def test_preconditions_name_field_value_and_requirement(name: str) -> None:
    spec = get_schedule(name)
    assert spec.check(make(2, 4, split=False)) == (
        f"pipeline.split_backward = false: {name} needs true")
    assert spec.check(make(2, 4, v=2)) == f"pipeline.stages_per_device = 2: {name} needs 1"
    assert spec.check(make(2, 4, v=2, placement="v")) == (
        f'pipeline.placement = "v": {name} needs "loop"')
    assert spec.check(make(2, 4)) is None
    with pytest.raises(NotApplicable, match="split_backward = false"):
        run_schedule(name, make(2, 4, split=False))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(p=st.integers(1, 6), m=st.integers(1, 12), F=st.integers(0, 4),
       I=st.integers(1, 4), W=st.integers(0, 4), lat=st.sampled_from([0, 0.5, 2]),
       name=st.sampled_from(["zb-h1", "zb-h2"]))
def test_valid_on_random_instances(p: int, m: int, F: int, I: int, W: int,  # noqa: N803, E741
                                   lat: float, name: str) -> None:
    inst = make(p, m, F, I, W, latency=lat)
    orders = get_schedule(name).generate(inst)
    assert not validate(simulate(inst, orders))
    assert [len(o) for o in orders] == [3 * m] * p
