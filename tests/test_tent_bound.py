"""The tent bound (docs/modelling.md §24): never above a proven optimum, above the
combinatorial bound where memory sets the pace, and only where it applies."""

from __future__ import annotations

import json
from pathlib import Path
from unittest.mock import patch

import pytest
from conftest import make, overlap_in_range
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import cpsched.tent_bound as tent_module
from cpsched.cli import app
from cpsched.instance import Instance
from cpsched.model import Status
from cpsched.solver import facade
from cpsched.tent_bound import applies, tent_bound


def _instance(p: int, v: int, m: int, *, placement: str = "loop", split: bool = True,
              F: object = 1.0, I: object = 1.0, W: object = 0.65,  # noqa: N803, E741
              latency: float = 0.0, activation: object = 0.25, limit: float | None = 1.0,
              released_by_input: float = 0.0, overlap: float | None = None) -> Instance:
    """:func:`conftest.make` with split backward by default (``I`` is the fused ``B``
    without it)."""
    return make(p, v, m, F=F, B=None if split else I, I=I if split else None,  # type: ignore[arg-type]
                W=W if split else None, placement=placement, limit=limit,  # type: ignore[arg-type]
                latency=latency, activation=activation, released_by_input=released_by_input,
                overlap=overlap, name="tent")


def _profiled(p: int, v: int, m: int, limit: float) -> Instance:
    """The scale set's profiled costs (F = I = 1, W = 0.65; the last stage F = 1.4,
    W = 1.105; p2p 0.016), activation 0.25 per stage."""
    S = p * v
    return _instance(p, v, m, F=[1.0] * (S - 1) + [1.4], W=[0.65] * (S - 1) + [1.105],
                     latency=0.016, limit=limit)


def test_applies() -> None:
    assert applies(_instance(2, 2, 4))
    assert applies(_instance(2, 2, 4, placement="v"))
    assert not applies(_instance(2, 2, 4, limit=None))
    assert applies(_instance(2, 1, 4, placement="bidirectional"))
    assert applies(_instance(2, 1, 4, overlap=2.0))
    inst = _instance(2, 1, 4, limit=None)
    lb, g, ht, _, _ = facade._bounds(inst)  # noqa: SLF001
    assert tent_bound(inst, g, ht, lb, lb + 100).bound == lb


@pytest.mark.parametrize(("shape", "upper", "combinatorial", "fine", "tent"), [
    # p = 4, v = 4, m = 8, limit 1 (a quarter of 1F1B's memory): the optimum 192.57 is
    # proven (docs/modelling.md §21, 430 s); the one-device relaxation gives 182.896; the
    # combinatorial bound is the critical path with the implied orders (§30; 172.561 without)
    ((4, 4, 8, 1), 192.57, 178.346, 182.581, 182.756),
    # p = 8, v = 4, m = 16, limit 2: best known 383.794, one-device relaxation 339.199
    ((8, 4, 16, 2), 383.794, 338.318, 356.184, 357.096),
])
def test_starved_loop_instances(shape: tuple[int, int, int, float], upper: float,
                                combinatorial: float, fine: float, tent: float) -> None:
    """``fine``: the fine pass alone; ``tent``: with the other grids (``EXTRA_GRIDS``)."""
    inst = _profiled(*shape)
    lb, g, ht, _, _ = facade._bounds(inst)  # noqa: SLF001
    assert inst.from_ticks(lb) == pytest.approx(combinatorial)
    with patch.object(tent_module, "EXTRA_GRIDS", ()):
        alone = tent_bound(inst, g, ht, lb, inst.ticks(upper))
    r = tent_bound(inst, g, ht, lb, inst.ticks(upper))
    assert alone.complete and r.complete and r.devices[0] == 0
    # the LPs are deterministic
    assert inst.from_ticks(alone.bound) == pytest.approx(fine)
    assert inst.from_ticks(r.bound) == pytest.approx(tent)
    assert r.cell != alone.cell  # another grid gave it


