"""1F1B and interleaved 1F1B with overlapped F&B pairs: hand-derived orders (ppviz generators),
preconditions (the real ones: no accepted configuration deadlocks), validity."""

from __future__ import annotations

import pytest
from conftest import overlap_in_range
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpsched.instance import Instance
from cpsched.model import Kind, Overlap
from cpsched.schedules import NotApplicable, get_schedule, run_schedule
from cpsched.simulate import OrderError, simulate
from cpsched.validate import validate


def make(p: int, m: int, v: int = 1, *, F: float = 1, B: float = 2,  # noqa: N803
         overlap: float | None = None, split: bool = False, latency: float = 0) -> Instance:
    costs: dict[str, object] = {"forward": F, "p2p_latency": latency}
    if split:
        costs.update(backward_input=B / 2, backward_weight=B / 2)
    else:
        costs["backward"] = B
    if overlap is not None:
        costs["overlap_forward_backward"] = overlap
    return Instance.from_dict({
        "name": "ov",
        "pipeline": {"devices": p, "stages_per_device": v, "microbatches": m,
                     "split_backward": split},
        "costs": costs,
    })


def orders_text(name: str, inst: Instance) -> list[str]:
    return [" ".join(str(a) for a in ops) for ops in get_schedule(name).generate(inst)]


def test_1f1b_overlap_orders() -> None:
    # ppviz generate_1f1b_overlap_schedule, p = 2, m = 4: warm-up 2(p - r - 1) + 1
    # forwards, m - warm-up pairs (F, B), then the remaining backwards.
    assert orders_text("1f1b-overlap", make(2, 4)) == [
        "0F0 0F1 0F2 (0F3;0B0)OVERLAP_F_B 0B1 0B2 0B3",
        "1F0 (1F1;1B0)OVERLAP_F_B (1F2;1B1)OVERLAP_F_B (1F3;1B2)OVERLAP_F_B 1B3",
    ]


def test_interleaved_overlap_orders() -> None:
    # ppviz generate_1f1b_interleave_overlap_schedule, p = 2, v = 2, m = 4 (groups of p = 2
    # microbatches per chunk): rank 0 warm-up 2(p - 1) + (v - 1)p + 1 = 5, rank 1 3.
    assert orders_text("interleaved-1f1b-overlap", make(2, 4, 2)) == [
        "0F0 0F1 2F0 2F1 0F2 (0F3;2B0)OVERLAP_F_B (2F2;2B1)OVERLAP_F_B "
        "(2F3;0B0)OVERLAP_F_B 0B1 2B2 2B3 0B2 0B3",
        "1F0 1F1 3F0 (3F1;3B0)OVERLAP_F_B (1F2;3B1)OVERLAP_F_B (1F3;1B0)OVERLAP_F_B "
        "(3F2;1B1)OVERLAP_F_B (3F3;3B2)OVERLAP_F_B 3B3 1B2 1B3",
    ]


def test_interleaved_overlap_with_v1_is_1f1b_overlap() -> None:
    inst = make(4, 9)
    assert (get_schedule("interleaved-1f1b-overlap").generate(inst)
            == get_schedule("1f1b-overlap").generate(inst))


def test_overlap_pairs_use_the_overlap_cost() -> None:
    inst = make(4, 8, F=5, B=10, overlap=12)
    sched = run_schedule("1f1b-overlap", inst)
    assert not validate(sched)
    pairs = [a for a in sched.actions if a.overlap is not None]
    assert pairs and all(a.end - a.start == 12 for a in pairs)
    assert sched.makespan < (8 + 3) * 15  # beats 1F1B when F&B < F + B
    # steps are fused B even with split backward (as the visualizer)
    split = make(4, 8, split=True)
    steps = [s for ops in get_schedule("1f1b-overlap").generate(split) for s in ops]
    assert all(s.backward.kind == Kind.B for s in steps if isinstance(s, Overlap))
    assert not validate(run_schedule("1f1b-overlap", split))


def test_preconditions() -> None:
    ov = get_schedule("1f1b-overlap")
    assert ov.check(make(4, 6)) == ("pipeline.microbatches = 6: 1f1b-overlap needs >= "
                                    "2p - 1 = 7 (rank 0 runs 7 warm-up forwards)")
    assert ov.check(make(4, 7)) is None
    assert ov.check(make(4, 8, 2)) == "pipeline.stages_per_device = 2: 1f1b-overlap needs 1"
    il = get_schedule("interleaved-1f1b-overlap")
    assert il.check(make(4, 6, 2)) == (
        "pipeline.microbatches = 6: interleaved-1f1b-overlap with stages_per_device = 2 "
        "needs a multiple of p = 4 (Megatron's chunk groups; other values can deadlock)")
    assert il.check(make(4, 4, 3)) == (
        "pipeline.microbatches = 4: interleaved-1f1b-overlap needs m * v > "
        "2(p - 1) + (v - 1) p = 14: m >= 8 (a multiple of p = 4) with v = 3")
    assert il.check(make(4, 8, 3)) is None
    assert il.check(make(3, 4)) == (
        "pipeline.microbatches = 4: interleaved-1f1b-overlap needs m * v > "
        "2(p - 1) + (v - 1) p = 4: m >= 5 with v = 1")
    assert il.check(make(1, 4, 3)).startswith(
        "pipeline.stages_per_device = 3: interleaved-1f1b-overlap on one device needs <= 2")
    assert il.check(make(4, 8, 2)) is None
    with pytest.raises(NotApplicable, match="microbatches = 6"):
        run_schedule("interleaved-1f1b-overlap", make(4, 6, 2))


@pytest.mark.parametrize("name", ["1f1b-overlap", "interleaved-1f1b-overlap"])
def test_accepted_configurations_never_deadlock(name: str) -> None:
    spec = get_schedule(name)
    for p in range(1, 7):
        for v in (1, 2, 3, 4):
            for m in range(1, 4 * p + 2):
                inst = make(p, m, v)
                if spec.check(inst) is not None:
                    continue
                try:
                    simulate(inst, spec.generate(inst))
                except OrderError as exc:  # pragma: no cover - the failure message
                    pytest.fail(f"{name} p={p} v={v} m={m}: {exc}")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(p=st.integers(1, 5), v=st.integers(1, 3), k=st.integers(1, 4), F=st.integers(0, 3),
       B=st.integers(1, 4), ov=st.sampled_from([None, 2, 5]), lat=st.sampled_from([0, 1.5]),
       name=st.sampled_from(["1f1b-overlap", "interleaved-1f1b-overlap"]))
def test_valid_on_random_instances(p: int, v: int, k: int, F: int, B: int,  # noqa: N803
                                   ov: int | None, lat: float, name: str) -> None:
    spec = get_schedule(name)
    m = p * k + (p - 1 if name == "1f1b-overlap" else 0)
    inst = overlap_in_range(lambda: make(p, m, v if name != "1f1b-overlap" else 1, F=F, B=B,
                                         overlap=ov, latency=lat))
    if spec.check(inst) is not None:
        return
    sched = simulate(inst, spec.generate(inst), method=name)
    assert not validate(sched)
