"""list-retimed: the list scheduler's latency-free orders timed with the latency are valid
(the same peak memory per device as without latency, so within the limit) and, where the
non-delay rule loses the pipeline's rhythm to the latency, much shorter than the list
scheduler's own schedule (docs/modelling.md §27)."""

from __future__ import annotations

import pytest
from conftest import make
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpsched.instance import Instance
from cpsched.schedules import NotApplicable, get_schedule, run_schedule
from cpsched.schedules.listsched import pipeline_list_schedule
from cpsched.simulate import simulate
from cpsched.validate import validate


def test_is_the_latency_free_orders_timed_with_the_latency() -> None:
    """By definition: the latency-free list orders, timed on the instance itself."""
    inst = make(4, 2, 16, F=1, I=1, W=1, latency=0.3, limit=6)
    free = inst.replace(**{"costs.p2p_latency": 0})
    expected = simulate(inst, pipeline_list_schedule(free).orders)
    got = run_schedule("list-retimed", inst)
    assert got.makespan == pytest.approx(expected.makespan)
    assert not validate(got)


def test_keeps_the_rhythm_the_latency_breaks() -> None:
    """p = 8 bidirectional, m = 32, F = I = W = 1, latency 0.1, limit 4 (docs/modelling.md
    §27): the list scheduler loses a fifth to the latency (138.7; 108 without it), its
    latency-free orders timed with the latency give 116.9, against the lower bound 109."""
    inst = make(8, 1, 32, F=1, I=1, W=1, latency=0.1, limit=4, placement="bidirectional")
    plain = run_schedule("list", inst)
    retimed = run_schedule("list-retimed", inst)
    assert not validate(plain) and not validate(retimed)
    assert plain.makespan == pytest.approx(138.7)
    assert retimed.makespan == pytest.approx(116.9)


def test_needs_a_latency() -> None:
    spec = get_schedule("list-retimed")
    why = spec.reason_not_applicable(make(4, 1, 8))
    assert why is not None and "costs.p2p_latency = 0" in why
    with pytest.raises(NotApplicable, match="p2p_latency"):
        spec.orders(make(4, 1, 8))


@st.composite
def instances(draw: st.DrawFn) -> Instance:
    placement = draw(st.sampled_from(["loop", "v", "bidirectional"]))
    p = draw(st.sampled_from([2, 4] if placement == "bidirectional" else [2, 3, 4]))
    v = draw(st.sampled_from([1, 2])) if placement == "loop" else (2 if placement == "v" else 1)
    m = 2 * draw(st.integers(1, 2 * p))
    S = p * v
    per = st.lists(st.sampled_from([0.5, 1, 1.5, 2]), min_size=S, max_size=S)
    kw: dict[str, object] = {"F": draw(per), "latency": draw(st.sampled_from([0.1, 0.25, 1])),
                             "activation": draw(st.lists(st.sampled_from([0.5, 1, 2]),
                                                         min_size=S, max_size=S)),
                             "placement": placement}
    if draw(st.booleans()):
        kw.update(I=draw(per), W=draw(per), B=None,
                  released_by_input=draw(st.sampled_from([0.0, 0.5])))
    else:
        kw["B"] = draw(per)
    inst = make(p, v, m, **kw)  # type: ignore[arg-type]
    low = inst.min_memory_limit()
    return make(p, v, m, limit=draw(st.sampled_from([low, low + 0.5, 2 * low])),
                **kw)  # type: ignore[arg-type]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_valid_with_the_latency_free_peaks(inst: Instance) -> None:
    """The timed orders pass the validator (dependencies with their lags, FIFO, one action
    at a time, the memory limit), and each device's peak memory is the latency-free run's:
    a device's memory is fixed by its own order."""
    free = inst.replace(**{"costs.p2p_latency": 0})
    orders = pipeline_list_schedule(free).orders
    without = simulate(free, orders)
    retimed = run_schedule("list-retimed", inst)
    assert not validate(retimed)
    assert retimed.peak_memory == pytest.approx(without.peak_memory)
