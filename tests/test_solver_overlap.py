"""The CP-SAT model with overlapped F&B pairs (``overlap_forward_backward``): known optima,
brute force on tiny instances, properties, and no change without an overlap cost."""

from __future__ import annotations

import pytest
from conftest import INSTANCES, make
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpsched.graph import dependencies, duration, overlap_lower_bound
from cpsched.instance import Instance, load_instance
from cpsched.model import Action, Kind, Schedule, default_actions
from cpsched.schedules import run_all
from cpsched.solver import PipelineModel, fifo_relabel, solve, split_fused
from cpsched.solver.facade import combinatorial_bound
from cpsched.validate import validate

DET = {"workers": 1, "time_limit": None}


def brute_force(inst: Instance, upper: int) -> int:
    """Optimal makespan (ticks) by exhaustive search, independent of the CP-SAT model: every
    per-device order of steps (an action alone, or an F paired with a B, an I alone or a fused
    I+W of another microbatch), each step as early as its predecessors and its device allow
    (optimal for a fixed order without a memory limit).  Steps are generated in order of
    (start, device), which reaches every such timed schedule once.  Positive durations only;
    tiny instances only.  Returns ``upper`` when nothing shorter exists."""
    acts = default_actions(inst)
    dev = {a: inst.device_of(a.stage, a.microbatch) for a in acts}
    dur = {a: duration(inst, a) for a in acts}
    preds = {a: dependencies(inst, a, lambda s, i: False) for a in acts}
    ov = [inst.ticks(x) for x in inst.overlap_forward_backward]
    split = inst.split_backward
    best = [upper]
    seen: set = set()
    # per action, device time it needs at least (a pair serves two actions; a fused W none)
    need = {a: 0.0 if (split and a.kind == Kind.W) else min(dur[a], min(ov) / 2)
            for a in acts}

    def ready_at(a: Action, end: dict) -> int | None:
        t = 0
        for q, lag in preds[a]:
            if q not in end:
                return None
            t = max(t, end[q] + lag)
        return t

    def dfs(end: dict, free: tuple, last: tuple) -> None:
        ms = max(end.values(), default=0)
        if len(end) == len(acts):
            best[0] = min(best[0], ms)
            return
        if ms >= best[0]:
            return
        left = [max(f, last[0]) for f in free]
        for a in acts:
            if a not in end:
                left[dev[a]] += need[a]
        if max(left) >= best[0]:
            return
        key = (frozenset(end.items()), free, last)
        if key in seen:
            return
        seen.add(key)
        todo = [a for a in acts if a not in end]
        ready = {a: r for a in todo if (r := ready_at(a, end)) is not None}
        for a, r in ready.items():
            d = dev[a]
            s = max(r, free[d])
            if (s, d) >= last:
                dfs({**end, a: s + dur[a]}, free[:d] + (s + dur[a],) + free[d + 1:], (s, d))
        for f, rf in ready.items():
            if f.kind != Kind.F:
                continue
            for b, rb in ready.items():
                if b.kind not in (Kind.B, Kind.I) or dev[b] != dev[f] or (
                        b.stage, b.microbatch) == (f.stage, f.microbatch):
                    continue
                d = dev[f]
                s = max(rf, rb, free[d])
                if (s, d) < last:
                    continue
                e = s + ov[f.stage]
                nf = free[:d] + (e,) + free[d + 1:]
                dfs({**end, f: e, b: e}, nf, (s, d))
                if split:  # fused: the W runs inside the pair
                    dfs({**end, f: e, b: e, Action(Kind.W, b.stage, b.microbatch): e}, nf,
                        (s, d))

    dfs({}, (0,) * inst.p, (0, -1))
    return best[0]


def test_dualpipe_instance_optimal() -> None:
    inst = load_instance(INSTANCES / "dualpipe.toml")
    res = solve(inst, **DET)
    assert res.status == "OPTIMAL"
    assert res.makespan <= 31  # DualPipe's own makespan
    assert res.lower_bound == res.makespan
    assert validate(res.schedule) == []
    assert any(a.overlap is not None for a in res.schedule.actions)
    assert res.stats["restricted"] is False


