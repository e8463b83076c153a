"""The validator cannot be fooled (docs/guarantees.md): non-finite or non-numeric times are
violations, and every claim a schedule file makes about itself is checked against what its
actions give (issue: ``end: NaN`` read as valid; ``OPTIMAL`` with ``lower_bound`` above the
makespan accepted)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import INSTANCES, make
from typer.testing import CliRunner

from cpsched.cli import app
from cpsched.model import Schedule, Status
from cpsched.schedules import run_schedule
from cpsched.validate import exceeds_memory_limit, validate, validate_claims

runner = CliRunner()
ARTICLE = INSTANCES / "article-interleaved.toml"
MEMORY6 = INSTANCES / "article-memory6.toml"


@pytest.fixture
def sch_file(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """A valid interleaved-1f1b schedule file of the article example (makespan 285)."""
    r = runner.invoke(app, ["simulate", str(ARTICLE), "-s", "interleaved-1f1b", "-o",
                            str(tmp_path), "--no-plot", "-q"])
    assert r.exit_code == 0, r.output
    path = tmp_path / "article-interleaved-interleaved-1f1b.json"
    return path, json.loads(path.read_text())


def _validate(tmp_path: Path, data: Any, instance: Path = ARTICLE, raw: str | None = None):
    bad = tmp_path / "claims.json"
    bad.write_text(raw if raw is not None else json.dumps(data))
    return runner.invoke(app, ["validate", str(instance), str(bad)])


# ------------------------------------------------------------------ times must be numbers
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), "5", None,
                                   True])
def test_library_validator_rejects_non_finite_or_non_numeric_times(value: object) -> None:
    inst = make(2, 1, 2, F=1, B=2, limit=2)
    sch = run_schedule("1f1b", inst)
    a = sch.actions[1]
    rows = [*sch.actions[:1], a._replace(end=value), *sch.actions[2:]]
    out = validate(Schedule(inst, rows, "x"))
    assert out and "finite numbers" in out[0]


def test_library_validator_rejects_non_integer_indices() -> None:
    inst = make(2, 1, 2, F=1, B=2)
    sch = run_schedule("1f1b", inst)
    rows = [sch.actions[0]._replace(stage=0.0), *sch.actions[1:]]
    assert "must be integers" in validate(Schedule(inst, rows, "x"))[0]


@pytest.mark.parametrize("instance", [ARTICLE, MEMORY6])
def test_cli_nan_end_is_not_valid(tmp_path: Path, sch_file: tuple[Path, dict],
                                  instance: Path) -> None:
    _, data = sch_file
    data["actions"][3]["end"] = float("nan")  # json.dumps writes NaN
    r = _validate(tmp_path, data, instance)
    assert r.exit_code == 2 and "finite number" in r.output and "valid:" not in r.output


@pytest.mark.parametrize("raw", [
    '{"format": "cpsched.schedule/1", "lower_bound": "abc", "actions": []}',
    '{"format": "cpsched.schedule/1", "x": ' + "[" * 100_000 + "]" * 100_000
    + ', "actions": []}',
    '{"format": "cpsched.schedule/1", "makespan": ' + "9" * 5000 + ', "actions": []}',
    '{"format": "cpsched.schedule/1", "actions": [{"device": 0, "stage": 0, "microbatch": 0, '
    '"kind": "F", "start": "0", "end": 1}]}',
    "\xff\xfe not text",
])
def test_cli_unreadable_schedule_files_exit_2(tmp_path: Path, raw: str) -> None:
    r = _validate(tmp_path, None, raw=raw)
    assert r.exit_code == 2, r.output
    assert r.output.startswith("error:") and "Traceback" not in r.output


# ------------------------------------------------------------------------- claims
def test_cli_valid_file_is_valid(tmp_path: Path, sch_file: tuple[Path, dict]) -> None:
    r = _validate(tmp_path, sch_file[1])
    assert r.exit_code == 0 and "valid:" in r.output


@pytest.mark.parametrize(("changes", "needle"), [
    ({"status": "OPTIMAL", "lower_bound": 300}, "not a lower bound"),
    ({"status": "OPTIMAL", "lower_bound": 300}, "status OPTIMAL needs lower_bound"),
    ({"status": "OPTIMAL", "lower_bound": 200, "gap": 0.298246}, "status OPTIMAL needs"),
    ({"status": "OPTIMAL", "lower_bound": None, "gap": None}, "status OPTIMAL needs"),
    ({"status": "HEURISTIC", "lower_bound": 290, "gap": 0.0}, "not a lower bound"),
    ({"status": "INFEASIBLE"}, "INFEASIBLE"),
    ({"makespan": 280}, "makespan in the file"),
    ({"gap": 0.5}, "gap in the file"),
    ({"lower_bound": 200}, "gap in the file"),  # the file's gap (0) no longer matches
    ({"bubble_fraction": 0.1}, "bubble_fraction in the file"),
    ({"peak_memory": [11, 9, 7, 4]}, "peak_memory in the file"),
    ({"peak_memory": [11, 9, 7]}, "peak_memory in the file"),
])
def test_cli_false_claims_exit_1(tmp_path: Path, sch_file: tuple[Path, dict],
                                 changes: dict, needle: str) -> None:
    data = {**sch_file[1], **changes}
    r = _validate(tmp_path, data)
    assert r.exit_code == 1, r.output
    assert needle in r.output


def test_claims_within_tolerance_hold(tmp_path: Path, sch_file: tuple[Path, dict]) -> None:
    data = sch_file[1]
    data.update(makespan=285 + 5e-7, bubble_fraction=data["bubble_fraction"] + 5e-6,
                status="OPTIMAL", lower_bound=285, gap=0.0)
    r = _validate(tmp_path, data)
    assert r.exit_code == 0, r.output


def test_validate_claims_library() -> None:
    inst = make(2, 1, 2, F=1, B=2)
    sch = run_schedule("1f1b", inst)  # makespan 9 = the bound
    assert validate_claims(sch) == []
    sch.status, sch.lower_bound = Status.OPTIMAL, 9.0
    assert validate_claims(sch, {"makespan": 9, "gap": 0.0}) == []
    sch.lower_bound = 8.0
    assert any("OPTIMAL needs" in v for v in validate_claims(sch))
    sch.status, sch.lower_bound = Status.FEASIBLE, 10.0
    assert any("not a lower bound" in v for v in validate_claims(sch))
    sch.lower_bound = None
    assert validate_claims(sch, {"gap": 0.1}) and validate_claims(sch, {"gap": None}) == []


@pytest.mark.parametrize("name", ["1f1b", "gpipe", "interleaved-1f1b", "zb-h2"])
@pytest.mark.parametrize("limit", [2.0, 3.5, 4.0, 6.0, None])
def test_exceeds_memory_limit_is_the_validators_memory_rule(name: str,
                                                             limit: float | None) -> None:
    # the cheap check says "over" exactly when the validator reports the memory limit
    split = {"B": None, "I": 5, "W": 5} if name == "zb-h2" else {}
    inst = make(4, 2 if name == "interleaved-1f1b" else 1, 8, **split)
    sch = run_schedule(name, inst)
    peak = max(sch.peak_memory)
    bounded = inst.replace(**{"memory.limit": limit}) if limit is not None else inst
    over = exceeds_memory_limit(sch, bounded)
    assert over == any("memory limit" in v for v in validate(sch, bounded))
    assert over == (limit is not None and peak > limit + 1e-6)
