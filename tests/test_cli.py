"""The command line (docs/spec.md §4): outputs, exit codes 0/1/2, no tracebacks on bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import fields
from pathlib import Path
from unittest.mock import patch

import pytest
from conftest import INSTANCES, make
from typer.testing import CliRunner

from cpsched.cli import app
from cpsched.cli.options import InstanceOptions
from cpsched.instance import Costs, Instance, Memory, Pipeline

runner = CliRunner()
ARTICLE = str(INSTANCES / "article-interleaved.toml")


def run(*args: str):  # noqa: ANN201
    return runner.invoke(app, list(args))


def test_solve_writes_json_and_png(tmp_path: Path) -> None:
    r = run("solve", ARTICLE, "--out", str(tmp_path), "--workers", "1")
    assert r.exit_code == 0, r.output
    data = json.loads((tmp_path / "article-interleaved.json").read_text())
    assert data["status"] == "OPTIMAL" and data["makespan"] == 285
    assert (tmp_path / "article-interleaved.png").stat().st_size > 1000
    assert "interleaved-1f1b" in r.output and "cpsat" in r.output


def test_solve_from_flags_and_set(tmp_path: Path) -> None:
    r = run("solve", "--devices", "2", "--microbatches", "3", "--forward", "1", "--backward",
            "2", "--name", "flags", "--out", str(tmp_path), "--no-plot", "-q")
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "flags.json").read_text())["makespan"] == 12
    r = run("solve", ARTICLE, "--set", "pipeline.microbatches=4", "--memory-limit", "4",
            "--out", str(tmp_path), "--no-plot", "-q", "-w", "1")
    assert r.exit_code == 0, r.output
    data = json.loads((tmp_path / "article-interleaved.json").read_text())
    assert data["instance"]["pipeline"]["microbatches"] == 4
    assert max(data["peak_memory"]) <= 4


@pytest.mark.parametrize("args", [
    ["solve", "no/such/file.toml"],
    ["solve", ARTICLE, "--set", "pipeline.devices=0"],
    ["solve", ARTICLE, "--set", "costs.forward=[1,2]"],
    ["solve", ARTICLE, "--set", "memory.limit=1"],
    ["solve", ARTICLE, "--set", "pipeline.placement=v", "--set", "pipeline.stages_per_device=3"],
    ["solve", ARTICLE, "--set", "nonsense"],
    ["solve", ARTICLE, "--param", "no_such_param=1"],
    ["solve"],
    ["simulate", ARTICLE, "--schedule", "no-such-schedule"],
    ["simulate", ARTICLE, "--schedule", "1f1b"],
])
def test_bad_input_exit_2(args: list[str]) -> None:
    r = run(*args)
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)


def test_simulate_valid_and_over_limit(tmp_path: Path) -> None:
    r = run("simulate", ARTICLE, "--schedule", "interleaved-1f1b", "--out", str(tmp_path),
            "--no-plot")
    assert r.exit_code == 0, r.output
    sch = tmp_path / "article-interleaved-interleaved-1f1b.json"
    assert json.loads(sch.read_text())["makespan"] == 285
    r = run("simulate", ARTICLE, "--schedule", "interleaved-1f1b", "--memory-limit", "6",
            "--out", str(tmp_path), "--no-plot")
    assert r.exit_code == 1
    assert "memory limit" in r.output


def test_validate_ok_and_corrupted(tmp_path: Path) -> None:
    run("simulate", ARTICLE, "--schedule", "interleaved-1f1b", "--out", str(tmp_path),
        "--no-plot", "-q")
    path = tmp_path / "article-interleaved-interleaved-1f1b.json"
    r = run("validate", ARTICLE, str(path))
    assert r.exit_code == 0, r.output
    data = json.loads(path.read_text())
    data["actions"][5]["start"] -= 3
    data["actions"][5]["end"] -= 3
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    r = run("validate", ARTICLE, str(bad))
    assert r.exit_code == 1 and "violation" in r.output
    data = json.loads(path.read_text())
    data["makespan"] = 1
    bad.write_text(json.dumps(data))
    assert run("validate", ARTICLE, str(bad)).exit_code == 1
    bad.write_text("{not json")
    r = run("validate", ARTICLE, str(bad))
    assert r.exit_code == 2 and "not JSON" in r.output
    r = run("validate", ARTICLE, str(tmp_path / "missing.json"))
    assert r.exit_code == 2


def test_schedules_lists_registry() -> None:
    r = run("schedules")
    assert r.exit_code == 0
    for name in ("gpipe", "1f1b", "interleaved-1f1b"):
        assert name in r.output


def test_help() -> None:
    r = run("--help")
    assert r.exit_code == 0 and "solve" in r.output and "validate" in r.output
    r = run("solve", "--help")
    assert r.exit_code == 0 and "--time-limit" in r.output


def test_export_and_import_torch(tmp_path: Path) -> None:
    v_shape = str(INSTANCES / "v-shape.toml")
    r = run("solve", v_shape, "--out", str(tmp_path), "--no-plot", "-q", "-w", "1")
    assert r.exit_code == 0, r.output
    csv = tmp_path / "v.csv"
    r = run("export", str(tmp_path / "v-shape.json"), "--format", "torch-csv",
            "--output", str(csv))
    assert r.exit_code == 0, r.output
    rows = csv.read_text().strip().splitlines()
    assert len(rows) == 4 and rows[0].startswith("0F0")
    r = run("import-torch", str(csv), "--instance", v_shape, "--out", str(tmp_path),
            "--no-plot")
    assert r.exit_code == 0, r.output
    back = json.loads((tmp_path / "v-shape-v.json").read_text())
    assert back["makespan"] <= json.loads((tmp_path / "v-shape.json").read_text())["makespan"]
    csv.write_text("0F0,bogus\n1F0\n2F0\n3F0\n")
    r = run("import-torch", str(csv), "--instance", v_shape, "--no-plot", "-o", str(tmp_path))
    assert r.exit_code == 2 and "bogus" in r.output
    r = run("export", str(tmp_path / "v-shape.json"), "--format", "xml")
    assert r.exit_code == 2


def test_stages_per_device_flag_and_hidden_chunks_alias(tmp_path: Path) -> None:
    flags = ["--devices", "2", "--microbatches", "4", "--forward", "1", "--backward", "2",
             "--no-plot", "-q", "-w", "1"]
    for i, v_flag in enumerate(["--stages-per-device", "--chunks", "-v"]):
        r = run("solve", *flags, v_flag, "2", "--name", f"f{i}", "--out", str(tmp_path))
        assert r.exit_code == 0, r.output
        data = json.loads((tmp_path / f"f{i}.json").read_text())
        assert data["instance"]["pipeline"]["stages_per_device"] == 2
    r = run("solve", *flags, "--chunks", "2", "--stages-per-device", "3")
    assert r.exit_code == 2 and "--chunks" in r.output
    help_text = run("solve", "--help").output
    assert "--stages-per-device" in help_text and "--chunks" not in help_text
    assert "--stages-per-device" in run("simulate", "--help").output


def test_instance_options_one_mapping_to_instance_keys() -> None:
    opts = InstanceOptions(devices=2, stages_per_device=3, forward=1.5, memory_limit=4)
    assert opts.overrides() == {"pipeline.devices": 2, "pipeline.stages_per_device": 3,
                                "costs.forward": 1.5, "memory.limit": 4}
    sections = {"pipeline": Pipeline, "costs": Costs, "memory": Memory}
    for f in fields(InstanceOptions):
        key = f.metadata["key"]
        section, _, name = key.rpartition(".")
        assert key == "name" or name in sections[section].model_fields, key


def test_param_needs_name_equals_value() -> None:
    for bad in ("no_equals", "max_deterministic_time="):
        r = run("solve", ARTICLE, "--param", bad)
        assert r.exit_code == 2 and "--param" in r.output


# ============================================================ issue 12: nothing false, nothing lost
MEMORY6 = str(INSTANCES / "article-memory6.toml")
DUALPIPE = str(INSTANCES / "dualpipe.toml")
FAST = ["-w", "1", "--param", "max_deterministic_time=0.5", "--no-plot", "-q"]


@pytest.mark.parametrize("param", ["relative_gap_limit=0.5", "absolute_gap_limit=100"])
def test_early_stop_parameters_never_claim_optimal(tmp_path: Path, param: str) -> None:
    """The issue: --param relative_gap_limit=0.5 wrote OPTIMAL 340 with bound 340 (the
    optimum is 325)."""
    r = run("solve", MEMORY6, "--param", param, "-o", str(tmp_path), "-w", "1", "--no-plot",
            "-q")
    assert r.exit_code == 0, r.output
    data = json.loads((tmp_path / "article-memory6.json").read_text())
    assert data["lower_bound"] <= 325 <= data["makespan"]
    if data["status"] == "OPTIMAL":
        assert data["makespan"] == data["lower_bound"] == 325
    else:
        assert data["status"] == "FEASIBLE" and data["gap"] > 0
    assert run("validate", MEMORY6, str(tmp_path / "article-memory6.json")).exit_code == 0


@pytest.mark.parametrize(("args", "needle"), [
    (["--seed", "99999999999999"], "--seed"),
    (["--seed", "-2147483649"], "--seed"),
    (["-t", "nan"], "--time-limit"),
    (["-t", "inf"], "--time-limit"),
    (["-t", "0"], "--time-limit"),
    (["-t", "-3"], "--time-limit"),
    (["-w", "5000"], "--workers"),
    (["-w", "0"], "--workers"),
    (["--param", "relative_gap_limit=abc"], "must be a number"),
    (["--param", "max_number_of_conflicts=1.5"], "must be an integer"),
    (["--param", "max_number_of_conflicts=99999999999999999999"], "must be an integer"),
    (["--param", "stop_after_first_solution=1"], "true or false"),
    (["--param", "search_branching=NOPE"], "FIXED_SEARCH"),
    (["--param", "restart_algorithms=1"], "list parameter"),
    (["--param", "subsolvers=x"], "list parameter"),
    (["--param", "num_workers=2"], "--workers"),
    (["--param", "random_seed=2"], "--seed"),
    (["--param", "max_time_in_seconds=2"], "--time-limit"),
    (["--param", "max_deterministic_time=-1"], "CP-SAT rejects"),
    (["--param", "fix_variables_to_their_hinted_value=true"], "not a bound on the optimum"),
    (["--set", "name=\"a\\u0000b\""], "name"),
    (["--set", "name=\"a\\u001bb\""], "name"),
    (["--set", "name=\"a\\nb\""], "name"),
    (["--set", "name=\"..\""], "name"),
    (["--set", "name=\".\""], "name"),
    (["--set", "name=\"" + "x" * 300 + "\""], "at most 100"),
    (["--set", "costs.forward=1e300"], "64-bit"),
    (["--set", "memory.activation=1e300", "--set", "memory.limit=1e301"], "64-bit"),
])
def test_solve_bad_input_one_message_exit_2(tmp_path: Path, args: list[str],
                                            needle: str) -> None:
    r = run("solve", ARTICLE, *args, "-o", str(tmp_path))
    assert r.exit_code == 2, r.output
    assert needle in r.output and r.output.count("error:") == 1
    assert "Traceback" not in r.output and list(tmp_path.iterdir()) == []


def test_param_values_typed_by_the_field(tmp_path: Path) -> None:
    r = run("solve", ARTICLE, "--param", "search_branching=fixed_search", "--param",
            "max_number_of_conflicts=100000", "--param", "log_prefix=\"x\"", *FAST,
            "-o", str(tmp_path))
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("overlap", ["0", "1.5", "4.5", "[0, 3, 3, 3]"])
def test_overlap_cost_outside_physical_range_exit_2(tmp_path: Path, overlap: str) -> None:
    """The issue: overlap_forward_backward = 0 solved to OPTIMAL makespan 0 (here F = 2 and
    the fused backward I + W = 2: a pair lasts 2 to 4)."""
    r = run("solve", DUALPIPE, "--set", f"costs.overlap_forward_backward={overlap}", "-o",
            str(tmp_path))
    assert r.exit_code == 2 and "longer half" in r.output
    assert run("validate", DUALPIPE, str(tmp_path / "x.json"), "--set",
               f"costs.overlap_forward_backward={overlap}").exit_code == 2


def test_more_decimals_solve_simulate_import_compare(tmp_path: Path) -> None:
    """The issue: forward = 1.2345 crashed solve (AssertionError), marked every simulated and
    imported action invalid, and made compare exit 0 with every row ERROR."""
    sets = ["--set", "costs.forward=1.2345", "--set", "costs.p2p_latency=0.0001",
            "--set", "pipeline.microbatches=4", "--set", "name=\"dec\""]
    r = run("solve", ARTICLE, *sets, *FAST, "-o", str(tmp_path))
    assert r.exit_code == 0, r.output
    assert run("validate", ARTICLE, str(tmp_path / "dec.json"), *sets[:-2]).exit_code == 0
    r = run("simulate", ARTICLE, *sets, "-s", "interleaved-1f1b", "-o", str(tmp_path), "-q",
            "--no-plot")
    assert r.exit_code == 0, r.output
    csv = tmp_path / "dec.csv"
    assert run("export", str(tmp_path / "dec.json"), "--output", str(csv)).exit_code == 0
    inst = tmp_path / "dec.toml"
    inst.write_text((INSTANCES / "article-interleaved.toml").read_text().replace(
        "forward = 5", "forward = 1.2345\np2p_latency = 0.0001").replace(
        "microbatches = 8", "microbatches = 4").replace('"article-interleaved"', '"dec"'))
    r = run("import-torch", str(csv), "-i", str(inst), "-o", str(tmp_path), "-q", "--no-plot")
    assert r.exit_code == 0, r.output
    r = run("compare", str(inst), "-t", "5", "-j", "1", "-o", str(tmp_path), "-q")
    assert r.exit_code == 0, r.output
    table = (tmp_path / "compare.csv").read_text()
    assert "ERROR" not in table and "cpsat" in table


def test_more_than_six_decimals_warns_how_much(tmp_path: Path) -> None:
    r = run("solve", ARTICLE, "--set", "costs.forward=1.23456789", *FAST, "-o", str(tmp_path))
    assert r.exit_code == 0, r.output
    assert "warning: instance" in r.output and "may differ by at most" in r.output


# -------------------------------------------------------------------------- outputs
def test_flags_only_and_set_runs_never_overwrite(tmp_path: Path) -> None:
    """The issue: every flags-only run wrote out/instance.json over the previous one."""
    flags = ["--devices", "2", "--microbatches", "3", "--forward", "1", "--backward", "2"]
    for m in ("3", "4"):
        r = run("solve", *flags[:2], "--microbatches", m, *flags[4:], *FAST, "-o",
                str(tmp_path))
        assert r.exit_code == 0, r.output
    first = json.loads((tmp_path / "instance.json").read_text())
    second = json.loads((tmp_path / "instance-2.json").read_text())
    assert first["instance"]["pipeline"]["microbatches"] == 3
    assert second["instance"]["pipeline"]["microbatches"] == 4


def test_existing_symlink_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    (out / "article-interleaved.json").symlink_to(target)
    (out / "article-interleaved-2.png").mkdir()  # a directory where a file would go
    r = run("solve", ARTICLE, "-w", "1", "-o", str(out), "-q")
    assert r.exit_code == 0, r.output
    assert target.read_text() == "precious"
    assert (out / "article-interleaved-3.json").is_file()
    assert (out / "article-interleaved-3.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("make_out", ["file", "file/sub"])
def test_unusable_out_rejected_before_solving(tmp_path: Path, make_out: str) -> None:
    (tmp_path / "file").write_text("x")
    r = run("solve", ARTICLE, "-o", str(tmp_path / make_out))
    assert r.exit_code == 2 and "--out" in r.output and "solving" not in r.output


@pytest.mark.parametrize("stem", ["../../x", "/tmp/cpsched-abs-stem", "a/b", ".."])
def test_compare_stem_stays_under_out(tmp_path: Path, stem: str) -> None:
    out = tmp_path / "a" / "b"
    r = run("compare", ARTICLE, "--stem", stem, "-o", str(out))
    assert r.exit_code == 2 and "--stem" in r.output
    assert not out.exists() and not Path("/tmp/cpsched-abs-stem.csv").exists()


@pytest.mark.parametrize("args", [["-w", "0"], ["-j", "0"], ["-j", "-2"], ["-w", "65"],
                                  ["-j", "100"], ["-t", "nan"]])
def test_compare_counts_checked(tmp_path: Path, args: list[str]) -> None:
    r = run("compare", ARTICLE, *args, "-o", str(tmp_path))
    assert r.exit_code == 2 and "must be" in r.output


def test_compare_duplicate_names_rejected_before_solving(tmp_path: Path) -> None:
    r = run("compare", ARTICLE, ARTICLE, "-o", str(tmp_path))
    assert r.exit_code == 2 and "appears twice" in r.output
    assert list(tmp_path.iterdir()) == []


def test_compare_large_grid_is_announced(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    import cpsched.study

    def interrupted(*args: object, **kw: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cpsched.study, "compare", interrupted)
    grid = tmp_path / "g.toml"
    grid.write_text('base = "' + str(INSTANCES / "article-interleaved.toml") + '"\n[grid]\n'
                    '"pipeline.microbatches" = ' + str(list(range(1, 202))) + "\n")
    r = run("compare", "--grid", str(grid), "-o", str(tmp_path / "o"), "-t", "10")
    assert r.exit_code == 130
    assert "warning: 201 instances" in r.output and "interrupted" in r.output


def test_export_output_checked(tmp_path: Path) -> None:
    run("simulate", ARTICLE, "-s", "1f1b", "--set", "pipeline.stages_per_device=1", "-o",
        str(tmp_path), "-q", "--no-plot")
    sch = str(tmp_path / "article-interleaved-1f1b.json")
    r = run("export", sch, "--output", str(tmp_path / "missing" / "x.csv"))
    assert r.exit_code == 2 and "does not exist" in r.output
    csv = tmp_path / "x.csv"
    assert run("export", sch, "--output", str(csv)).exit_code == 0
    r = run("export", sch, "--output", str(csv))
    assert r.exit_code == 2 and "--force" in r.output
    assert run("export", sch, "--output", str(csv), "--force").exit_code == 0
    r = run("export", sch, "--output", str(tmp_path))
    assert r.exit_code == 2 and "directory" in r.output


@pytest.mark.parametrize("content", [bytes(range(256)) * 4, b"0F0,1F0\xe9\n"])
def test_import_torch_binary_or_latin1_exit_2(tmp_path: Path, content: bytes) -> None:
    csv = tmp_path / "x.csv"
    csv.write_bytes(content)
    r = run("import-torch", str(csv), "-i", ARTICLE, "-o", str(tmp_path / "o"))
    assert r.exit_code == 2 and "CSV file" in r.output and "Traceback" not in r.output


def test_huge_schedule_plot_skipped_with_a_note(tmp_path: Path) -> None:
    """The issue: 200k actions drew a 63,587-pixel-tall PNG."""
    r = run("simulate", "-p", "101", "-m", "100", "--forward", "1", "--backward", "2",
            "-s", "gpipe", "-o", str(tmp_path))
    assert r.exit_code == 0, r.output
    assert "plot skipped: 20200 actions" in r.output
    assert [p.name for p in tmp_path.iterdir()] == ["instance-gpipe.json"]


def test_plot_time_estimate_counts_the_numbered_blocks() -> None:
    """A block's number costs more than its block (docs/modelling.md §61): the estimate
    takes both, and a schedule whose numbers are unknown is taken as numbered throughout."""
    from cpsched.cli.output import plot_seconds, plot_skipped

    assert plot_seconds(12288, 0) == pytest.approx(1.5 + 0.0004 * 12288)
    assert plot_seconds(4096, 2048) == pytest.approx(1.5 + 0.0004 * 4096 + 0.0012 * 2048)
    assert plot_seconds(4096, None) == plot_seconds(4096, 4096) == plot_seconds(4096, 10**6)
    assert plot_seconds(4096, 0) < plot_seconds(4096, 2048) < plot_seconds(4096, None)
    # half of -t 12 is 6 s: 8192 unnumbered blocks (4.8 s) are drawn, 12 288 (6.4 s) not,
    # nor 4096 numbered ones (8.1 s)
    assert plot_skipped(8192, 6.0, 0) is None
    assert "takes about 6 s" in (plot_skipped(12288, 6.0, 0) or "")
    assert "takes about 8 s" in (plot_skipped(4096, 6.0, None) or "")


def _article_schedule():  # noqa: ANN202
    from cpsched.instance import load_instance
    from cpsched.schedules import run_schedule

    return run_schedule("interleaved-1f1b", load_instance(ARTICLE))


def _slow_drawing(schedule, path):  # noqa: ANN001, ANN202, ARG001
    time.sleep(60)


def _dying_drawing(schedule, path):  # noqa: ANN001, ANN202, ARG001
    os._exit(3)


def test_png_drawn_within_its_deadline_is_written(tmp_path: Path) -> None:
    from cpsched.cli.output import write_outputs
    from cpsched.outputs import leftover_temps

    paths = write_outputs(_article_schedule(), tmp_path, "x", True,
                          deadline=time.perf_counter() + 120)
    assert [p.name for p in paths] == ["x.json", "x.png"]
    assert paths[1].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert leftover_temps(tmp_path) == []


@pytest.mark.parametrize(("drawing", "reason"), [
    (_slow_drawing, "no time was left to draw it within --time-limit"),
    (_dying_drawing, "ended without an answer (exit code 3)"),
])
def test_png_not_drawn_by_its_deadline_is_skipped_and_the_json_kept(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], drawing, reason: str) -> None:  # noqa: ANN001
    """The drawing runs in a child killed at the deadline: a slow or failed drawing costs
    the PNG, never the time limit or the JSON (docs/guarantees.md §7.4)."""
    from cpsched.cli.output import write_outputs
    from cpsched.outputs import leftover_temps

    sch = _article_schedule()
    t0 = time.perf_counter()
    with patch("cpsched.plots.gantt_and_memory", drawing):
        paths = write_outputs(sch, tmp_path, "x", True, deadline=t0 + 1.0)
    assert time.perf_counter() - t0 < 30  # the slow drawing sleeps 60 s
    assert [p.name for p in paths] == ["x.json"]
    assert json.loads(paths[0].read_text())["makespan"] == sch.makespan
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.json"]
    assert leftover_temps(tmp_path) == []
    err = capsys.readouterr().err
    assert "note: plot skipped: " in err and reason in err


def test_ctrl_c_while_drawing_keeps_the_schedule(tmp_path: Path) -> None:
    with patch("cpsched.cli.output.draw_png", side_effect=KeyboardInterrupt):
        r = run("solve", ARTICLE, "--out", str(tmp_path), "--workers", "1")
    assert r.exit_code == 130, r.output
    assert "interrupted: kept the best schedule so far" in r.output
    assert [p.name for p in tmp_path.iterdir()] == ["article-interleaved.json"]
    assert json.loads((tmp_path / "article-interleaved.json").read_text())["makespan"] == 285


def test_png_deadline_already_past_draws_nothing(tmp_path: Path) -> None:
    from cpsched.cli.output import draw_png

    with patch("cpsched.plots.gantt_and_memory", _dying_drawing):
        assert draw_png(_article_schedule(), tmp_path, "x", time.perf_counter() - 1) == (
            None, "plot skipped: no time was left to draw it within --time-limit; raise it "
            "to get one")
    assert list(tmp_path.iterdir()) == []


def test_fractional_peak_memory_round_trips(tmp_path: Path) -> None:
    """A file cpsched writes passes cpsched validate, fractional peak memory included."""
    r = run("simulate", ARTICLE, "--set", "memory.activation=0.5", "-s", "interleaved-1f1b",
            "-o", str(tmp_path), "-q", "--no-plot")
    assert r.exit_code == 0, r.output
    path = tmp_path / "article-interleaved-interleaved-1f1b.json"
    assert json.loads(path.read_text())["peak_memory"] == [5.5, 4.5, 3.5, 2.5]
    r = run("validate", ARTICLE, str(path), "--set", "memory.activation=0.5")
    assert r.exit_code == 0, r.output


# ------------------------------------------------ processes: Ctrl-C and concurrent runs
SCALE = INSTANCES / "scale" / "p16-loop-v2-m64-lim24.toml"  # no proof within a minute


def _cpsched(*args: str) -> subprocess.Popen:
    """``cpsched ARGS`` as its own process (group), with Ctrl-C delivered as in a terminal."""
    return subprocess.Popen(
        [sys.executable, "-m", "cpsched.cli", *args], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _communicate(proc: subprocess.Popen, timeout: float) -> tuple[str, str]:
    """``proc.communicate``; on a time-out the process group is killed (no stray solver keeps
    running after a failed test) and the test fails."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"cpsched {proc.args[3:]} did not end within {timeout} s")