def test_the_other_grids_only_after_a_gain() -> None:
    # p = 4, v = 2, m = 8 at limit 2: neither the coarse nor the fine pass lifts the
    # combinatorial bound, so the other grids are not run (two bisections, not six); on the
    # starved instance above they run after the fine pass's gain (docs/modelling.md §45)
    calls: list[int] = []
    bisect = tent_module._bisect

    def counted(*args, **kw):  # noqa: ANN002, ANN003, ANN202
        calls.append(1)
        return bisect(*args, **kw)

    inst = _profiled(4, 2, 8, 2)
    lb, g, ht, _, _ = facade._bounds(inst)  # noqa: SLF001
    with patch.object(tent_module, "_bisect", counted):
        r = tent_bound(inst, g, ht, lb, round(lb * 1.2))
    assert r.bound == lb and r.complete and len(calls) == 2
    calls.clear()
    inst = _profiled(4, 4, 8, 1)
    lb, g, ht, _, _ = facade._bounds(inst)  # noqa: SLF001
    with patch.object(tent_module, "_bisect", counted):
        r = tent_bound(inst, g, ht, lb, inst.ticks(192.57))
    assert r.bound > lb and len(calls) == 2 + len(tent_module.EXTRA_GRIDS)


def test_bidirectional_with_two_families() -> None:
    # p = 4, m = 16, F = 1, B = 2, limit 2 (DualPipe holds 5): CP-SAT proves 75 (4.9 s); the
    # combinatorial bound is 64, the tents of both directions give 69; nine devices at most
    inst = _instance(4, 1, 16, placement="bidirectional", split=False, F=1.0, I=2.0,
                     activation=1.0, limit=2.0)
    lb, g, ht, _, _ = facade._bounds(inst)  # noqa: SLF001
    assert inst.from_ticks(lb) == 64
    r = tent_bound(inst, g, ht, lb, inst.ticks(75))
    assert r.complete and r.devices == (0, 1, 2, 3)
    assert inst.from_ticks(r.bound) == 69


def test_a_spent_budget_keeps_the_bound_it_started_from() -> None:
    inst = _profiled(4, 4, 8, 1)
    lb, g, ht, _, _ = facade._bounds(inst)  # noqa: SLF001
    r = tent_bound(inst, g, ht, lb, inst.ticks(192.57), stopped=lambda: True)
    assert r.bound == lb and not r.complete


@st.composite
def small_instances(draw: st.DrawFn) -> Instance:
    p = draw(st.integers(2, 3))
    v = draw(st.integers(1, 2))
    S = p * v
    def per(*xs: float) -> st.SearchStrategy[list[float]]:
        return st.lists(st.sampled_from(xs), min_size=S, max_size=S)

    split = draw(st.booleans())
    inst = _instance(  # a zero-length forward too: anchors that take no time
        p, v, draw(st.integers(2, 4)),
        placement=draw(st.sampled_from(["loop", "v"] if v == 2 else ["loop"])),
        split=split, F=draw(per(1, 2, 0.5, 0)), I=draw(per(1, 2, 0.5)),
        W=draw(per(1, 0.5, 0)) if split else 0.65,
        latency=draw(st.sampled_from([0.0, 0.5])),
        activation=draw(st.lists(st.sampled_from([0.5, 1.0]), min_size=S, max_size=S)),
        released_by_input=draw(st.sampled_from([0.0, 0.5])) if split else 0.0, limit=None)
    low = inst.min_memory_limit()
    limit = draw(st.sampled_from([low, low + 0.5, 1.5 * low]))
    return Instance.from_dict(inst.to_dict() | {
        "memory": inst.to_dict()["memory"] | {"limit": limit}})


