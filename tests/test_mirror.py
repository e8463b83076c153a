"""The mirror of bidirectional placement and DualPipe's pair family (cpsched.solver.mirror,
docs/modelling.md §40): the map is an involution onto the mirrored device, DualPipe's own
schedule keeps both, and the model kept to them finds a known schedule length while its
bound is marked as one of a restricted model; the family's tight middle (§47) finds
``6p - 0.5`` with the middle device's ``p - 1`` pairs, and the busy bound cuts no schedule."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from conftest import INSTANCES, make
from ortools.sat.python import cp_model

from cpsched.instance import Instance, load_instance
from cpsched.model import Action, Kind, Overlap
from cpsched.schedules import run_schedule
from cpsched.solver import PipelineModel
from cpsched.solver.facade import combinatorial_bound
from cpsched.solver.family import family_model
from cpsched.solver.mirror import (
    add_busy_bound,
    add_mirror_symmetry,
    add_tight_middle,
    dualpipe_family_model,
    grid_cap,
    in_dualpipe_family,
    mirror_action,
    tight_middle_applies,
)
from cpsched.solver.overlap import pair_solution
from cpsched.solver.warm_start import best_warm_start
from cpsched.validate import validate

ROW = INSTANCES / "scale" / "p16-dualpipe-m32.toml"


def _shape(p: int, m: int | None = None) -> Instance:
    """The shipped DualPipe row with ``p`` devices and ``m`` (default ``2p``) microbatches."""
    return load_instance(ROW, [f"pipeline.devices={p}", f"pipeline.microbatches={m or 2 * p}"])


def _solved(model: PipelineModel, units: float = 30.0) -> tuple[cp_model.CpSolver, Any]:
    """``model`` solved with one worker for ``units`` deterministic units (a schedule found):
    the solver and its status."""
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_deterministic_time = units
    status = solver.solve(model.model)
    assert status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    return solver, status


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
    schedule = model.to_schedule(model.read(_solved(model)[0]), "family")
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


@pytest.mark.parametrize("p", [6, 8, 10])
def test_tight_middle_finds_six_p_minus_half_with_p_minus_one_middle_pairs(p: int) -> None:
    """F = I = W = 1, pair 2.5, m = 2p: the tight middle finds ``6p - 0.5`` (DualPipe:
    36, 48.5, 61; the bound ``6p - 1``), mirror-symmetric, DualPipe's warm-up on every device
    and ``p - 1`` pairs on the middle device, which idles only before its first forward
    (docs/modelling.md §47) — one worker, a deterministic limit."""
    inst = _shape(p)
    assert tight_middle_applies(inst)
    lb = combinatorial_bound(inst)
    model = family_model(inst, run_schedule("dualpipe", inst), lb, tight=True)  # as solve's
    schedule = model.to_schedule(model.read(_solved(model)[0]), "tight")
    assert validate(schedule) == []
    assert inst.from_ticks(lb) == 6 * p - 1 and schedule.makespan == 6 * p - 0.5
    start = {a.action: a.start for a in schedule.actions}
    assert all(start[mirror_action(inst, a)] == t for a, t in start.items())
    middle = p // 2 - 1
    orders = schedule.orders()[middle]
    assert sum(isinstance(step, Overlap) for step in orders) == p - 1
    forwards = [a for a in schedule.actions if a.device == middle and a.kind == Kind.F]
    assert [a.action.microbatch for a in forwards[:4]] == [0, p, 1, p + 1]  # DualPipe's warm-up
    busy = sum(a.end - a.start for a in schedule.actions
               if a.device == middle and (a.overlap is None or a.kind == Kind.F))
    assert busy == schedule.makespan - middle  # no idle after its first forward at ``middle``


def test_tight_middle_applies_to_dualpipe_shapes_at_m_2p_only() -> None:
    assert not tight_middle_applies(_shape(4))  # p < 6
    assert not tight_middle_applies(_shape(8, 32))  # m = 4p
    plain = make(8, 1, 16, F=1, I=1, W=1, placement="bidirectional")
    assert not tight_middle_applies(plain)  # no overlap cost
    inst = _shape(8, 32)
    dualpipe = run_schedule("dualpipe", inst)
    _, rows, horizon = best_warm_start(inst, {"dualpipe": dualpipe})
    with pytest.raises(ValueError, match="m = 2p"):
        dualpipe_family_model(inst, pair_solution(inst, rows), horizon, 0, tight=True)
    with pytest.raises(ValueError, match="m = 2p"):
        add_tight_middle(PipelineModel(inst, horizon, 0))


def test_busy_bound_cuts_no_schedule() -> None:
    """The full pair model with the busy bound on every device keeps the optimum the model
    proves without it (DualPipe's shape, p = 4: 23.5, docs/modelling.md §20)."""
    p, optimum = 4, 23.5
    inst = _shape(p)
    _, rows, horizon = best_warm_start(inst, {"dualpipe": run_schedule("dualpipe", inst)})
    lb = combinatorial_bound(inst)
    results = []
    for busy in (False, True):
        model = PipelineModel(inst, horizon, lb)
        model.add_hint(pair_solution(inst, rows))
        if busy:
            assert add_busy_bound(model) == p
        solver, status = _solved(model)
        assert status == cp_model.OPTIMAL
        results.append(inst.from_ticks(solver.objective_value))
    assert results == [optimum, optimum]


def test_the_p16_rows_95_5_schedule_is_valid_and_has_the_tight_middles_shape() -> None:
    """The shipped p16-dualpipe-m32 row (bound 95) has a schedule of 95.5: the tight middle's
    (docs/modelling.md §47, ``benchmarks/dualpipe_family.py --p 16 -t 900 --no-solve
    --no-family --target 95.5 --write DIR``, 555 s), stored as found and read against the
    shipped instance."""
    from cpsched.model import Schedule

    inst = load_instance(ROW)
    schedule = Schedule.from_json(Path(__file__).parent / "data" / "p16-dualpipe-m32-95.5.json",
                                  inst)
    assert validate(schedule) == [] and schedule.makespan == 95.5
    assert inst.from_ticks(combinatorial_bound(inst)) == 95
    start = {a.action: a.start for a in schedule.actions}
    assert all(start[mirror_action(inst, a)] == t for a, t in start.items())
    orders = schedule.orders()
    assert [sum(isinstance(s, Overlap) for s in orders[d]) for d in (7, 8)] == [15, 15]


def test_grid_cap_is_the_last_grid_point_within_the_gap() -> None:
    """Durations 1 and pair 2.5 in ticks of 0.1: the grid's step is 5 ticks, so within 1 %
    of 59 (59.59) the cap is 59.5 and of 47 (47.47) the bound itself; a latency of 0.1 makes
    the step one tick; never below the bound."""
    inst = make(8, 1, 16, F=1, I=1, W=1, overlap=2.5, placement="bidirectional")
    model = family_model(inst, run_schedule("dualpipe", inst), combinatorial_bound(inst))
    assert inst.time_scale == 10
    assert grid_cap(model, 590, 0.01) == 595
    assert grid_cap(model, 470, 0.01) == 470
    assert grid_cap(model, 470, 0.0) == 470
    late = make(8, 1, 16, F=1, I=1, W=1, overlap=2.5, placement="bidirectional", latency=0.1)
    model = family_model(late, run_schedule("dualpipe", late), combinatorial_bound(late))
    assert grid_cap(model, 590, 0.01) == 595  # floor(590 / 0.99) = 595
    assert grid_cap(model, 600, 0.01) == 606