def _wait_for(proc: subprocess.Popen, needle: str, timeout: float = 120) -> str:
    """stderr read line by line until a line holds ``needle``."""
    assert proc.stderr is not None
    seen, end = "", time.monotonic() + timeout
    while time.monotonic() < end:
        line = proc.stderr.readline()
        seen += line
        if needle in line or (not line and proc.poll() is not None):
            return seen
    return seen


def test_ctrl_c_during_solve_keeps_the_best_schedule(tmp_path: Path) -> None:
    """The issue: Ctrl-C during the search said "time limit reached", exited 0, took ~10 s."""
    proc = _cpsched("solve", str(SCALE), "-t", "120", "-w", "2", "-o", str(tmp_path))
    seen = _wait_for(proc, "solving:")
    assert "solving:" in seen, seen
    time.sleep(1.5)  # the search is under way
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = _communicate(proc, 30)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 130, out + err
    assert elapsed < 1.5, elapsed
    assert "interrupted: kept the best schedule" in out and "Traceback" not in err
    path = tmp_path / "p16-loop-v2-m64-lim24.json"
    data = json.loads(path.read_text())
    # the best so far: the solver's (the window search runs at this point) or, when the
    # solver has nothing better yet, the best valid known schedule (list's 2380, or more
    # when a slow machine cuts the portfolio); never longer than that
    assert data["status"] in ("FEASIBLE", "HEURISTIC") and 0 < data["makespan"] <= 2515
    assert run("validate", str(SCALE), str(path)).exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no PNG, no temp file