@st.composite
def small_paired_instances(draw: st.DrawFn) -> Instance:
    """Small instances with the other shapes: ``bidirectional`` placement (two families of
    anchors) and overlapped F&B pairs (pair-relaxed chains), each with or without the
    other."""
    bidi = draw(st.booleans())
    p = draw(st.sampled_from([2, 4]) if bidi else st.integers(2, 3))  # bidirectional: p even
    v = 1 if bidi else draw(st.integers(1, 2))
    S = p * v
    def per(*xs: float) -> st.SearchStrategy[list[float]]:
        return st.lists(st.sampled_from(xs), min_size=S, max_size=S)

    split = draw(st.booleans())
    F, I = draw(per(1, 2)), draw(per(1, 2))  # noqa: N806, E741
    W = draw(per(1, 0.5)) if split else 0.65  # noqa: N806
    full = [i + (w if split else 0) for i, w in zip(I, W if split else [0] * S, strict=True)]
    overlap = (None if bidi and draw(st.booleans())
               else [max(f, b) + draw(st.sampled_from([0.0, 0.5])) * min(f, b)
                     for f, b in zip(F, full, strict=True)])
    inst = overlap_in_range(lambda: _instance(
        p, v, draw(st.sampled_from([2, 4])),
        placement="bidirectional" if bidi else draw(st.sampled_from(
            ["loop", "v"] if v == 2 else ["loop"])),
        split=split, F=F, I=I, W=W, latency=draw(st.sampled_from([0.0, 0.5])),
        activation=draw(st.lists(st.sampled_from([0.5, 1.0]), min_size=S, max_size=S)),
        released_by_input=draw(st.sampled_from([0.0, 0.5])) if split else 0.0, limit=None,
        overlap=overlap))  # type: ignore[arg-type]
    low = inst.min_memory_limit()
    limit = draw(st.sampled_from([low, low + 0.5, 1.5 * low]))
    return Instance.from_dict(inst.to_dict() | {
        "memory": inst.to_dict()["memory"] | {"limit": limit}})


def _check_against_the_optimum(inst: Instance, cells: int) -> None:
    """CP-SAT proves the optimum without the tent bound (one worker, deterministic limit);
    the tent bound, with a loose upper end so that nothing caps it, is never above it."""
    with patch.object(facade, "tent", lambda inst, g, ht, lb, *args: (lb, None)):
        res = facade.solve(inst, time_limit=None, workers=1,
                           parameters={"max_deterministic_time": 10.0})
    if res.status != Status.OPTIMAL:
        return
    opt = inst.ticks(res.makespan)
    lb, g, ht, _, _ = facade._bounds(inst)  # noqa: SLF001
    r = tent_bound(inst, g, ht, 0, 3 * opt + 10, max_cells=cells)
    assert r.bound <= opt, (r, opt)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_instances(), st.sampled_from([3, 800]))
def test_never_above_a_proven_optimum(inst: Instance, cells: int) -> None:
    """Loop and V placement, no pairs: with one-tick cells and with cells so wide that the
    intersections of the tents matter."""
    _check_against_the_optimum(inst, cells)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_paired_instances(), st.sampled_from([3, 800]))
def test_never_above_a_proven_optimum_bidirectional_or_paired(inst: Instance,
                                                              cells: int) -> None:
    """Bidirectional placement and overlapped pairs: the same check."""
    _check_against_the_optimum(inst, cells)


def test_solve_reports_it(tmp_path: Path) -> None:
    # `cpsched solve` runs the tent bound after the warm start and says what it gained; the
    # written schedule's bound is at least the tent bound (deterministic LPs; one worker and
    # a deterministic search limit, so the line does not depend on the machine)
    inst = _profiled(4, 4, 8, 1)
    path = tmp_path / "starved.toml"
    path.write_text(inst.to_toml(), encoding="utf-8")
    r = CliRunner().invoke(app, ["solve", str(path), "-w", "1", "--no-plot", "-o",
                                 str(tmp_path), "--param", "max_deterministic_time=2"])
    assert r.exit_code == 0, r.output
    line = next(x for x in r.output.splitlines() if x.startswith("tent bound:"))
    assert line.startswith("tent bound: 178.346 -> ")  # the combinatorial bound (§30)
    tent = float(line.split(" -> ")[1].split()[0])
    assert 182 < tent <= 192.57  # the proven optimum
    data = json.loads((tmp_path / "tent.json").read_text())
    assert tent <= data["lower_bound"] <= data["makespan"]
