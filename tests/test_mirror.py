"""The mirror of bidirectional placement and DualPipe's pair family (cpsched.solver.mirror,
docs/modelling.md §40): the map is an involution onto the mirrored device, DualPipe's own
schedule keeps both, and the model kept to them finds a known schedule length while its
bound is marked as one of a restricted model."""

from __future__ import annotations

from collections import defaultdict

import pytest
from conftest import INSTANCES, make
from ortools.sat.python import cp_model

from cpsched.instance import Instance, load_instance
from cpsched.model import Action, Kind
from cpsched.schedules import run_schedule
from cpsched.solver import PipelineModel
from cpsched.solver.facade import combinatorial_bound
from cpsched.solver.mirror import (
    add_mirror_symmetry,
    dualpipe_family_model,
    in_dualpipe_family,
    mirror_action,
)
from cpsched.solver.overlap import pair_solution
from cpsched.solver.warm_start import best_warm_start
from cpsched.validate import validate

ROW = INSTANCES / "scale" / "p16-dualpipe-m32.toml"


def _shape(p: int, m: int | None = None) -> Instance:
    """The shipped DualPipe row with ``p`` devices and ``m`` (default ``2p``) microbatches."""
    return load_instance(ROW, [f"pipeline.devices={p}", f"pipeline.microbatches={m or 2 * p}"])


def test_mirror_is_an_involution_onto_the_mirrored_device() -> None:
    inst = _shape(6, 16)
    for a in pair_solution(inst, best_warm_start(inst)[1]).start:  # every action once
        b = mirror_action(inst, a)
        assert mirror_action(inst, b) == a and b.stage == a.stage and b.kind == a.kind
        assert inst.device_of(b.stage, b.microbatch) == inst.p - 1 - inst.device_of(
            a.stage, a.microbatch)


@pytest.mark.parametrize(("p", "m"), [(4, 8), (6, 12), (8, 32)])
def test_dualpipe_is_mirror_symmetric_and_pairs_in_its_family(p: int, m: int) -> None:
    inst = _shape(p, m)
    schedule = run_schedule("dualpipe", inst)
    start = {a.action: a.start for a in schedule.actions}
    assert all(start[mirror_action(inst, a)] == t for a, t in start.items())
    groups = defaultdict(list)
    for a in schedule.actions:
        if a.overlap is not None:
            groups[a.overlap].append(a.action)
    assert groups
    for members in groups.values():
        f = next(x for x in members if x.kind == Kind.F)
        b = next(x for x in members if x.kind != Kind.F)
        assert in_dualpipe_family(inst, (f, b))


def test_family_model_finds_six_p_minus_half_at_p6_and_is_restricted() -> None:
    """F = I = W = 1, pair 2.5, p = 6, m = 12: DualPipe 36, the bound 35; the family model
    finds 35.5 = 6p - 0.5 (docs/modelling.md §40) — one worker, a deterministic limit."""
    inst = _shape(6)
    dualpipe = run_schedule("dualpipe", inst)
    assert dualpipe.makespan == 36
    _, rows, horizon = best_warm_start(inst, {"dualpipe": dualpipe})
    lb = combinatorial_bound(inst)
    model = dualpipe_family_model(inst, pair_solution(inst, rows), horizon, lb)
    assert model.restricted and not PipelineModel(inst, horizon, lb).restricted
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_deterministic_time = 30.0
    assert solver.solve(model.model) in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    schedule = model.to_schedule(model.read(solver), "family")
    assert validate(schedule) == []
    assert inst.from_ticks(lb) == 35 and schedule.makespan == 35.5
    start = {a.action: a.start for a in schedule.actions}
    assert all(start[mirror_action(inst, a)] == t for a, t in start.items())


def test_mirror_needs_bidirectional_placement_and_pairs() -> None:
    loop = make(4, 1, 8, F=1, I=1, W=1, overlap=2.5)
    with pytest.raises(ValueError, match="bidirectional"):
        mirror_action(loop, Action(Kind.F, 0, 0))
    with pytest.raises(ValueError, match="bidirectional"):
        in_dualpipe_family(loop, (Action(Kind.F, 0, 4), Action(Kind.I, 0, 0)))
    plain = make(4, 1, 8, F=1, I=1, W=1, placement="bidirectional")
    with pytest.raises(ValueError, match="overlap_forward_backward"):
        add_mirror_symmetry(PipelineModel(plain, 10**4, 0))
