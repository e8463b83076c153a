"""The counting bound (docs/modelling.md §55): never above a proven optimum, feasible at
every valid schedule's makespan, sound on a coarse grid, reported by ``solve``."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import known_upper, make, model_optimum
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from cpsched.cli import app
from cpsched.instance import Instance
from cpsched.solver import count_bound as count_module
from cpsched.solver import facade, prelude
from cpsched.solver.count_bound import (
    CREEP_SLOWER,
    _integer_slots,
    _least_slots,
    applies,
    choose_grid,
    count_bound,
    device_lp,
)
from cpsched.validate import validate


def _bound(inst: Instance, upper: int | None = None, **kw: object) -> tuple[int, int]:
    """The combinatorial bound and device 0's counting bound from it (ticks)."""
    lb, g, _, _, ordered = facade._bounds(inst)  # noqa: SLF001
    r = count_bound(inst, g, ordered, lb, known_upper(inst) if upper is None else upper, [0],
                    **kw)  # type: ignore[arg-type]
    return lb, r.bound


def test_applies_only_with_a_limit_and_without_pairs() -> None:
    assert applies(make(4, 2, 8, limit=3))
    assert not applies(make(4, 2, 8))
    assert not applies(make(2, 1, 4, limit=4, overlap=12.0))


def test_grid_is_the_gcd_or_the_coarser_grid_that_keeps_most() -> None:
    assert choose_grid([5, 10, 15], 500, 4) == 5
    assert choose_grid([0, 1000, 650], 1000, 2, most=20) == 108  # least that fits: 100
    g = choose_grid([1000, 1000, 650], 1_630_000, 12)
    assert 12 * (1_630_000 // g + 1) <= 2 * 10_000 and g >= 1_630_000 * 12 // 10_000


def test_a_grid_that_loses_the_work_is_not_solved() -> None:
    """F = 1, B = 2 on a grid of several time units keeps too little of the device's work:
    no LP (it could only lose); the exact grid is solved."""
    inst = make(4, 2, 8, F=1, B=2, limit=3)
    lb, g, _, _, ordered = facade._bounds(inst)  # noqa: SLF001
    assert device_lp(inst, g, ordered, 0, 200, most=100) is None
    lp = device_lp(inst, g, ordered, 0, 200)
    assert lp is not None and lp.g == 1


def test_known_values() -> None:
    """p4 v2 m8 F2 B3 limit 3: combinatorial 164, counting 180, optimum 192 (the span bound's
    instance in tests/test_span_bound.py).  The limit-24 scale row's shape at m = 32: the
    combinatorial 1305 is not reachable by device 0 alone (§55: its integer counting model
    proves 1315; the LP gives 1310)."""
    inst = make(4, 2, 8, F=2, B=3, limit=3)
    assert _bound(inst) == (164, 180)
    row = make(16, 2, 32, F=5, B=10, limit=24)
    assert _bound(row, 1329) == (1305, 1310)


def test_feasible_at_every_known_schedule() -> None:
    """The LP is a relaxation: every valid schedule that fits, its makespan floored to the
    grid, leaves it feasible (loop, V, bidirectional; fused and split; with latency)."""
    cases = [make(4, 2, 8, F=2, B=3, limit=3),
             make(4, 2, 8, F=1, B=None, I=1, W=0.5, placement="v", latency=0.1,
                  activation=0.5, limit=1.5),
             make(4, 1, 8, F=1, B=2, placement="bidirectional", limit=4)]
    for inst in cases:
        _, g, _, _, ordered = facade._bounds(inst)  # noqa: SLF001
        checked = 0
        for sched in facade._known(inst, None, time.perf_counter(), 1).values():  # noqa: SLF001
            if validate(sched):
                continue
            span = inst.ticks(sched.makespan)
            lp = device_lp(inst, g, ordered, 0, span, most=300, min_kept=0.0)
            assert lp is not None and lp.feasible(span // lp.g, None) is True
            checked += 1
        assert checked


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(p=st.integers(2, 3), v=st.integers(1, 2), m=st.integers(2, 5),
       placement=st.sampled_from(["loop", "v", "bidirectional"]), split=st.booleans(),
       extra=st.sampled_from([0.0, 0.5, 1.0]), latency=st.sampled_from([0.0, 0.1]),
       most=st.sampled_from([10_000, 60]), freed=st.sampled_from([0.0, 0.5]))
def test_never_above_the_optimum(p: int, v: int, m: int, placement: str, split: bool,
                                 extra: float, latency: float, most: int, freed: float) -> None:
    """On small memory-capped instances the counting bound — on the exact grid, or on a
    coarse one (``most`` = 60 variables); with split backward half of the activation freed by
    ``I`` or none — never exceeds the full model's proven optimum."""
    if placement == "v":
        v = 2
    if placement == "bidirectional":
        p, v, m = 2, 1, 2 * m
    inst = make(p, v, m, F=1.0, B=None if split else 2.0, I=1.0 if split else None,
                W=0.5 if split else None, placement=placement, latency=latency,
                activation=0.5, released_by_input=freed if split else 0.0,
                limit=0.5 * v + extra, name="prop")
    upper = known_upper(inst)
    opt = model_optimum(inst, upper)
    if opt is None:
        return
    lb, g, _, _, ordered = facade._bounds(inst)  # noqa: SLF001
    lp = device_lp(inst, g, ordered, 0, upper, most=most, min_kept=0.0)
    assert lp is not None
    least, _, done = _least_slots(lp, lb // lp.g, upper // lp.g, lambda: None, lambda: False)
    assert done and least * lp.g <= opt
    # the integer program (§56): between the LP's bound and the optimum
    whole, _, done = _integer_slots(lp, least, upper // lp.g, lambda: None, lambda: False, 0.0)
    assert done and least <= whole and whole * lp.g <= opt


def test_integer_program_known_value() -> None:
    """The limit-24 row's shape at m = 32: the LP stops at 1310, the integer counts prove
    1315 (docs/modelling.md §55, §56), as the device's integer model of session 51 did."""
    inst = make(16, 2, 32, F=5, B=10, limit=24)
    lb, g, _, _, ordered = facade._bounds(inst)  # noqa: SLF001
    r = count_bound(inst, g, ordered, lb, 1329, [0], integer=True)
    assert (r.lp_bound, r.bound, r.complete) == (1310, 1315, True) and r.programs >= 2


def test_integer_program_writes_nothing(capfd: pytest.CaptureFixture[str]) -> None:
    """HiGHS prints a banner on the process's stdout at every solve unless its output is
    switched off: the integer program must leave a CLI's output (and a JSON stream) alone."""
    inst = make(16, 2, 32, F=5, B=10, limit=24)
    lb, g, _, _, ordered = facade._bounds(inst)  # noqa: SLF001
    capfd.readouterr()
    r = count_bound(inst, g, ordered, lb, 1329, [0], integer=True)
    out, err = capfd.readouterr()
    assert r.programs >= 1 and (out, err) == ("", "")


def test_integer_program_skipped_when_too_large_or_too_slow(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """Not run with less than INTEGER_COST_FACTOR LPs' time left, above
    MAX_INTEGER_VARIABLES counts, nor without HiGHS: the LP's bound stands, nothing solved."""
    inst = make(4, 2, 8, F=2, B=3, limit=3)
    lb, g, _, _, ordered = facade._bounds(inst)  # noqa: SLF001
    lp = device_lp(inst, g, ordered, 0, 200)
    assert lp is not None
    assert _integer_slots(lp, 30, 40, lambda: 5.0, lambda: False, 1.0) == (30, 0, True)
    monkeypatch.setattr(count_module, "MAX_INTEGER_VARIABLES", 10)
    assert _integer_slots(lp, 30, 40, lambda: None, lambda: False, 0.0) == (30, 0, True)
    monkeypatch.undo()
    create = count_module.pywraplp.Solver.CreateSolver  # an OR-Tools build without HiGHS
    monkeypatch.setattr(count_module.pywraplp.Solver, "CreateSolver",
                        lambda name: None if name == "HIGHS" else create(name))
    assert _integer_slots(lp, 30, 40, lambda: None, lambda: False, 0.0) == (30, 0, True)


def test_prelude_step_and_cli_report_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                        ) -> None:
    """``solve``'s step before the search (no deadline: deterministic) gives the bound and
    its stats; the CLI prints the line when it gains (0.1-0.2 s of LPs in the step's 12 %
    of a 10 s limit; the integer program kept out, so the line does not depend on how fast
    this machine decides it)."""
    monkeypatch.setattr(count_module, "INTEGER_COST_FACTOR", 10**9)
    inst = make(16, 2, 32, F=5, B=10, limit=24)
    lb, g, _, _, ordered = facade._bounds(inst)  # noqa: SLF001
    stop = SimpleNamespace(requested=False)
    bound, stats = prelude.count(inst, g, ordered, lb, 1329, None, stop)
    assert (lb, bound) == (1305, 1310)
    assert stats == {"bound": 1310, "before": 1305, "device": 0, "grid": 5,
                     "lps": stats["lps"], "programs": 0, "complete": True,
                     "seconds": stats["seconds"]}
    assert prelude.count(inst, g, ordered, 1310, 1310, None, stop) == (1310, None)
    stop.requested = True
    assert prelude.count(inst, g, ordered, lb, 1329, None, stop) == (lb, None)
    r = CliRunner().invoke(app, [
        "solve", "-p", "16", "-v", "2", "-m", "32", "--forward", "5", "--backward", "10",
        "--memory-limit", "24", "--out", str(tmp_path), "-w", "1", "--no-plot",
        "--method", "search", "-t", "10"])
    assert r.exit_code == 0, r.output
    line = next(x for x in r.output.splitlines() if x.startswith("counting bound:"))
    assert line.startswith("counting bound: 1305 -> 1310 in ")
    assert "(device 0's counts on a grid of 5," in line


def test_time_limit_and_stop_keep_a_sound_bound() -> None:
    """Out of time or stopped before any LP: the lower bound it was given, and not complete."""
    inst = make(4, 2, 8, F=2, B=3, limit=3)
    lb, g, _, _, ordered = facade._bounds(inst)  # noqa: SLF001
    r = count_bound(inst, g, ordered, lb, known_upper(inst), [0], stopped=lambda: True)
    assert r.bound == lb and not r.complete and r.lps == 0
    r = count_bound(inst, g, ordered, lb, known_upper(inst), [0], time_limit=0.0)
    assert r.bound == lb and not r.complete


class _Stub:
    """A program feasible from ``least`` slots on that ends abnormally at ``odd`` and runs
    out of time at ``slow`` (no verdict either way)."""

    def __init__(self, least: int, odd: set[int], slow: set[int]) -> None:
        self.least, self.odd, self.slow, self.abnormal = least, odd, slow, False
        self.asked: list[int] = []

    def feasible(self, makespan: int, seconds: float | None) -> bool | None:
        self.asked.append(makespan)
        self.abnormal = makespan in self.odd
        if makespan in self.odd or makespan in self.slow:
            return None
        return makespan >= self.least


def test_search_steps_past_an_abnormal_end_and_stops_at_a_time_out() -> None:
    """An abnormal end proves nothing: the search goes on above it and only infeasible
    verdicts raise the bound (the result is then not complete); a time-out ends the search
    with what was proven."""
    stub = _Stub(10, odd={0}, slow=set())
    assert _least_slots(stub, 0, 20, lambda: None, lambda: False) == (10, 7, False)  # type: ignore[arg-type]
    assert stub.asked[:3] == [0, 2, 6]
    stub = _Stub(10, odd=set(), slow={6})
    assert _least_slots(stub, 0, 20, lambda: 5.0, lambda: False) == (3, 3, False)  # type: ignore[arg-type]
    stub = _Stub(10, odd=set(), slow=set())
    assert _least_slots(stub, 0, 20, lambda: None, lambda: False)[::2] == (10, True)  # type: ignore[arg-type]


def test_integer_stage_goes_one_slot_at_a_time_once_verdicts_slow_down() -> None:
    """With ``creep`` the steps stop growing once an infeasible verdict takes more than
    CREEP_SLOWER times the one before (a program near its threshold, where a feasible verdict
    above it would cost as much and prove nothing); the result is the same least makespan."""
    clock = [0.0]

    class Timed(_Stub):
        def feasible(self, makespan: int, seconds: float | None) -> bool | None:
            clock[0] += 1.0 if makespan < 6 else 5.0  # slower near the threshold 10
            return super().feasible(makespan, seconds)

    creeping = Timed(10, odd=set(), slow=set())
    got = _least_slots(creeping, 0, 20, lambda: None, lambda: False, creep=True,  # type: ignore[arg-type]
                       clock=lambda: clock[0])
    assert got == (10, 7, True)
    assert creeping.asked == [0, 2, 6, 7, 8, 9, 10]  # never above the threshold
    striding = Timed(10, odd=set(), slow=set())
    assert _least_slots(striding, 0, 20, lambda: None, lambda: False,  # type: ignore[arg-type]
                        clock=lambda: clock[0])[::2] == (10, True)
    assert striding.asked[:4] == [0, 2, 6, 14]  # the LP's doubling steps past it
    assert CREEP_SLOWER > 1