def test_large_solve_reports_the_window_search(tmp_path: Path) -> None:
    # 4096 actions: the window search runs first (docs/modelling.md §17) and says what it did
    r = run("solve", str(SCALE), "-t", "10", "--no-plot", "-o", str(tmp_path))
    assert r.exit_code == 0, r.output
    data = json.loads((tmp_path / "p16-loop-v2-m64-lim24.json").read_text())
    lines = [x for x in r.output.splitlines() if x.startswith("window search:")]
    if not lines:  # a loaded machine spent the 10 s before the search had time to start:
        # then the result is the warm start or the full model's from it, never longer
        assert data["makespan"] <= data["warm_start_makespan"] and data["status"] == "FEASIBLE"
        return
    start, end = (float(x) for x in lines[0].split(", ")[-1].split(" -> "))
    # from the warm start (the list portfolio's 2380 with its loose-admission runs, or more
    # if a slow machine cuts the portfolio; else the modulo pattern's 2475, docs/modelling.md
    # §22), never longer, and the schedule written is at least as short
    assert start == data["warm_start_makespan"] and end <= start
    assert data["warm_start"] in ("list", "modulo")
    assert start == 2475 if data["warm_start"] == "modulo" else start >= 2380
    if data["warm_start"] == "modulo":  # and it says so
        mp = next(x for x in r.output.splitlines() if x.startswith("modulo pattern:"))
        assert mp.startswith("modulo pattern: period 32 (at least 30), 2475 in ")
        assert mp.endswith(", the warm start")
    assert data["makespan"] <= end