TINY = [
    # (p, v, m, placement, costs); costs: overlap below F + B everywhere
    (2, 1, 2, "loop", {"F": 2, "B": 3, "overlap": 4}),
    (2, 1, 3, "loop", {"F": 2, "B": 3, "overlap": 4}),
    (2, 1, 4, "loop", {"F": 1, "B": 2, "overlap": 2}),
    (2, 1, 3, "loop", {"F": 1, "B": 2, "overlap": 2, "latency": 1}),
    (2, 1, 2, "loop", {"F": 2, "I": 2, "W": 1, "overlap": 3}),
    (2, 1, 3, "loop", {"F": 2, "I": 2, "W": 1, "overlap": 3}),
    (2, 2, 2, "v", {"F": 2, "B": 3, "overlap": 4}),
    (2, 2, 2, "v", {"F": 2, "I": 1, "W": 1, "overlap": 2}),
    (2, 1, 2, "bidirectional", {"F": 2, "I": 1, "W": 1, "overlap": 3}),
    (2, 1, 2, "bidirectional", {"F": 2, "B": 3, "overlap": 4}),
]


@pytest.mark.parametrize(("p", "v", "m", "placement", "costs"), TINY)
def test_tiny_against_brute_force(p: int, v: int, m: int, placement: str, costs: dict) -> None:
    inst = make(p, v, m, placement=placement, **costs)
    res = solve(inst, **DET)
    assert res.status == "OPTIMAL"
    assert validate(res.schedule) == []
    assert brute_force(inst, inst.ticks(res.makespan)) == inst.ticks(res.makespan)


def test_overlap_pays_off_on_1f1b_shape() -> None:
    # p=2, m=4, F=1, B=2, pair 2: without pairs (m + p - 1)(F + B) = 15
    inst = make(2, 1, 4, F=1, B=2, overlap=2)
    res = solve(inst, **DET)
    assert res.status == "OPTIMAL" and res.makespan < 15
    assert sum(a.overlap is not None for a in res.schedule.actions) >= 2


def test_no_fifo_gives_same_optimum() -> None:
    # FIFO microbatch order stays valid symmetry breaking with pairs
    from ortools.sat.python import cp_model

    for inst in (make(2, 1, 3, F=2, I=1, W=2, overlap=3),
                 make(2, 2, 2, F=2, B=3, overlap=4, placement="v")):
        opt = solve(inst, **DET)
        ms = inst.ticks(opt.makespan)
        lb = overlap_lower_bound(inst)
        model = PipelineModel(inst, ms, lb, fifo=False)
        model.model.add(model.makespan <= ms - 1)
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        assert solver.solve(model.model) == cp_model.INFEASIBLE


def test_dualpipe_hint_relabel_keeps_pairs() -> None:
    inst = load_instance(INSTANCES / "dualpipe.toml")
    sch = run_all(inst)["dualpipe"]
    acts = fifo_relabel(inst, split_fused(sch))
    again = Schedule(inst, acts, method="x")
    assert validate(again) == []
    assert again.makespan == sch.makespan and again.peak_memory == sch.peak_memory
    assert sorted(a.overlap for a in again.actions if a.overlap is not None) == sorted(
        a.overlap for a in sch.actions if a.overlap is not None)


def test_memory_limit_with_overlap() -> None:
    inst = load_instance(INSTANCES / "dualpipe.toml")
    inst = inst.replace(**{"memory.limit": 4})
    res = solve(inst, **DET)
    assert validate(res.schedule) == []
    assert max(res.schedule.peak_memory) <= 4
    assert res.status == "OPTIMAL"


