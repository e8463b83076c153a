"""The window search (cpsched/solver/lns.py, docs/modelling.md §22): it only ever returns a
valid schedule, never longer than the one it started from, reproducibly without a deadline,
reaches proven optima from poor starts on small instances, and is what ``solve`` uses on large
models."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import networkx as nx
import pytest
from conftest import make
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from ortools.sat.python import cp_model
from test_solver_overlap import overlap_instances

import cpsched.solver.facade as facade
import cpsched.solver.lns as lns
import cpsched.solver.prelude as prelude
from cpsched import solve
from cpsched.bounds import pair_fill_drain_bound
from cpsched.graph import build_task_graph
from cpsched.instance import Instance
from cpsched.model import Schedule
from cpsched.schedules import run_all
from cpsched.schedules.registry import run_schedule
from cpsched.schedules.transforms import sequential_schedule
from cpsched.solver.lns_state import Incumbent, Problem, unit_orders
from cpsched.solver.lns_window import window_model
from cpsched.solver.overlap import pair_solution
from cpsched.solver.pipeline_model import solution_schedule, timed_schedule
from cpsched.solver.warm_start import best_warm_start
from cpsched.validate import validate


def _starts(inst: Instance, sch: Schedule) -> dict:
    return {a.action: inst.ticks(a.start) for a in sch.actions}


def _as_schedule(inst: Instance, starts: dict) -> Schedule:
    """The timed schedule of ``{action: start tick}``."""
    g = build_task_graph(inst)
    return timed_schedule(inst, nx.get_node_attributes(g, "device"),
                          nx.get_node_attributes(g, "duration"), starts, "cpsat")


def _improve(inst: Instance, start: Schedule, **kw: object) -> tuple[dict, lns.LnsStats]:
    return lns.improve(inst, build_task_graph(inst), _starts(inst, start), **kw)


def test_from_the_sequential_schedule_to_the_optimum() -> None:
    # p=4 m=8 F=5 B=10, no limit: the optimum is the 1F1B makespan (m + p - 1)(F + B) = 165
    inst = make(4, 1, 8)
    seq = sequential_schedule(inst)
    starts, stats = _improve(inst, seq, deterministic_time=20)
    out = _as_schedule(inst, starts)
    assert not validate(out)
    assert seq.makespan == 8 * 4 * 15  # one microbatch at a time
    assert out.makespan == stats.makespan == 165 and stats.improvements >= 1
    assert stats.first == inst.ticks(seq.makespan)  # where it began: the stats say so


def test_memory_limit_is_kept_and_result_reproducible(monkeypatch: pytest.MonkeyPatch) -> None:
    # p=4 v=2 m=16 F=5 B=10, limit 6 (3 microbatches' worth of both chunks), windows of
    # 30-100 actions out of 256
    monkeypatch.setattr(lns, "START_WINDOW", 60)
    monkeypatch.setattr(lns, "MIN_WINDOW", 30)
    monkeypatch.setattr(lns, "MAX_WINDOW", 100)
    inst = make(4, 2, 16, limit=6)
    seq = sequential_schedule(inst)
    a, sa = _improve(inst, seq, deterministic_time=2)
    b, sb = _improve(inst, seq, deterministic_time=2)
    assert a == b and sa.makespan == sb.makespan and sa.windows == sb.windows
    out = _as_schedule(inst, a)
    assert not validate(out)
    assert max(out.peak_memory) <= 6
    assert out.makespan < seq.makespan
    assert out.makespan >= facade.combinatorial_bound(inst)


_ACROSS_PROCESSES = """
import sys
sys.path.insert(0, sys.argv[1])
from conftest import make
from cpsched import solve
from cpsched.schedules.transforms import sequential_schedule
for inst in (make(4, 2, 16, limit=6), make(4, 2, 8, I=5, W=3, limit=5, latency=1),
             make(4, 1, 8, overlap=12, limit=6)):
    res = solve(inst, time_limit=None, workers=1, method="search",
                candidates={"sequential": sequential_schedule(inst)},
                parameters={"max_deterministic_time": 0.5})
    print(res.makespan, [(str(a.action), a.start) for a in res.schedule.actions])