def test_solve_reports_dualpipes_family_and_its_tight_middle(tmp_path: Path) -> None:
    """DualPipe's shape at p = 6, m = 12 (DualPipe 36, bound 35): the family's tight middle
    finds 35.5 in well under a second (docs/modelling.md §47) and the report says so."""
    row = INSTANCES / "scale" / "p16-dualpipe-m32.toml"
    r = run("solve", str(row), "--set", "pipeline.devices=6", "--set", "pipeline.microbatches=12",
            "-t", "12", "--workers", "1", "--no-plot", "-o", str(tmp_path))
    assert r.exit_code == 0, r.output
    line = next(x for x in r.output.splitlines() if x.startswith("DualPipe's family (mirror"))
    assert line.startswith("DualPipe's family (mirror-symmetric, DualPipe's pairs): 35.5 in ")
    assert line.endswith(" (its tight middle first: 35.5)")
    assert 35 <= json.loads((tmp_path / "p16-dualpipe-m32.json").read_text())["makespan"] <= 35.5
    # within 1 % of 35 is 35 itself on the 0.5 grid: the target run (§48) finds none
    assert ("DualPipe's family with its tight middle, asked for at most 35 (within 1 % of the "
            "bound): none in ") in r.output


def test_solve_reports_the_target_schedule_and_searches_from_it(tmp_path: Path) -> None:
    """p = 10, m = 20 (bound 59): the tight middle asked for 1 % (cap 59.5 on the 0.5 grid)
    finds 59.5 before the window search, whose line starts from it (docs/modelling.md §48)."""
    row = INSTANCES / "scale" / "p16-dualpipe-m32.toml"
    r = run("solve", str(row), "--set", "pipeline.devices=10", "--set",
            "pipeline.microbatches=20", "-t", "12", "--workers", "1", "--no-plot",
            "-o", str(tmp_path))
    assert r.exit_code == 0, r.output
    assert ("DualPipe's family with its tight middle, asked for at most 59.5 (within 1 % of "
            "the bound): 59.5 in ") in r.output
    search = next(x for x in r.output.splitlines() if x.startswith("window search:"))
    assert ", 59.5 -> " in search
    assert json.loads((tmp_path / "p16-dualpipe-m32.json").read_text())["makespan"] <= 59.5


