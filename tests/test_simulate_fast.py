"""The simulator's fast path (cpsched.simulate.plain_run, rows by C-level maps, rows kept in
the order they are built) against the engine path: the same schedules, the same errors."""

from __future__ import annotations

import importlib
import random
from collections.abc import Iterator

import pytest
from conftest import make

from cpsched.actions import Action, Kind, Overlap, TimedAction
from cpsched.engine import run_orders
from cpsched.instance import Instance
from cpsched.model import B, F, I, Schedule, W
from cpsched.schedules import REGISTRY

#: the module (the attribute ``cpsched.simulate`` is the function)
sim = importlib.import_module("cpsched.simulate")

INSTANCES = [
    make(4, 1, 8),
    make(4, 1, 8, latency=1),
    make(4, 2, 8, F=[1, 2, 1, 3, 1, 2, 1, 3], latency=0.5),
    make(3, 1, 6, F=1, I=2, W=1, latency=0.5),
    make(2, 2, 4, F=1, I=1, W=1, placement="v"),
    make(4, 2, 8, F=1.25, B=2.5, latency=0.125),               # time scale 1000
    make(4, 1, 8, F=1, I=1, W=0),                              # zero-length W: rows sorted
    make(4, 2, 8, F=1, I=1, W=1, limit=6, released_by_input=0.5),
    make(4, 1, 8, F=2, I=1, W=1, placement="bidirectional", overlap=3),
    make(8, 2, 32, F=1.5, I=1, W=1, placement="v", latency=0.25),
]


def _plain(orders: list) -> list:
    """Orders without overlapped pairs: each pair run as its two actions, F first."""
    return [[a for st in steps for a in (st if isinstance(st, Overlap) else (st,))]
            for steps in orders]


def _cases() -> Iterator[tuple[str, Instance, list]]:
    for inst in INSTANCES:
        for name, spec in REGISTRY.items():
            if spec.expensive or spec.check(inst) is not None:
                continue
            orders = spec.generate(inst)
            yield f"{name}-{inst.p}-{inst.m}-{inst.placement}", inst, orders
            if any(isinstance(st, Overlap) for steps in orders for st in steps):
                yield f"{name}-{inst.p}-{inst.m}-{inst.placement}-plain", inst, _plain(orders)


CASES = list(_cases())


def _outcome(inst: Instance, orders: list) -> tuple:
    try:
        s = sim.simulate(inst, orders, method="m")
    except Exception as exc:  # noqa: BLE001 - the error itself is compared
        return ("raise", type(exc).__name__, str(exc))
    return (s.actions, s.makespan, s.to_dict())


def _both(monkeypatch: pytest.MonkeyPatch, inst: Instance, orders: list) -> tuple[tuple, tuple]:
    """The outcome with the fast path for any size, and with the engine only."""
    monkeypatch.setattr(sim, "FAST_MIN_STEPS", 0)
    fast = _outcome(inst, orders)
    monkeypatch.setattr(sim, "FAST_MIN_STEPS", 1 << 60)
    return fast, _outcome(inst, orders)


@pytest.mark.parametrize(("name", "inst", "orders"), CASES, ids=[c[0] for c in CASES])
def test_fast_path_matches_the_engine(monkeypatch: pytest.MonkeyPatch, name: str,
                                      inst: Instance, orders: list) -> None:
    fast, engine = _both(monkeypatch, inst, orders)
    assert fast == engine
    cols = sim.plain_columns(orders)
    if cols is None:  # pairs: the engine's path only
        return
    run, ref = sim.plain_run(inst, orders, cols), run_orders(inst, orders)
    assert run is not None or ref.stuck, name
    if run is not None:
        assert (run.starts, run.ends, run.pair_ids, run.stuck, run.suspect) == (
            ref.starts, ref.ends, ref.pair_ids, ref.stuck, ref.suspect)


def _fused(inst: Instance, orders: list, rng: random.Random) -> list:
    """Split-backward orders where some (stage, microbatch) run one fused B in place of I
    (their W dropped)."""
    picked = {(a.stage, a.microbatch) for steps in orders for a in steps
              if type(a) is Action and a.kind == Kind.I and rng.random() < 0.3}
    return [[B(a.stage, a.microbatch) if a.kind == Kind.I and (a.stage, a.microbatch) in picked
             else a for a in steps
             if not (a.kind == Kind.W and (a.stage, a.microbatch) in picked)]
            for steps in orders]


