"""The one simulator and the one validator (docs/spec.md §1, §5)."""

from __future__ import annotations

import pytest
from conftest import make

from cpsched.metrics import busy_time, memory_profile
from cpsched.model import B, F, I, Overlap, Schedule, TimedAction, W
from cpsched.simulate import OrderError, simulate
from cpsched.validate import validate


def one_f_one_b_orders(p: int, m: int) -> list:
    orders = []
    for r in range(p):
        w = min(p - r - 1, m)
        ops = [F(r, i) for i in range(w)]
        for k in range(m - w):
            ops += [F(r, w + k), B(r, k)]
        ops += [B(r, i) for i in range(m - w, m)]
        orders.append(ops)
    return orders


def test_1f1b_times_and_metrics() -> None:
    inst = make(4, 1, 8, F=5, B=10)
    sch = simulate(inst, one_f_one_b_orders(4, 8), method="1f1b")
    assert sch.makespan == (8 + 4 - 1) * 15          # docs/spec.md §6
    assert sch.peak_memory == [4, 3, 2, 1]           # p activations on device 0
    assert busy_time(sch) == [120.0] * 4
    assert sch.bubble_fraction == pytest.approx(1 - 4 * 120 / (4 * 165))
    assert validate(sch) == []


def test_latency_delays_cross_device_only() -> None:
    inst = make(2, 2, 1, F=1, B=1, latency=3)
    orders = [[F(0, 0), F(2, 0), B(2, 0), B(0, 0)], [F(1, 0), F(3, 0), B(3, 0), B(1, 0)]]
    sch = simulate(inst, orders)
    t = {(a.kind, a.stage): (a.start, a.end) for a in sch.actions}
    assert t[("F", 1)] == (4, 5)        # F0 ends 1, + latency 3
    assert t[("F", 2)] == (8, 9)
    assert t[("B", 3)] == (13, 14)      # F3 at 12..13, same device, no lag
    assert validate(sch) == []


def test_deadlock_names_cycle() -> None:
    inst = make(2, 1, 2, F=1, B=1)
    orders = [[F(0, 0), B(0, 0), F(0, 1), B(0, 1)], [F(1, 1), F(1, 0), B(1, 0), B(1, 1)]]
    with pytest.raises(OrderError, match=r"deadlock: rank \d waits at"):
        simulate(inst, orders)


@pytest.mark.parametrize(("orders", "needle"), [
    ([[F(0, 0), B(0, 0)], [F(1, 0)]], "1B0 missing"),
    ([[F(0, 0), B(0, 0), F(0, 0)], [F(1, 0), B(1, 0)]], "appears twice"),
    ([[F(0, 0), B(0, 0), F(1, 0)], [B(1, 0)]], "belongs on rank 1"),
    ([[F(0, 0), I(0, 0), W(0, 0)], [F(1, 0), B(1, 0)]], "split_backward"),
    ([[F(0, 0), B(0, 0)]], "2 devices"),
])
def test_bad_orders(orders: list, needle: str) -> None:
    with pytest.raises(OrderError, match=needle):
        simulate(make(2, 1, 1, F=1, B=1), orders)


def test_overlap_pair_and_fused_mix() -> None:
    inst = make(2, 1, 2, F=2, I=1, W=1, overlap=3)
    orders = [[F(0, 0), F(0, 1), B(0, 0), I(0, 1), W(0, 1)],
              [F(1, 0), Overlap(F(1, 1), B(1, 0)), I(1, 1), W(1, 1)]]
    sch = simulate(inst, orders)
    pair = [a for a in sch.actions if a.overlap is not None]
    assert len(pair) == 2 and pair[0].start == pair[1].start and pair[0].end - pair[0].start == 3
    assert validate(sch) == []
    assert sch.orders()[1][1] == Overlap(F(1, 1), B(1, 0))


def test_memory_release_fraction() -> None:
    inst = make(1, 1, 1, F=1, I=1, W=1, activation=4, released_by_input=0.25)
    sch = simulate(inst, [[F(0, 0), I(0, 0), W(0, 0)]])
    assert memory_profile(sch)[0] == [(0.0, 4.0), (2.0, 3.0), (3.0, 0.0)]
    assert sch.peak_memory == [4.0]


def _corrupt(sch: Schedule, idx: int, **changes) -> Schedule:
    acts = list(sch.actions)
    a = acts[idx]
    acts[idx] = TimedAction(**{**a.to_dict(), "kind": a.kind, **changes})
    return Schedule(sch.instance, acts, method="x")


def test_validator_catches_each_violation() -> None:
    inst = make(2, 1, 2, F=1, B=2, limit=2)
    sch = simulate(inst, one_f_one_b_orders(2, 2))
    assert validate(sch) == []
    first = sch.actions[0]   # 0F0 at [0, 1)
    assert any("lasts" in v for v in validate(_corrupt(sch, 0, end=first.end + 1)))
    assert any("before" in v for v in validate(_corrupt(sch, 0, start=5, end=6)))
    assert any("runs on device" in v for v in validate(_corrupt(sch, 0, device=1)))
    dropped = Schedule(inst, sch.actions[1:], method="x")
    assert any("0F0 is missing" in v for v in validate(dropped))
    dup = Schedule(inst, sch.actions + [sch.actions[0]], method="x")
    assert any("more than once" in v for v in validate(dup))
    tight = make(2, 1, 2, F=1, B=2, limit=1)
    gp = simulate(tight, [[F(0, 0), F(0, 1), B(0, 0), B(0, 1)],
                          [F(1, 0), F(1, 1), B(1, 0), B(1, 1)]])
    assert any("memory limit" in v for v in validate(gp))


def test_validator_catches_device_overlap() -> None:
    inst = make(1, 1, 2, F=1, B=1)
    acts = [TimedAction(0, 0, 0, "F", 0, 1), TimedAction(0, 0, 1, "F", 0.5, 1.5),
            TimedAction(0, 0, 0, "B", 1.5, 2.5), TimedAction(0, 0, 1, "B", 2.5, 3.5)]
    assert any("overlaps" in v for v in validate(Schedule(inst, acts, method="x")))