def test_ctrl_c_during_compare_keeps_finished_instances(tmp_path: Path) -> None:
    """The issue: Ctrl-C at 21 of 22 instances wrote nothing."""
    proc = _cpsched("compare", ARTICLE, str(INSTANCES / "zb-split.toml"), str(SCALE),
                    "-t", "120", "-j", "2", "-o", str(tmp_path))
    time.sleep(20)  # the two small instances finish; the large one does not
    proc.send_signal(signal.SIGINT)
    out, err = _communicate(proc, 30)
    assert proc.returncode == 130, out + err
    assert "interrupted: 2 of 3 instances finished" in out, out + err
    assert "Traceback" not in out + err
    table = (tmp_path / "compare.csv").read_text()
    assert "article-interleaved" in table and "zb-split" in table
    assert "p16-loop" not in table and (tmp_path / "compare-bubble.png").is_file()


def test_two_concurrent_solves_write_two_complete_sets(tmp_path: Path) -> None:
    """The issue: two runs with one name left a JSON from one beside a PNG from the other."""
    procs = {tag: _cpsched("solve", ARTICLE, "-w", "1", "-o", str(tmp_path), "--set",
                           f'description="{tag}"') for tag in ("A", "B")}
    outputs = {tag: _communicate(p, 300) for tag, p in procs.items()}
    assert all(p.returncode == 0 for p in procs.values()), outputs
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["article-interleaved-2.json", "article-interleaved-2.png",
                     "article-interleaved.json", "article-interleaved.png"]
    for tag, (out, _) in outputs.items():
        wrote = out.strip().splitlines()[-1].removeprefix("wrote ").split(", ")
        json_path, png_path = (Path(w) for w in wrote)
        assert json_path.with_suffix(".png") == png_path  # one run's pair
        assert json.loads(json_path.read_text())["instance"]["description"] == tag
        png = png_path.read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[-8:-4] == b"IEND"
        assert run("validate", ARTICLE, str(json_path)).exit_code == 0