"""


def test_reproducible_across_processes() -> None:
    # the window's actions come as a set, which iterates by string hashes: each process
    # has its own (PYTHONHASHSEED), and an unordered model once let CI's process find no
    # shorter schedule where every local one did
    out = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        run = subprocess.run([sys.executable, "-c", _ACROSS_PROCESSES, str(Path(__file__).parent)],
                             env=env, capture_output=True, text=True, timeout=300, check=True)
        out.append(run.stdout)
    assert out[0] == out[1] and len(out[0].splitlines()) == 3


def test_small_windows_on_a_larger_instance(monkeypatch: pytest.MonkeyPatch) -> None:
    # windows of ~40 actions out of 768: the before / window / after split is exercised
    monkeypatch.setattr(lns, "START_WINDOW", 40)
    monkeypatch.setattr(lns, "MIN_WINDOW", 20)
    monkeypatch.setattr(lns, "MAX_WINDOW", 60)
    inst = make(8, 2, 24, limit=8, latency=1)
    name, rows, horizon = best_warm_start(inst, run_all(inst))
    start = {a.action: inst.ticks(a.start) for a in rows}
    starts, stats = lns.improve(inst, build_task_graph(inst), start, deterministic_time=10)
    assert max(stats.sizes) <= 80 and stats.windows > 10
    out = _as_schedule(inst, starts)
    assert not validate(out)
    assert inst.ticks(out.makespan) == stats.makespan <= horizon


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(p=st.integers(2, 4), v=st.integers(1, 2), m=st.integers(2, 8),
       split=st.booleans(), w=st.sampled_from([0, 3]), latency=st.sampled_from([0, 1]),
       slack=st.integers(0, 3), window=st.sampled_from([6, 15, 400]))
def test_never_invalid_never_longer(p: int, v: int, m: int, split: bool, w: int,
                                    latency: int, slack: int, window: int) -> None:
    # zero-length W actions (w = 0) make start order ambiguous: the order graph must not be
    kw: dict = {"I": 4, "W": w} if split else {}
    # the smallest limit one microbatch fits in (all its chunks on a device), plus slack
    inst = make(p, v, m, latency=latency, limit=v + slack, **kw)
    seq = sequential_schedule(inst)
    orig = lns.START_WINDOW, lns.MIN_WINDOW
    lns.START_WINDOW, lns.MIN_WINDOW = window, min(window, 6)
    try:
        starts, stats = _improve(inst, seq, deterministic_time=2)
    finally:
        lns.START_WINDOW, lns.MIN_WINDOW = orig
    out = _as_schedule(inst, starts)
    assert not validate(out)
    assert out.makespan <= seq.makespan
    assert inst.ticks(out.makespan) >= facade.combinatorial_bound(inst)


@settings(max_examples=10, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(p=st.integers(2, 4), v=st.integers(1, 2), m=st.integers(4, 10),
       slack=st.integers(0, 2), size=st.sampled_from([8, 20, 60]),
       pairs=st.booleans())
def test_a_plateau_window_moves_nothing_later(p: int, v: int, m: int, slack: int, size: int,
                                              pairs: bool) -> None:
    # docs/modelling.md §17, plateau sweeps: a window whose boundary actions may not end
    # later never delays an action after it, nor the makespan; an accepted plateau move
    # starts some action earlier
    kw: dict = ({"F": 1, "I": 1, "W": 1, "placement": "bidirectional", "overlap": 2.5}
                if pairs else {})
    v = 1 if pairs else v  # bidirectional placement has one stage per device
    p = 2 * (p // 2) if pairs else p  # and an even number of devices
    inst = make(p, v, 2 * m if pairs else m, limit=v + 1 + slack, **kw)
    g = build_task_graph(inst)
    pb = Problem(inst, g, pairs=pairs)
    name, rows, _ = best_warm_start(inst, run_all(inst))
    if pairs:
        sol = pair_solution(inst, rows)
        orders = unit_orders(pb, sol.start, sol.end, sol.pairs)
    else:
        start = {a.action: inst.ticks(a.start) for a in rows}
        orders = unit_orders(pb, start, {a: t + pb.dur[a] for a, t in start.items()}, [])
    inc = Incumbent(pb, orders)
    for cursor in range(0, len(inc.by_start), max(1, size // 2)):
        window, before = lns._choose(inc, cursor, size)
        wm = window_model(pb, inc, window, before, plateau=True)
        if wm is None:
            continue
        solver = lns._window_solver(0, 1.0, None)
        code = solver.solve(wm.model)
        cand = lns._candidate(pb, inc, solver, code, wm, window, plateau=True)
        if cand is None:
            continue
        assert cand.makespan <= inc.makespan
        later = [a for a in inc.start if a not in window and a not in before
                 and cand.start[a] > inc.start[a]]
        assert later == []
        if sum(cand.end.values()) < sum(inc.end.values()):
            inc = cand  # go on from the move, as the search does
    out = _as_schedule(inst, dict(inc.start)) if not pairs else None
    assert out is None or not validate(out)


def test_the_cool_down_is_searched_first(monkeypatch: pytest.MonkeyPatch) -> None:
    # docs/modelling.md §17, the cool-down first: the first window is the end of the
    # schedule, of DRAIN_WINDOW actions (at most half of them), and the result is valid and
    # reproducible
    monkeypatch.setattr(lns, "DRAIN_WINDOW", 150)
    inst = make(8, 2, 24, limit=8, latency=1)
    name, rows, horizon = best_warm_start(inst, run_all(inst))
    start = {a.action: inst.ticks(a.start) for a in rows}
    g = build_task_graph(inst)
    a, sa = lns.improve(inst, g, start, deterministic_time=4)
    b, sb = lns.improve(inst, g, start, deterministic_time=4)
    assert a == b and sa.sizes == sb.sizes
    assert 150 <= sa.sizes[0] <= 165  # whole steps starting at the same tick may join it
    out = _as_schedule(inst, a)
    assert not validate(out)
    assert inst.ticks(out.makespan) == sa.makespan <= horizon


def test_the_cool_down_ends_after_a_small_gain(monkeypatch: pytest.MonkeyPatch) -> None:
    # docs/modelling.md §33: a cool-down window that shortens the schedule by less than
    # DRAIN_MIN_GAIN of its makespan ends the phase (the sweeps take over); larger gains
    # keep it going at the same window size
    inc = SimpleNamespace(makespan=10_000, by_start=[(0, 0, 0)] * 4000)
    gains = [200, 100, 10, 300]  # 2 %, 1 %, then 0.1 % < DRAIN_MIN_GAIN
    assert 10 < lns.DRAIN_MIN_GAIN * 9_700 < 100
    sizes: list[int] = []

    def window(self, window, before, deterministic_time, seconds, plateau=False):  # noqa: ANN001, ANN202
        sizes.append(len(window))
        self.inc.makespan -= gains[len(sizes) - 1]
        return cp_model.FEASIBLE, deterministic_time, 0.0

    monkeypatch.setattr(lns._Search, "window", window)
    monkeypatch.setattr(lns, "_choose", lambda inc, cursor, size: (set(range(size)), set()))
    run = lns._Search(SimpleNamespace(overlap=None), inc, None, 100.0, 0, 0, None, None, None)
    lns._drain_windows(run)
    assert sizes == [lns.DRAIN_WINDOW] * 3 and inc.makespan == 10_000 - 310


def test_two_workers_per_window_only_with_a_deadline() -> None:
    # with a deadline each window runs the workers it is given (valid, never longer); without
    # one always a single worker, so the search stays reproducible
    inst = make(4, 2, 16, limit=6)
    seq = sequential_schedule(inst)
    seen: list[int] = []
    starts, stats = _improve(inst, seq, deadline=time.perf_counter() + 5.0, workers=2,
                             on_solver=lambda s: seen.append(s.parameters.num_workers))
    out = _as_schedule(inst, starts)
    assert not validate(out) and out.makespan <= seq.makespan
    assert seen and set(seen) == {2}
    seen.clear()
    _improve(inst, seq, deterministic_time=2.0, workers=2,
             on_solver=lambda s: seen.append(s.parameters.num_workers))
    assert seen and set(seen) == {1}
    assert lns.window_workers(64) <= (os.cpu_count() or 1)
    assert lns.window_workers(1) == 1


def test_presolve_off_in_windows_without_pairs_on_with_pairs() -> None:
    # docs/modelling.md §44: pair-free windows run without CP-SAT's presolve, pair windows
    # with it; either way the result is valid and never longer
    inst = make(4, 2, 16, limit=6)
    seq = sequential_schedule(inst)
    seen: list[bool] = []
    starts, _ = _improve(inst, seq, deterministic_time=2.0,
                         on_solver=lambda s: seen.append(s.parameters.cp_model_presolve))
    assert seen and set(seen) == {lns.WINDOW_PRESOLVE} == {False}
    out = _as_schedule(inst, starts)
    assert not validate(out) and out.makespan < seq.makespan
    pinst = make(4, 1, 16, F=1, I=1, W=1, placement="bidirectional", overlap=2.5, limit=4)
    _, rows, _ = best_warm_start(pinst, {"seq": sequential_schedule(pinst)})
    start = pair_solution(pinst, rows)
    seen.clear()
    sol, _ = lns.improve_pairs(pinst, build_task_graph(pinst), start, deterministic_time=1.0,
                               on_solver=lambda s: seen.append(s.parameters.cp_model_presolve))
    assert seen and set(seen) == {lns.WINDOW_PRESOLVE_PAIRS} == {True}


def test_stops_at_once_when_asked_or_at_the_bound() -> None:
    inst = make(4, 1, 8)
    seq = sequential_schedule(inst)
    starts, stats = _improve(inst, seq, stop=lambda: True)
    assert stats.windows == 0 and starts == _starts(inst, seq)
    starts, stats = _improve(inst, seq, lower=inst.ticks(seq.makespan))
    assert stats.windows == 0


def test_with_an_overlap_cost_every_action_stays_alone() -> None:
    # DualPipe's shape (bidirectional, split, pair 2.5) under limit 4: from the sequential
    # schedule the search finds a shorter valid schedule, and it forms no pair
    inst = make(4, 1, 16, F=1, I=1, W=1, placement="bidirectional", overlap=2.5, limit=4)
    seq = sequential_schedule(inst)
    starts, stats = _improve(inst, seq, deterministic_time=5.0)
    sch = _as_schedule(inst, starts)
    assert validate(sch) == [] and all(a.overlap is None for a in sch.actions)
    assert inst.ticks(sch.makespan) == stats.makespan < inst.ticks(seq.makespan)


def test_solve_searches_a_pair_free_start_with_an_overlap_cost(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the same instance, where DualPipe (peak 5) is over the limit: the warm start is the
    # bidirectional list schedule (49; the modulo pattern gives 51), pair-free; the window
    # search runs on it, and the full model may add pairs
    inst = make(4, 1, 16, F=1, I=1, W=1, placement="bidirectional", overlap=2.5, limit=4)
    monkeypatch.setattr(lns, "MIN_ACTIONS_PAIRS", 10)
    monkeypatch.setattr(prelude, "MODULO_MIN_ACTIONS", 10)
    res = solve(inst, time_limit=None, workers=1, candidates=run_all(inst),
                parameters={"max_deterministic_time": 1.0})
    assert res.schedule is not None and validate(res.schedule) == []
    assert res.schedule.extra["warm_start"] == "list"
    ws = res.stats["window_search"]
    assert ws is not None and ws["windows"] >= 1 and res.makespan <= ws["makespan"] <= 49


def test_pair_windows_get_their_share_after_pair_free_windows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # from a pair-free start with a deadline, the pair-free windows stop at PAIR_FREE_SHARE
    # of the time and the pair windows run until the deadline: the result is valid and never
    # longer
    inst = make(4, 1, 16, F=1, I=1, W=1, placement="bidirectional", overlap=2.5, limit=4)
    g = build_task_graph(inst)
    seq = sequential_schedule(inst)
    _, rows, _ = best_warm_start(inst, {"seq": seq})
    sol = pair_solution(inst, rows)
    assert sol.pairs == []
    calls: list[tuple[bool, float]] = []
    search = lns.search

    def recorded(pb: Problem, orders: list, **kw: object) -> tuple:
        calls.append((pb.overlap is not None, kw["deadline"]))
        return search(pb, orders, **kw)

    monkeypatch.setattr(lns, "search", recorded)
    t0 = time.perf_counter()
    out, stats = lns.improve_overlap(inst, g, sol, deadline=t0 + 6.0)
    sch = solution_schedule(inst, nx.get_node_attributes(g, "device"),
                            nx.get_node_attributes(g, "duration"), out, "cpsat")
    assert validate(sch) == [] and sch.makespan <= seq.makespan
    assert [pairs for pairs, _ in calls] == [False, True]
    assert calls[0][1] <= t0 + lns.PAIR_FREE_SHARE * 6.0 + 0.1 and calls[1][1] == t0 + 6.0
    # over both parts the stats begin where the first began: the pair-free start
    assert stats.first == sol.makespan and inst.ticks(sch.makespan) <= stats.makespan


def _improve_pairs(inst: Instance, start: Schedule, **kw: object
                   ) -> tuple[Schedule, lns.LnsStats]:
    """:func:`lns.improve_pairs` from a valid schedule, back as a schedule."""
    g = build_task_graph(inst)
    _, rows, _ = best_warm_start(inst, {"start": start})
    sol, stats = lns.improve_pairs(inst, g, pair_solution(inst, rows), **kw)
    return solution_schedule(inst, nx.get_node_attributes(g, "device"),
                             nx.get_node_attributes(g, "duration"), sol, "cpsat"), stats


def test_pairs_are_formed_to_reach_the_optimum() -> None:
    # p=2 m=4 F=1 B=2, pair 2 (saves 1): the brute-force optimum 12 needs pairs; without
    # them the best is 1F1B's (m + p - 1)(F + B) = 15.  From the sequential schedule (24)
    inst = make(2, 1, 4, F=1, B=2, overlap=2)
    seq = sequential_schedule(inst)
    out, stats = _improve_pairs(inst, seq, deterministic_time=10.0)
    assert validate(out) == [] and seq.makespan == 24
    assert out.makespan == 12 == inst.from_ticks(stats.makespan)
    assert any(a.overlap is not None for a in out.actions)


def test_pairs_kept_and_changed_on_dualpipe() -> None:
    # DualPipe p6 m12 (bidirectional, split, F=I=W=1, pair 2.5) takes 36; the pair fill/drain
    # bound is 35.  The search keeps a valid schedule between the two, reproducibly
    inst = make(6, 1, 12, F=1, I=1, W=1, placement="bidirectional", overlap=2.5)
    dp = run_schedule("dualpipe", inst)
    a, sa = _improve_pairs(inst, dp, deterministic_time=0.5)
    b, sb = _improve_pairs(inst, dp, deterministic_time=0.5)
    assert dp.makespan == 36 and inst.from_ticks(pair_fill_drain_bound(inst)) == 35
    assert validate(a) == [] and 35 <= a.makespan <= 36
    assert sorted(a.actions) == sorted(b.actions) and sa.makespan == sb.makespan


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(overlap_instances())
def test_pair_search_never_invalid_never_longer(inst: Instance) -> None:
    # random overlap instances, with and without a memory limit, from the best known start
    valid = [s for s in run_all(inst).values() if not validate(s)]
    assume(valid)  # at the smallest limit no known schedule may fit
    start = min(valid, key=lambda s: s.makespan)
    out, stats = _improve_pairs(inst, start, deterministic_time=1.0)
    assert validate(out) == []
    assert out.makespan <= start.makespan and inst.ticks(out.makespan) == stats.makespan


def test_solve_uses_it_on_large_models(monkeypatch: pytest.MonkeyPatch) -> None:
    # p=4 v=2 m=16 limit 6 from the sequential warm start only; the search is switched on
    # for this small model by lowering its size threshold
    inst = make(4, 2, 16, limit=6)
    seq = sequential_schedule(inst)
    monkeypatch.setattr(lns, "MIN_ACTIONS_LIMITED", 10)  # a memory-capped model
    monkeypatch.setattr(lns, "START_WINDOW", 60)
    monkeypatch.setattr(prelude, "MODULO_MIN_ACTIONS_LIMITED", 10**9)  # keep the warm start
    res = solve(inst, time_limit=None, workers=1, candidates={"sequential": seq},
                parameters={"max_deterministic_time": 3})
    ws = res.stats["window_search"]
    assert ws is not None and ws["windows"] >= 1
    assert res.schedule is not None and not validate(res.schedule)
    assert res.makespan <= ws["makespan"] < seq.makespan
    assert res.schedule.extra["warm_start_makespan"] == seq.makespan
    monkeypatch.setattr(lns, "MIN_ACTIONS_LIMITED", 10**9)
    res = solve(inst, time_limit=None, workers=1, candidates={"sequential": seq},
                parameters={"max_deterministic_time": 0.5})
    assert res.stats["window_search"] is None


def test_no_model_when_too_little_time_is_left(monkeypatch: pytest.MonkeyPatch) -> None:
    # the model is not built when building it would overrun the time limit: the window
    # search's schedule comes back, validated, with the combinatorial bound, and says so
    inst = make(4, 2, 16, limit=6)
    seq = sequential_schedule(inst)
    monkeypatch.setattr(lns, "MIN_ACTIONS", 10)
    monkeypatch.setattr(lns, "MIN_ACTIONS_LIMITED", 10)
    monkeypatch.setattr(lns, "START_WINDOW", 60)
    monkeypatch.setattr(facade, "MODEL_SECONDS_PER_ACTION", 1e6)
    res = solve(inst, time_limit=20, workers=1, candidates={"sequential": seq})
    assert res.message == facade.NO_TIME_MESSAGE and res.solver_status == "UNKNOWN"
    assert res.schedule is not None and not validate(res.schedule)
    assert res.makespan <= res.stats["window_search"]["makespan"] <= seq.makespan
    assert res.schedule.lower_bound == res.stats["combinatorial_bound"]


def test_sweep_windows_run_short_while_nearly_every_window_gains(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # docs/modelling.md §38: the full limits until ADAPT_RECENT windows are known, the short
    # ones while at least ADAPT_SHARE of the last ADAPT_RECENT shortened the schedule, the
    # full ones again once they stop; the window size grows after a proof quick for the
    # limits it ran with
    assert (lns.ADAPT_RECENT, lns.ADAPT_SHARE) == (8, 0.75)
    full = (lns.WINDOW_DETERMINISTIC_TIME, lns.WINDOW_SECONDS)
    short = (lns.SHORT_DETERMINISTIC_TIME, lns.SHORT_SECONDS)
    assert short < full
    gains = [True] * 12 + [False] * 10
    inc = SimpleNamespace(makespan=10_000, by_start=[(0, 0, 0)] * 10**6)
    seen: list[tuple[float, float]] = []

    def window(self, window, before, deterministic_time, seconds, plateau=False):  # noqa: ANN001, ANN202
        seen.append((deterministic_time, seconds))
        self.inc.makespan -= gains[len(seen) - 1]
        self.used += 1.0
        return cp_model.OPTIMAL, 0.2, 0.0

    monkeypatch.setattr(lns._Search, "window", window)
    monkeypatch.setattr(lns, "_choose", lambda inc, cursor, size: (set(range(size)), set()))
    run = lns._Search(SimpleNamespace(overlap=None), inc, None, len(gains), 0, 0, None, None,
                      None)
    lns._sweeps(run)
    # windows 9-13 follow 8 gains of 8; 14 and 15 follow 7 and 6 of 8; 16 on 5 of 8 or fewer
    assert seen == [full] * 8 + [short] * 7 + [full] * 7
    assert inc.makespan == 10_000 - 12
    # 0.2 units is a quick proof under the full limit, not under the short one
    assert lns._resize(400, cp_model.OPTIMAL, 0.2, 0.0, *full) > 400
    assert lns._resize(400, cp_model.OPTIMAL, 0.2, 0.0, *short) == 400
    assert lns._resize(400, cp_model.FEASIBLE, 0.5, 0.0, *short) < 400


def test_a_window_cut_by_the_deadline_ends_a_margin_before_it() -> None:
    """CP-SAT overran a window's wall limit by up to 1.07 s (docs/modelling.md §61): the
    window the deadline cuts short keeps :data:`lns.END_MARGIN` from it; others keep their
    own limit, and without a deadline there is no wall limit at all (reproducible)."""
    cut = lns._window_solver(0, 1.0, 2.0, seconds=5.0).parameters
    assert cut.max_time_in_seconds == pytest.approx(2.0 - 0.1 - lns.END_MARGIN)
    assert 0.5 <= lns.END_MARGIN < 1.0
    own = lns._window_solver(0, 1.0, 60.0, seconds=5.0).parameters
    assert own.max_time_in_seconds == pytest.approx(5.0)
    late = lns._window_solver(0, 1.0, 0.1, seconds=5.0).parameters
    assert late.max_time_in_seconds == pytest.approx(0.05)
    free = lns._window_solver(0, 1.0, None).parameters
    assert free.max_time_in_seconds > 1e6 and free.max_deterministic_time == 1.0
