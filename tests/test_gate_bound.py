"""The gate bound (cpsched.gate_bound, docs/modelling.md §26): known values, and never above
a proven optimum or a valid schedule."""

from __future__ import annotations

from pathlib import Path

from conftest import make
from hypothesis import HealthCheck, assume, given, settings
from test_bounds import limited_instances, proven_optimum, starved_instances

from cpsched.bounds import area_bound, fill_drain_bound
from cpsched.gate_bound import applies, device_items, drain_idle, fill_idle, gate_bound, gates
from cpsched.instance import Instance, load_instance
from cpsched.rules import chain_heads_tails
from cpsched.schedules import run_all
from cpsched.validate import validate

SCALE = Path(__file__).resolve().parents[1] / "instances" / "scale"


def test_turn_device_gates_the_v_min_scale_instance() -> None:
    # p16 V m128 profiled, V-Min memory: the turn device (15) holds 6 microbatches' two
    # half-activations at once; device 0 idles >= 29.99 in its fill and 21.969 in its drain
    # (the schedules found: 31.4 and 23.7), the per-device fill/drain bound 817.644
    inst = load_instance(SCALE / "p16-v-m128-vmin-profiled.toml")
    head, tail = chain_heads_tails(inst)
    gate = next(g for g in gates(inst, head) if g.device == 15)
    assert (gate.last, gate.k, inst.from_ticks(gate.length)) == (16, 6, 32.88)
    items = device_items(inst, 0, head, tail)
    assert inst.from_ticks(fill_idle(inst, 0, gate, items, head)) == 29.99
    assert inst.from_ticks(drain_idle(inst, 0, gate, items, head, tail)) == 21.969
    assert inst.from_ticks(gate_bound(inst)) == 839.799


def test_at_most_a_proven_optimum_on_the_v_half_scale_instance() -> None:
    # p16-v-m64-vhalf: V-Half is optimal (425, README); the bound reaches it, not beyond
    inst = load_instance(SCALE / "p16-v-m64-vhalf.toml")
    assert inst.from_ticks(gate_bound(inst)) == 425


def test_above_the_other_bounds_and_below_the_optimum_on_a_small_v_instance() -> None:
    # p3 V m9, fused, the last stage heavier, latency 0.1, limit 2.33: fill/drain and area
    # 59.746, the gate bound 60.186, the optimum (CP-SAT, plain bound only) 68.62
    inst = make(3, 2, 9, F=[1] * 5 + [1.4], B=[1.65] * 5 + [2.105], placement="v",
                latency=0.1, activation=0.5).with_memory_limit(2.33)
    others = max(fill_drain_bound(inst)[0], area_bound(inst))
    assert (inst.from_ticks(others), inst.from_ticks(gate_bound(inst))) == (59.746, 60.186)
    assert gate_bound(inst) <= proven_optimum(inst) == inst.ticks(68.62)


def test_does_not_apply() -> None:
    assert not applies(make(2, 1, 4, F=1, B=2))  # no limit
    assert gate_bound(make(2, 1, 4, F=1, B=2)) == 0
    bidi = make(2, 1, 4, F=1, B=2, placement="bidirectional")
    assert gate_bound(bidi.with_memory_limit(bidi.min_memory_limit())) == 0


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(limited_instances())
def test_never_exceeds_a_proven_optimum(inst: Instance) -> None:
    opt = proven_optimum(inst)
    if opt is None:
        return
    assert gate_bound(inst) <= opt


@settings(max_examples=80, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(starved_instances())
def test_never_exceeds_a_valid_schedule(inst: Instance) -> None:
    bound = gate_bound(inst)
    valid = [s for s in run_all(inst).values() if not validate(s)]
    assume(valid)
    assert all(bound <= inst.ticks(s.makespan) for s in valid)
