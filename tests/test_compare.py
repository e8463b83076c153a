"""The comparison study: grids, the heuristic-vs-optimal table, its files, the Pareto front,
study directories (resume, added points, failed tasks, partial reports) — in this process;
the Dask cluster tests are in test_study_dask.py and test_study_cluster.py."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd
import pytest
from conftest import INSTANCES, make

import cpsched.study.parallel as parallel
from cpsched.instance import InstanceError
from cpsched.outputs import OutputError
from cpsched.schedules import REGISTRY, run_schedule
from cpsched.solver import best_warm_start, serialise_overlaps
from cpsched.study import (
    COLUMNS,
    OPTIMUM,
    compare,
    load_grid,
    memory_quantum,
    pareto_front,
    pareto_fronts,
    read_report,
    schedule_points,
    to_markdown,
    with_memory_limit,
    write_results,
)
from cpsched.study.directory import SolverSettings, StudyDir, task_id
from cpsched.validate import validate

DET = {"max_deterministic_time": 2.0}
EPS = 1e-9

BASE = """
name = "g"
[pipeline]
devices = 2
microbatches = 4
[costs]
forward = 1
backward = 2
"""


def write(tmp_path: Path, text: str, name: str = "grid.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------------------- grids
def test_grid_inline_base_product_and_names(tmp_path: Path) -> None:
    path = write(tmp_path, BASE + """
[grid]
"pipeline.devices" = [2, 4]
"pipeline.microbatches" = [4, 8]
"memory.limit" = [2, "none"]
"costs.backward" = [2, 4]
"costs.p2p_latency" = [0.5]
""")
    insts = load_grid(path)
    assert len(insts) == 16
    first = insts[0]
    assert first.name == "g-p2-m4-lim2-B2"  # single-valued keys stay out of the name
    assert (first.p, first.m, first.memory_limit, first.backward[0], first.p2p_latency) == (
        2, 4, 2.0, 2.0, 0.5)
    last = insts[-1]
    assert last.name == "g-p4-m8-limnone-B4"
    assert (last.p, last.m, last.memory_limit, last.backward[0]) == (4, 8, None, 4.0)
    assert len({i.name for i in insts}) == 16


def test_grid_base_file_relative_and_amended(tmp_path: Path) -> None:
    sub = tmp_path / "grids"
    sub.mkdir()
    (tmp_path / "base.toml").write_text(BASE, encoding="utf-8")
    path = write(sub, """
base = "../base.toml"
name = "b"
[costs]
p2p_latency = 1
[grid]
"pipeline.stages_per_device" = [1, 2]
""")
    insts = load_grid(path)
    assert [i.name for i in insts] == ["b-v1", "b-v2"]
    assert all(i.p2p_latency == 1 and i.forward[0] == 1 for i in insts)
    # the shipped example grid loads
    shipped = load_grid(INSTANCES / "grids" / "small-grid.toml")
    assert len(shipped) == 8 and shipped[0].name == "small-p2-m4-lat0"


@pytest.mark.parametrize(("grid", "field"), [
    ('"pipeline.device" = [2, 4]', "grid.pipeline.device"),
    ('"costs" = [1]', "grid.costs"),
    ('"pipeline.devices" = 4', "grid.pipeline.devices"),
    ('"pipeline.devices" = []', "grid.pipeline.devices"),
])
def test_grid_bad_key_or_values(tmp_path: Path, grid: str, field: str) -> None:
    path = write(tmp_path, BASE + "[grid]\n" + grid + "\n")
    with pytest.raises(InstanceError) as err:
        load_grid(path)
    assert err.value.field == field


def test_grid_missing_table_or_file(tmp_path: Path) -> None:
    with pytest.raises(InstanceError, match="grid"):
        load_grid(write(tmp_path, BASE))
    with pytest.raises(InstanceError, match="grid file"):
        load_grid(tmp_path / "nope.toml")
    with pytest.raises(InstanceError, match="base"):
        load_grid(write(tmp_path, 'base = "missing.toml"\n[grid]\n"pipeline.devices" = [2]\n'))


def test_grid_invalid_combination_raises_or_is_skipped(tmp_path: Path) -> None:
    path = write(tmp_path, BASE + """
