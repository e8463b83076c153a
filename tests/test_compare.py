"""The comparison study: grids, the heuristic-vs-optimal table, its files, the Pareto front."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from conftest import INSTANCES, make

from cpsched.instance import InstanceError
from cpsched.schedules import REGISTRY, run_schedule
from cpsched.solver import best_warm_start, serialise_overlaps
from cpsched.study import (
    COLUMNS,
    OPTIMUM,
    compare,
    load_grid,
    memory_quantum,
    pareto_front,
    schedule_points,
    to_markdown,
    with_memory_limit,
    write_results,
)
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
