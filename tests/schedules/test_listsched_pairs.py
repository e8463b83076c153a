"""Overlapped F&B pairs formed by the list scheduler as it dispatches
(cpsched.schedules.listsched_pairs, docs/modelling.md §25): valid, within the limit, and
shorter where a pair saves time."""

from __future__ import annotations

import pytest
from conftest import make
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpsched.schedules import listsched, listsched_bidi, listsched_configs
from cpsched.schedules.listsched import Problem, pipeline_list_schedule
from cpsched.schedules.listsched_pairs import Pairing, pair_modes
from cpsched.simulate import simulate
from cpsched.validate import validate


def _pair_free(monkeypatch: pytest.MonkeyPatch) -> None:
    """The portfolios without their pair runs (as before pairs were formed)."""
    for mod in (listsched, listsched_bidi, listsched_configs):
        monkeypatch.setattr(mod, "pair_modes", lambda inst: (None,))


def _pairs(sched) -> int:  # noqa: ANN001
    return len({a.overlap for a in sched.actions if a.overlap is not None})


@pytest.mark.parametrize("kw,paired,pair_free", [
    # loop, 2 chunks, split backward, the last stage heavier (F 1.4, W 1.1), pair 2.6,
    # limit 6 half-activations: a pair saves 0.05 in the middle and 0.9 on the last stage
    (dict(p=4, v=2, m=16, F=[1] * 7 + [1.4], I=1, W=[0.65] * 7 + [1.1], overlap=2.6,
          limit=6, activation=0.5), 90.0, 101.4),
    # DualPipe's shape without a limit (F = I = W = 1, pair 2.5)
    (dict(p=4, v=1, m=16, F=1, I=1, W=1, overlap=2.5, placement="bidirectional"), 44.0, 49.0),
])
def test_pairs_shorten_the_list_schedule(kw: dict, paired: float, pair_free: float,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    inst = make(**kw)
    sched = simulate(inst, pipeline_list_schedule(inst).orders)
    assert validate(sched) == [] and sched.makespan == paired and _pairs(sched) > 0
    _pair_free(monkeypatch)
    assert simulate(inst, pipeline_list_schedule(inst).orders).makespan == pair_free


def test_small_saving_pairs_add_up(monkeypatch: pytest.MonkeyPatch) -> None:
    # loop, 2 chunks, no limit, the last stage heavier: a middle-stage pair saves 0.05, below
    # "forward:0.1"'s threshold; the "both:0.01" runs form 31 pairs (docs/modelling.md §25)
    inst = make(p=4, v=2, m=16, F=[1] * 7 + [1.4], I=1, W=[0.65] * 7 + [1.1], overlap=2.6)
    sched = simulate(inst, pipeline_list_schedule(inst).orders)
    assert validate(sched) == [] and sched.makespan == 90.5 and _pairs(sched) == 31
    for mod in (listsched, listsched_bidi, listsched_configs):
        monkeypatch.setattr(mod, "pair_modes", lambda inst: (None, "forward:0.1"))
    assert simulate(inst, pipeline_list_schedule(inst).orders).makespan == 99.15


def test_no_pair_where_it_saves_nothing() -> None:
    # a pair as long as F + B back to back: none is formed, and none is tried without a cost
    inst = make(4, 1, 8, F=1, B=2, overlap=3, limit=3)
    assert _pairs(simulate(inst, pipeline_list_schedule(inst).orders)) == 0
    rule = Pairing(Problem(inst), "both")
    assert all(rule(t, list(range(3 * 8 * 4))) is None for t in range(2 * 8 * 4))
    assert pair_modes(make(2, 1, 2, F=1, B=2)) == (None,)
    with pytest.raises(ValueError, match="overlap_forward_backward"):
        Pairing(Problem(make(2, 1, 2, F=1, B=2)), "forward")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), p=st.sampled_from([2, 3, 4]), m=st.integers(4, 10),
       placement=st.sampled_from(["loop", "v", "bidirectional"]), split=st.booleans(),
       latency=st.sampled_from([0, 0.5]), factor=st.sampled_from([None, 1.0, 1.5, 3.0]),
       mode=st.sampled_from(["forward", "both", "backward", "both:0.3", "both:0.01",
                             "forward:0.1"]))
def test_paired_runs_valid_within_the_limit(data: st.DataObject, p: int, m: int,
                                            placement: str, split: bool, latency: float,
                                            factor: float | None, mode: str) -> None:
    if placement == "bidirectional":
        p, m, v = 2 * (p // 2), 2 * (m // 2), 1
    else:
        v = 2 if placement == "v" else data.draw(st.integers(1, 2))
    fwd = data.draw(st.lists(st.sampled_from([1, 2, 3]), min_size=p * v, max_size=p * v))
    bi, bw = data.draw(st.sampled_from([1, 2])), data.draw(st.sampled_from([0, 1]))
    back = bi + bw if split else bi
    # a pair lasts between its longer half and the two back to back (docs/spec.md §2)
    frac = data.draw(st.sampled_from([0.0, 0.0, 0.5, 0.8]))
    overlap = [max(f, back) + frac * min(f, back) for f in fwd]
    kw: dict = dict(F=fwd, placement=placement, latency=latency, overlap=overlap)
    kw.update(I=bi, W=bw) if split else kw.update(B=bi)
    inst = make(p, v, m, **kw)
    if factor is not None:
        inst = inst.replace(**{"memory.limit": inst.min_memory_limit() * factor})
    if placement == "bidirectional":
        res = pipeline_list_schedule(inst, restarts=2)
    else:
        memory = factor is not None
        run = listsched.run_rule(Problem(inst), data.draw(st.sampled_from(["dfs", "ilv"])),
                                 None, memory, 0.0 if memory else None, pairs=mode)
        res = listsched._result(Problem(inst), run)
    sched = simulate(inst, res.orders)
    assert validate(sched) == []
    if placement != "bidirectional":  # non-delay on each device: the simulator agrees
        assert sched.makespan == inst.from_ticks(res.makespan)