@pytest.mark.parametrize("name", ["zb-h1", "zb-h2", "zbv", "1f1b"])
def test_fused_backward_matches_the_engine(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    rng = random.Random(3)
    inst = (make(4, 2, 8, F=1, I=1, W=1, placement="v", latency=0.5) if name == "zbv"
            else make(4, 1, 8, F=1, I=2, W=1, latency=0.5))
    orders = _fused(inst, REGISTRY[name].generate(inst), rng)
    assert any(a.kind == Kind.B for steps in orders for a in steps)
    fast, engine = _both(monkeypatch, inst, orders)
    assert fast == engine and fast[0] != "raise"


def _broken(orders: list, rng: random.Random) -> list:
    """One random mistake: a step dropped, doubled, moved, swapped, or given another kind,
    stage or microbatch, or a rank dropped."""
    o = [list(x) for x in orders]
    d = rng.randrange(len(o))
    k = rng.randrange(len(o[d]))
    a = o[d][k]
    op = rng.randrange(8)
    if op == 0:
        del o[d][k]
    elif op == 1:
        o[d].insert(rng.randrange(len(o[d]) + 1), a)
    elif op == 2:
        j = rng.randrange(len(o[d]))
        o[d][k], o[d][j] = o[d][j], o[d][k]
    elif op == 3:
        e = (d + 1) % len(o)
        o[e].insert(rng.randrange(len(o[e]) + 1), o[d].pop(k))
    elif op == 4:
        o[d][k] = Action(rng.choice(list(Kind)), a.stage, a.microbatch)
    elif op == 5:
        o[d][k] = Action(a.kind, a.stage + rng.choice([-100, 100, 1]), a.microbatch)
    elif op == 6:
        o[d][k] = Action(a.kind, a.stage, a.microbatch + rng.choice([-1000, 1000, 1]))
    else:
        o.pop(rng.randrange(len(o)))
    return o


@pytest.mark.parametrize("inst", [make(4, 1, 8), make(4, 2, 8, F=1, I=1, W=1, latency=1),
                                  make(2, 2, 4, F=1, I=1, W=1, placement="v")],
                         ids=["1f1b", "split", "v"])
def test_broken_orders_raise_the_same_errors(monkeypatch: pytest.MonkeyPatch,
                                             inst: Instance) -> None:
    rng = random.Random(11)
    names = [n for n, s in REGISTRY.items() if not s.expensive and s.check(inst) is None]
    for _ in range(150):
        orders = _broken(_plain(REGISTRY[rng.choice(names)].generate(inst)), rng)
        fast, engine = _both(monkeypatch, inst, orders)
        assert fast == engine, orders


def test_fast_path_declines_what_it_cannot_vouch_for() -> None:
    inst = make(2, 1, 2, F=1, B=1)
    good = [[F(0, 0), F(0, 1), B(0, 0), B(0, 1)], [F(1, 0), B(1, 0), F(1, 1), B(1, 1)]]
    run = sim.plain_run(inst, good, sim.plain_columns(good))
    assert run is not None and run.ends == [[1, 2, 4, 6], [2, 3, 4, 5]]
    deadlock = [[F(0, 0), B(0, 0), F(0, 1), B(0, 1)], [F(1, 1), F(1, 0), B(1, 0), B(1, 1)]]
    for orders in (deadlock, [*good, []], good[:1], [good[0], good[1][:-1]],
                   [good[0], [*good[1], B(1, 1)]]):
        assert sim.plain_run(inst, orders, sim.plain_columns(orders)) is None
    assert sim.plain_columns([[F(0, 0)], [Overlap(F(1, 0), B(1, 0))]]) is None
    assert sim.plain_columns([[("F", 0, 0)]]) is None  # not an Action: the engine decides
    weird = [[Action("F", 0, 0), Action(Kind.F, 0, 1), B(0, 0), B(0, 1)], good[1]]
    assert sim.plain_run(inst, weird, sim.plain_columns(weird)).ends == run.ends
    for stage in (0.0, "0", 2**70, -1, 2):  # not int64, or out of range: the engine decides
        bad = [[Action(Kind.F, stage, 0), *good[0][1:]], good[1]]
        assert sim.plain_run(inst, bad, sim.plain_columns(bad)) is None


def test_rows_in_schedule_order() -> None:
    """Positive durations: the rows come out in the schedule's row order, kept as built;
    a zero duration anywhere: sorted as any schedule."""
    inst = make(4, 1, 8, F=2, I=1, W=1, placement="bidirectional", overlap=3)
    assert sim.in_row_order(inst)
    sch = sim.simulate(inst, REGISTRY["dualpipe"].generate(inst))
    assert sch.actions == Schedule(inst, list(sch.actions), method="x").actions
    assert any(a.overlap is not None for a in sch.actions)
    assert not sim.in_row_order(make(4, 1, 8, F=1, I=1, W=0))
    assert not sim.in_row_order(make(4, 1, 8, F=0, B=1))


def test_presorted_schedule_keeps_its_rows() -> None:
    inst = make(1, 1, 1, F=1, B=1)
    rows = [TimedAction(0, 0, 0, Kind.B, 1, 2), TimedAction(0, 0, 0, Kind.F, 0, 1)]
    assert Schedule(inst, rows, method="x").actions == rows[::-1]
    kept = Schedule(inst, rows, method="x", presorted=True)
    assert kept.actions is rows and kept.makespan == 2
    assert Schedule(inst, [], method="x").makespan == 0.0
    with pytest.raises(TypeError):
        Schedule(inst, rows, "x", "HEURISTIC", None, 0.0, {}, True)  # type: ignore[misc]


def test_split_rows_and_units() -> None:
    """Rows of split-backward orders in a fractional time scale, via the fast path."""
    inst = make(2, 1, 2, F=0.5, I=0.25, W=0.125)
    orders = [[F(0, 0), F(0, 1), I(0, 0), W(0, 0), I(0, 1), W(0, 1)],
              [F(1, 0), I(1, 0), F(1, 1), I(1, 1), W(1, 0), W(1, 1)]]
    run = sim.plain_run(inst, orders, sim.plain_columns(orders))
    assert run is not None
    rows = sim.timed_rows(inst, orders, run, sim.plain_columns(orders))
    assert rows == sim.timed_rows(inst, orders, run)
    assert rows[0] == TimedAction(0, 0, 0, Kind.F, 0, 0.5, None)
    assert all(type(r) is TimedAction for r in rows)


def test_large_orders_take_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    inst = make(4, 1, 512, latency=1)
    orders = REGISTRY["1f1b"].generate(inst)
    assert sum(map(len, orders)) >= sim.FAST_MIN_STEPS
    runs: list = []
    real = sim.plain_run
    monkeypatch.setattr(sim, "plain_run", lambda *a: runs.append(real(*a)) or runs[-1])
    fast = sim.simulate(inst, orders)
    assert len(runs) == 1 and runs[0] is not None
    monkeypatch.setattr(sim, "FAST_MIN_STEPS", 1 << 60)
    assert sim.simulate(inst, orders) == fast and len(runs) == 1
