"""The command line (docs/spec.md §4): outputs, exit codes 0/1/2, no tracebacks on bad input."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest
from conftest import INSTANCES
from typer.testing import CliRunner

from cpsched.cli import app
from cpsched.cli.options import InstanceOptions
from cpsched.instance import Costs, Memory, Pipeline

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