def test_restricted_pairs_claim_only_the_combinatorial_bound(monkeypatch) -> None:
    import cpsched.solver.overlap as solver_mod

    inst = load_instance(INSTANCES / "dualpipe.toml")
    monkeypatch.setattr(solver_mod, "MAX_PAIRS", 60)
    res = solve(inst, workers=1, time_limit=None, parameters={"max_deterministic_time": 2.0})
    assert res.stats["restricted"] is True and res.stats["overlap_pairs"] < 224
    assert validate(res.schedule) == []
    assert res.makespan <= 31
    # the combinatorial bound: the pair fill/drain bound (30) here, above §4.3's 26
    assert res.lower_bound == combinatorial_bound(inst) / inst.time_scale == 30
    assert overlap_lower_bound(inst) / inst.time_scale == 26
    assert res.status == "FEASIBLE" and "restricted" in res.message


@pytest.mark.parametrize(("limit", "expected"), [(None, 285), (6, 325)])
def test_without_overlap_unchanged(article: Instance, limit: float | None,
                                   expected: float) -> None:
    inst = article if limit is None else article.replace(**{"memory.limit": limit})
    res = solve(inst, **DET)
    assert res.status == "OPTIMAL" and res.makespan == expected
    # no pair variables: none in the model, or no model (the warm start meets the bound)
    assert res.stats.get("overlap_pairs", 0) == 0
    assert ("overlap_pairs" in res.stats) == (res.schedule.extra["warm_start_makespan"] > expected)


@st.composite
def overlap_instances(draw) -> Instance:
    placement = draw(st.sampled_from(["loop", "v", "bidirectional"]))
    p = 2
    v = 2 if placement == "v" else draw(st.integers(1, 2)) if placement == "loop" else 1
    m = draw(st.sampled_from([2, 4])) if placement == "bidirectional" else draw(
        st.integers(1, 4))
    S = p * v
    split = draw(st.booleans())
    cost = st.integers(1, 4)
    costs: dict = {"forward": draw(st.lists(cost, min_size=S, max_size=S)),
                   "p2p_latency": draw(st.sampled_from([0, 0, 1]))}
    if split:
        costs["backward_input"] = draw(st.lists(cost, min_size=S, max_size=S))
        costs["backward_weight"] = draw(st.lists(st.integers(0, 3), min_size=S, max_size=S))
    else:
        costs["backward"] = draw(st.lists(cost, min_size=S, max_size=S))
    memory: dict = {"activation": draw(st.lists(st.sampled_from([1, 2]), min_size=S,
                                                max_size=S)),
                    "released_by_input": draw(st.sampled_from([0.0, 0.5]))}
    data = {"name": "h", "pipeline": {
        "devices": p, "stages_per_device": v, "microbatches": m, "placement": placement,
        "split_backward": split}, "costs": costs, "memory": memory}
    # an overlap cost in its physical range max(F, B) <= ov <= F + B (docs/spec.md §2.2),
    # B the longest backward on the F's device, anywhere in that range
    plain = Instance.from_dict(data)
    ov = []
    for s in range(S):
        b = max(plain.backward[t] for t in plain.stages_of(plain.device_of(s)))
        f = plain.forward[s]
        ov.append(max(f, b) + draw(st.sampled_from([0, 0.5, 1])) * (f + b - max(f, b)))
    costs["overlap_forward_backward"] = ov
    inst = Instance.from_dict(data)
    if draw(st.booleans()):
        need = inst.min_memory_limit()
        inst = inst.replace(**{"memory.limit": need + draw(st.sampled_from([0, 1, 2]))})
    return inst


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(overlap_instances())
def test_overlap_properties(inst: Instance) -> None:
    baselines = run_all(inst)
    res = solve(inst, candidates=baselines, workers=1, time_limit=None,
                parameters={"max_deterministic_time": 2.0})
    assert validate(res.schedule) == []
    assert res.lower_bound <= res.makespan + 1e-9
    assert res.lower_bound >= overlap_lower_bound(inst) / inst.time_scale - 1e-9
    for name, sch in baselines.items():
        if not validate(sch):
            assert res.makespan <= sch.makespan + 1e-9, name
    if res.status == "OPTIMAL":
        assert res.makespan == pytest.approx(res.lower_bound)
    if inst.memory_limit is None and inst.m <= 2 and inst.v == 1:
        assert res.status == "OPTIMAL"
        assert brute_force(inst, inst.ticks(res.makespan)) == inst.ticks(res.makespan)