def test_slowdown_scales_the_time_kept_after_the_search() -> None:
    # wall over CPU seconds of the known schedules: 1 when idle or too short to tell, the
    # share of a core otherwise, at most MAX_SLOWDOWN; the reserve grows by that factor
    from cpsched.cli import solve as solve_cli

    assert solve_cli._slowdown(2.0, 2.0) == 1.0
    assert solve_cli._slowdown(2.0, 2.2) == 1.0  # never below idle
    assert solve_cli._slowdown(0.1, 0.01) == 1.0  # too short to tell
    assert solve_cli._slowdown(3.0, 2.0) == pytest.approx(1.5)
    assert solve_cli._slowdown(30.0, 1.0) == solve_cli.MAX_SLOWDOWN
    inst = make(4, 1, 8)
    base = solve_cli._reserve(inst, False)
    assert base == pytest.approx(solve_cli.AFTER_SEARCH_FIXED
                                 + solve_cli.AFTER_SEARCH_PER_ACTION * inst.n_actions)
    assert solve_cli._reserve(inst, False, 1.5) == pytest.approx(1.5 * base)


def test_slowdown_leaves_out_the_wait_for_a_child(monkeypatch: pytest.MonkeyPatch) -> None:
    # the second expensive known schedule runs in a forked child (docs/modelling.md §45);
    # the 1.5 s the parent waits for it is not this process being slow
    import time

    from cpsched.cli import solve as solve_cli
    from cpsched.forked import usable_cores
    from cpsched.schedules import registry

    if usable_cores() < 2:
        pytest.skip("one core: the known schedules run one at a time")
    gen = registry.REGISTRY["gpipe"].generate  # over the limit below: never skipped

    def slow(inst: Instance):  # noqa: ANN202
        time.sleep(1.5)
        return gen(inst)

    spec = registry.ScheduleSpec("a", "t", "t", "t", check=lambda inst: None, generate=gen,
                                 expensive=True)
    monkeypatch.setattr(registry, "REGISTRY", {
        "a": spec, "b": registry.ScheduleSpec("b", "t", "t", "t", check=lambda inst: None,
                                              generate=slow, expensive=True)})
    inst = make(2, 1, 3, F=1, B=2, limit=1)
    t = time.perf_counter()
    known, slowdown = solve_cli._known_schedules(inst, time.perf_counter() + 60, 2)
    assert set(known) == {"a", "b"} and time.perf_counter() - t >= 1.5
    assert slowdown == 1.0