[grid]
"pipeline.stages_per_device" = [1, 2]
"memory.limit" = [1, 2]
""")
    with pytest.raises(InstanceError) as err:
        load_grid(path)
    # v = 2 needs a limit of at least 2: the message names the combination and the field
    assert "pipeline.stages_per_device=2, memory.limit=1" in err.value.field
    assert err.value.field.endswith("memory.limit")
    skipped: list[tuple[str, str]] = []
    insts = load_grid(path, skipped=skipped)
    assert [i.name for i in insts] == ["g-v1-lim1", "g-v1-lim2", "g-v2-lim2"]
    assert [name for name, _ in skipped] == ["g-v2-lim1"]
    assert "memory.limit" in skipped[0][1]


# ----------------------------------------------------------------------------- compare
@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    a = make(2, 1, 4, F=1, B=2, name="fused")
    b = make(2, 2, 4, F=1, I=1, W=1, limit=3, latency=1, name="split-limited")
    return compare([a, b], time_limit=20, workers=1, jobs=2, progress=False, parameters=DET)


def test_compare_columns_and_rows(table: pd.DataFrame) -> None:
    need = ["instance", "p", "v", "m", "schedule", "makespan", "bubble_fraction",
            "peak_memory", "valid", "opt_makespan_unlimited", "opt_makespan_same_memory",
            "improvement_same_memory_pct", "status", "gap", "lower_bound", "solve_seconds"]
    assert list(table.columns) == COLUMNS
    assert set(need) <= set(table.columns)
    assert list(dict.fromkeys(table["instance"])) == ["fused", "split-limited"]
    for name, rows in table.groupby("instance", sort=False):
        assert (rows["schedule"] == OPTIMUM).sum() == 1, name
        assert rows["schedule"].iloc[-1] == OPTIMUM
        assert len(rows) >= 2  # at least one known schedule
    assert not (table["status"] == "ERROR").any()
    assert table["status"].isin(["OPTIMAL", "FEASIBLE"]).all()
    assert ((table["bubble_fraction"] >= 0) & (table["bubble_fraction"] < 1)).all()
    # the per-device string matches the max
    for peak, per_dev in table[["peak_memory", "peak_memory_per_device"]].itertuples(
            index=False):
        assert max(float(x) for x in per_dev.split()) == pytest.approx(peak)


def test_compare_optimum_never_worse_than_schedule(table: pd.DataFrame) -> None:
    heur = table[table["schedule"] != OPTIMUM]
    for row in heur.itertuples(index=False):
        # at its own peak memory every schedule is valid and a warm start of that solve
        assert row.opt_makespan_same_memory <= row.makespan + EPS, row
        assert row.opt_makespan_unlimited <= row.opt_makespan_same_memory + EPS, row
        assert row.improvement_same_memory_pct >= -EPS
        assert row.lower_bound <= row.opt_makespan_same_memory + EPS
        assert math.isclose(row.improvement_same_memory_pct,
                            100 * (row.makespan - row.opt_makespan_same_memory) / row.makespan)
    for name, rows in table.groupby("instance", sort=False):
        opt = rows[rows["schedule"] == OPTIMUM].iloc[0]
        valid = rows[(rows["schedule"] != OPTIMUM) & rows["valid"]]
        assert (opt["makespan"] <= valid["makespan"] + EPS).all(), name
        assert opt["valid"]
        assert opt["lower_bound"] <= opt["makespan"] + EPS
        limit = opt["memory_limit"]
        if not math.isnan(limit):
            assert opt["peak_memory"] <= limit + EPS


def test_compare_flags_schedules_over_the_limit(table: pd.DataFrame) -> None:
    rows = table[table["instance"] == "split-limited"]
    over = rows[(rows["schedule"] != OPTIMUM) & (rows["peak_memory"] > 3 + EPS)]
    assert len(over) > 0 and not over["valid"].any()
    assert over["violation"].str.contains("memory limit").all()


def test_compare_inline_matches_processes(table: pd.DataFrame) -> None:
    a = make(2, 1, 4, F=1, B=2, name="fused")
    one = compare([a], time_limit=20, workers=1, jobs=1, progress=False, parameters=DET,
                  schedules=["1f1b", "gpipe"])
    assert list(one["schedule"]) == ["gpipe", "1f1b", OPTIMUM]
    ref = table[table["instance"] == "fused"].set_index("schedule")
    for row in one.itertuples(index=False):
        assert row.opt_makespan_same_memory == ref.loc[row.schedule,
                                                       "opt_makespan_same_memory"] or (
            row.schedule == OPTIMUM)
        assert row.makespan == ref.loc[row.schedule, "makespan"]


def test_serialised_overlaps_are_valid_warm_starts() -> None:
    inst = make(4, 1, 8, F=1, B=2)
    if "1f1b-overlap" not in REGISTRY:
        pytest.skip("no overlapped schedule registered")  # pragma: no cover
    ov = run_schedule("1f1b-overlap", inst)
    ser = serialise_overlaps(ov)
    assert ser is not None
    assert validate(ser) == []
    assert ser.makespan == ov.makespan
    assert all(a <= b + EPS for a, b in zip(ser.peak_memory, ov.peak_memory, strict=True))
    assert all(a.overlap is None for a in ser.actions)
    name, acts, ms = best_warm_start(inst, {"1f1b-overlap": ov})
    assert name == "1f1b-overlap" and ms == inst.ticks(ov.makespan)
    assert all(a.overlap is None for a in acts)
    with_cost = make(4, 1, 8, F=1, B=2, overlap=2.5)
    assert serialise_overlaps(run_schedule("1f1b-overlap", with_cost)) is None


# ------------------------------------------------------------------------------ output
def test_write_results_csv_and_markdown(table: pd.DataFrame, tmp_path: Path) -> None:
    csv_path, md_path = write_results(table, tmp_path / "out", "study")
    assert csv_path == tmp_path / "out" / "study.csv" and md_path.suffix == ".md"
    back = pd.read_csv(csv_path)
    assert list(back.columns) == COLUMNS and len(back) == len(table)
    lines = md_path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(table) + 2
    assert lines[0].startswith("| instance") and set(lines[1]) <= set("|-: ")
    assert all(line.count("|") == len(COLUMNS) + 1 for line in lines)


def test_markdown_escapes_and_blanks() -> None:
    df = pd.DataFrame({"a": ["x|y", "z"], "b": [1.5, float("nan")], "c": [True, False]})
    text = to_markdown(df)
    assert "x\\|y" in text
    rows = text.splitlines()
    assert rows[1].split("|")[2].strip().endswith(":")  # numbers right-aligned
    assert rows[3].split("|")[2].strip() == ""  # NaN is blank


# ------------------------------------------------------------------------------ pareto
def test_pareto_front_monotone_and_complete() -> None:
    inst = make(2, 2, 4, F=1, B=2, limit=3)
    front = pareto_front(inst, time_limit=20, workers=1, parameters=DET)
    limits = [pt.limit for pt in front]
    assert limits == sorted(limits)
    assert limits[0] == inst.min_memory_limit()
    steps = [b - a for a, b in zip(limits, limits[1:], strict=False)]
    assert steps == pytest.approx([memory_quantum(inst)] * len(steps))
    ms = [pt.makespan for pt in front]
    assert all(b <= a + EPS for a, b in zip(ms, ms[1:], strict=False)), front
    assert ms[0] > ms[-1]  # memory buys time on this instance
    assert all(pt.status in ("OPTIMAL", "FEASIBLE") for pt in front)
    # no known schedule beats the front at its own peak memory
    for name, peak, makespan in schedule_points(inst.replace(**{"memory.limit": None})):
        under = [pt.makespan for pt in front if pt.limit <= peak + EPS]
        assert under and min(under) <= makespan + EPS, name


def test_pareto_front_given_limits_and_errors() -> None:
    inst = make(2, 1, 4, F=1, B=2)
    front = pareto_front(inst, limits=[4, 1, 2], time_limit=20, parameters=DET)
    assert [pt.limit for pt in front] == [1, 2, 4]
    assert [pt.status for pt in front] == ["OPTIMAL"] * 3
    assert front[0].makespan == 4 * 2 * 3  # one microbatch at a time: m * p * (F + B)
    with pytest.raises(InstanceError, match="memory.limit"):
        pareto_front(inst, limits=[0.5])


def test_with_memory_limit_typed_and_validated() -> None:
    inst = make(2, 2, 4, F=1, B=2, limit=3)
    assert with_memory_limit(inst, 5).memory_limit == 5
    free = with_memory_limit(inst, None)
    assert free.memory_limit is None and free.forward == inst.forward and free.v == 2
    with pytest.raises(InstanceError, match="memory.limit"):
        with_memory_limit(inst, 0.5)


def test_compare_module_reexports_study() -> None:
    import cpsched.compare as old
    import cpsched.study as study

    assert all(getattr(old, name) is getattr(study, name) for name in study.__all__)


# -------------------------------------------------------------------- study directories
STUDY_KW = {"time_limit": None, "workers": 1, "jobs": 1, "progress": False, "parameters": DET}


def _compare(insts: list, study: Path, ran: list[str] | None = None, **kw: object
             ) -> pd.DataFrame:
    cb = None if ran is None else (lambda task, *_: ran.append(task.task_id))
    return compare(insts, **{**STUDY_KW, **kw}, study=study, on_result=cb)


def _files(study: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((study / "results").iterdir())}


def test_task_id_stable_keyed_by_content_limit_and_settings() -> None:
    a, b = make(2, 1, 4, F=1, B=2, name="a"), make(2, 1, 4, F=1.0, B=2.0, name="b")
    det = SolverSettings(None, 1, 0, DET)
    tid = task_id(a, None, det)
    # pinned: the same on every machine and in every run (a rerun finds its results)
    assert tid == "c6f60e0f57147911e7d6" and re.fullmatch("[0-9a-f]{20}", tid)
    assert task_id(b, None, det) == tid  # names and 1 vs 1.0 do not matter
    assert task_id(a, 2, det) != tid and task_id(a.replace(**{"memory.limit": 2}), 2, det) \
        == task_id(a, 2, det)
    assert task_id(a, None, SolverSettings(10, 1, 0, DET)) != tid
    assert task_id(a, None, SolverSettings(None, 1, 1, DET)) != tid


def test_study_rerun_solves_nothing_and_new_points_only(tmp_path: Path) -> None:
    study = tmp_path / "s"
    a = make(2, 1, 4, F=1, B=2, name="a")
    b = make(2, 2, 4, F=1, I=1, W=1, limit=3, name="b")
    ran: list[str] = []
    first = _compare([a], study, ran)
    files = _files(study)
    assert len(ran) == len(files) == 1  # a's schedules all fit under its unlimited optimum
    assert sorted(files) == sorted(f"{t}.csv" for t in ran)
    ran.clear()
    again = _compare([a], study, ran)
    assert ran == [] and again.equals(first)  # read back exactly, solve_seconds included
    both = _compare([a, b], study, ran)  # the grid grew: only b is solved
    assert ran[0] == task_id(b, None, SolverSettings(None, 1, 0, DET))  # b's unlimited first
    assert {p: d for p, d in _files(study).items() if p in files} == files  # untouched
    assert len(_files(study)) == 1 + len(ran)
    assert both[both["instance"] == "a"].reset_index(drop=True).equals(first)
    rep = read_report(study)
    assert rep.table.equals(both) and (rep.finished, rep.total) == (2, 2)
    assert rep.statuses == {"OPTIMAL": len(both)}
    assert [i.name for i in StudyDir(study).instances()] == ["a", "b"]
    assert sorted(p.name for p in (study / "runs").iterdir()) == [
        "run-2.toml", "run-3.toml", "run.toml"]


def test_study_keeps_its_settings(tmp_path: Path) -> None:
    a = make(2, 1, 4, F=1, B=2, name="a")
    _compare([a], tmp_path / "s")
    with pytest.raises(OutputError, match="solver time_limit=none.*time_limit=5 s"):
        _compare([a], tmp_path / "s", time_limit=5)
    with pytest.raises(OutputError, match="schedules"):
        _compare([a], tmp_path / "s", schedules=["1f1b"])


def test_partial_study_report_has_pending_rows(tmp_path: Path) -> None:
    study = tmp_path / "s"
    a = make(2, 1, 4, F=1, B=2, name="a")
    b = make(2, 1, 4, F=1, B=3, name="b")
    full = _compare([a, b], study)
    (study / "results" / f"{task_id(b, None, SolverSettings(None, 1, 0, DET))}.csv").unlink()
    rep = read_report(study)
    assert (rep.finished, rep.total) == (1, 2)
    rows_b = rep.table[rep.table["instance"] == "b"]
    assert (rows_b["status"] == "PENDING").all() and rows_b["opt_makespan_unlimited"].isna().all()
    assert (rows_b["message"] == "not solved yet").all()
    assert rep.table[rep.table["instance"] == "a"].equals(full[full["instance"] == "a"])
    assert "1 of 2 instances finished" in rep.summary()


def test_failed_task_is_a_row_with_reason_and_is_retried(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    study = tmp_path / "s"
    b = make(2, 2, 4, F=1, I=1, W=1, limit=3, name="b")
    real = parallel.solve

    def broken(inst, **kw):  # noqa: ANN001, ANN003, ANN202
        if inst.memory_limit is not None:
            raise RuntimeError("boom")
        return real(inst, **kw)

    monkeypatch.setattr(parallel, "solve", broken)
    with pytest.warns(UserWarning, match="boom"):
        bad = _compare([b], study)
    limited = bad[bad["opt_makespan_same_memory"].isna() & (bad["schedule"] != OPTIMUM)]
    assert len(limited) and (limited["status"] == "ERROR").all()
    assert limited["message"].str.contains("RuntimeError: boom").all()
    errors = sorted(p.name for p in (study / "results").glob("*.error.csv"))
    assert errors and len(bad) == len(bad.dropna(subset=["status"]))  # every row is there
    monkeypatch.setattr(parallel, "solve", real)
    ran: list[str] = []
    good = _compare([b], study, ran)
    assert sorted(f"{t}.error.csv" for t in ran) == errors  # only the failed ones again
    assert not (good["status"] == "ERROR").any()
    assert sorted(p.name for p in (study / "results").glob("*.error.csv")) == errors  # kept


def test_pareto_fronts_as_tasks_match_and_resume(tmp_path: Path) -> None:
    inst = make(2, 1, 4, F=1, B=2)
    fronts = pareto_fronts([inst], limits=[4, 1, 2], parameters=DET, jobs=1)
    assert fronts == {"t": pareto_front(inst, limits=[4, 1, 2], time_limit=None,
                                        parameters=DET)}
    # one microbatch at a time: m p (F + B); from memory 2 on, 1F1B's (m + p - 1)(F + B)
    assert [(pt.makespan, pt.status) for pt in fronts["t"]] == [
        (4 * 2 * 3, "OPTIMAL"), ((4 + 2 - 1) * 3, "OPTIMAL"), ((4 + 2 - 1) * 3, "OPTIMAL")]
    two = [make(2, 2, 4, F=1, B=2, limit=3, name="x"), make(2, 1, 4, F=1, B=2, name="y")]
    first = pareto_fronts(two, parameters=DET, jobs=1, study=tmp_path / "p")
    for inst in two:
        front = first[inst.name]
        assert front[0].limit == inst.min_memory_limit()
        assert all(pt.status == "OPTIMAL" for pt in front)
        # proven optima: the same as the sequential sweep's (warm-started limit to limit)
        assert front == pareto_front(inst, time_limit=None, parameters=DET)
    n = len(list((tmp_path / "p" / "results").iterdir()))
    assert pareto_fronts(two, parameters=DET, jobs=1, study=tmp_path / "p") == first
    assert len(list((tmp_path / "p" / "results").iterdir())) == n


# -------------------------------------------------------------------- the command line
def _cli(*args: str):  # noqa: ANN202
    from typer.testing import CliRunner

    from cpsched.cli import app

    return CliRunner().invoke(app, list(args))


@pytest.mark.parametrize(("args", "message"), [
    (["--scheduler", "localhost:8786"], "--scheduler = 'localhost:8786': must be a Dask "
     "scheduler address SCHEME://HOST:PORT"),
    (["--workers", "2", "--jobs", "3"], "--jobs = 3: an old name of --workers (= 2)"),
    (["--threads", "0"], "--threads = 0: must be an integer from 1 to 64"),
    (["--param", "num_workers=2"], "set by --threads"),
    (["--deterministic-time", "-1"], "--deterministic-time = -1.0: must be"),
])
def test_cli_compare_bad_input_is_one_line(tmp_path: Path, args: list[str],
                                           message: str) -> None:
    r = _cli("compare", str(INSTANCES / "article-interleaved.toml"), *args, "-o",
             str(tmp_path))
    assert r.exit_code == 2 and r.output.startswith("error: ") and message in r.output
    assert r.output.count("\n") == 1 and list(tmp_path.iterdir()) == []


def test_cli_compare_rerun_and_report(tmp_path: Path) -> None:
    grid = write(tmp_path, BASE + '[grid]\n"pipeline.microbatches" = [4, 6]\n')
    args = ["compare", "--grid", str(grid), "--deterministic-time", "2", "-w", "1", "-o",
            str(tmp_path / "o"), "-q"]
    first = _cli(*args)
    assert first.exit_code == 0, first.output
    n = len(list((tmp_path / "o" / "compare" / "results").iterdir()))
    assert f"solved {n} tasks in this run" in first.output and n == 2
    again = _cli(*args)
    assert again.exit_code == 0 and "solved 0 tasks in this run" in again.output
    # (m + p - 1)(F + B) with p = 2, F = 1, B = 2: 15 and 21, both proven
    for name in ("compare.csv", "compare-2.csv"):
        table = pd.read_csv(tmp_path / "o" / name)
        opt = table[table["schedule"] == OPTIMUM]
        assert list(opt["makespan"]) == [15, 21] and set(opt["status"]) == {"OPTIMAL"}
    for f in (tmp_path / "o" / "compare" / "results").iterdir():
        if "-m6" in f.read_text():
            f.unlink()
    rep = _cli("report", str(tmp_path / "o" / "compare"), "-q")
    assert rep.exit_code == 0, rep.output
    assert "1 of 2 instances finished" in rep.output and "PENDING" in rep.output
    assert (tmp_path / "o" / "compare-3.md").is_file()
    bad = _cli("report", str(tmp_path / "o"))
    assert bad.exit_code == 2 and "not a compare study directory" in bad.output