def test_known_schedules_validated_for_the_table_only(validate_calls: list[str]) -> None:
    # the table's verdicts are validated before the search; with --quiet there is no table,
    # and only what the registry's own checks ask is validated (at 36 864 actions each
    # validation takes about 0.2 s of a short --time-limit)
    from cpsched.cli import solve as solve_cli

    calls = validate_calls
    inst = make(4, 2, 8, F=5, B=10, limit=6)  # docs/spec.md §6: some over the limit
    known, _ = solve_cli._known_schedules(inst, time.perf_counter() + 60, 1, table=False)
    quiet = set(calls)
    assert quiet < set(known)
    calls.clear()
    known, _ = solve_cli._known_schedules(inst, time.perf_counter() + 60, 1)
    assert set(calls) == set(known)


def test_solve_reports_the_relaxation_and_its_group(tmp_path: Path) -> None:
    # p=4 v=2 m=8 F=2 B=3 limit 3 (tests/test_relaxation.py: device 0 alone 180, the turn
    # pair 180, the turn triple 192 = the optimum); a search cut short leaves the gap for the
    # relaxations (§21, §31, §35); the triple closes it, so devices 0-2 never run (§36).
    # The span bound (§53) proves 192 before the search: it is switched off here
    # (tests/test_span_bound.py checks it on this instance)
    with patch("cpsched.solver.prelude.span_applies", return_value=False):
        r = run("solve", "-p", "4", "-v", "2", "-m", "8", "--forward", "2", "--backward", "3",
                "--memory-limit", "3", "--out", str(tmp_path), "-w", "1", "--no-plot",
                "--param", "max_number_of_conflicts=10", "-t", "120")
    assert r.exit_code == 0, r.output
    line = next(x for x in r.output.splitlines() if x.startswith("relaxation:"))
    assert line == ("relaxation: device 0 180 (solved), devices 0+3 180 (solved), "
                    "devices 0+1+3 192 (solved)")
    assert "lower bound 192" in r.output
