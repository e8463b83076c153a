"""Fuzzing the command line (issue 12): random instance files, schedule files and flags.

Whatever the input, a command exits 0, 1 or 2 with no traceback, writes nothing outside
its output directory (inputs untouched, nothing in the working directory), and leaves no
half-written file: no temporary file remains, every JSON parses, every PNG is complete.
Each example runs in-process on tiny instances with a short deterministic CP-SAT limit.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from cpsched.cli import app
from cpsched.outputs import leftover_temps

runner = CliRunner()
#: ``CPSCHED_FUZZ_EXAMPLES=2000 pytest tests/test_fuzz_cli.py`` searches longer, with random
#: examples; by default the examples are fixed (derandomized) and the file runs in ~15 s.
DEEP = int(os.environ.get("CPSCHED_FUZZ_EXAMPLES", "0"))
SETTINGS = settings(max_examples=DEEP or 120, deadline=None, derandomize=not DEEP,
                    database=None, suppress_health_check=[HealthCheck.too_slow])

ODD = [0, -1, 2.5, 1.2345, 0.0001, 1.23456789, 1e15, 1e300, math.nan, math.inf, "2", True,
       [1, 2], 10**6, "a\x00b", "a\x1bb", "a\nb", "..", ".", "a/b", "x" * 101, ""]
ODD_KEYS = [("pipeline", "devices"), ("pipeline", "stages_per_device"),
            ("pipeline", "microbatches"), ("pipeline", "placement"), ("costs", "forward"),
            ("costs", "backward"), ("costs", "p2p_latency"),
            ("costs", "overlap_forward_backward"), ("memory", "activation"),
            ("memory", "limit"), ("memory", "released_by_input"), (None, "name"),
            (None, "colour")]


@st.composite
def instances(draw: st.DrawFn) -> dict[str, Any]:
    """An instance table: small and valid three times in four, else with one field set to
    a wrong or extreme value."""
    split = draw(st.booleans())
    placement = draw(st.sampled_from(["loop", "loop", "v", "bidirectional"]))
    v = {"loop": draw(st.sampled_from([1, 2])), "v": 2, "bidirectional": 1}[placement]
    even = placement == "bidirectional"
    pipeline = {"devices": draw(st.sampled_from([2, 4] if even else [1, 2, 3, 4])),
                "stages_per_device": v,
                "microbatches": draw(st.sampled_from([2, 4] if even else [1, 2, 4, 6])),
                "placement": placement, "split_backward": split}
    small = st.sampled_from([1, 2, 3, 2.5, 1.2345, 1.23456789])
    costs: dict[str, Any] = {"forward": draw(small),
                             "p2p_latency": draw(st.sampled_from([0, 0, 0.5, 0.0001]))}
    if split:
        costs.update(backward_input=draw(small), backward_weight=draw(small))
    else:
        costs["backward"] = draw(small)
    if draw(st.integers(0, 3)) == 0:  # in range: max(F, B) .. F + B for uniform costs
        f, b = costs["forward"], costs.get("backward") or (costs["backward_input"]
                                                           + costs["backward_weight"])
        costs["overlap_forward_backward"] = max(f, b) + draw(st.sampled_from([0, 0.5])) * min(f, b)
    memory: dict[str, Any] = {"activation": draw(st.sampled_from([1, 1, 0.5]))}
    limit = draw(st.sampled_from([None, None, 4, 8, 16]))
    if limit is not None:
        memory["limit"] = limit
    data = {"name": draw(st.sampled_from(["f", "f", "run 1", "é" * 3])), "pipeline": pipeline,
            "costs": costs, "memory": memory}
    if draw(st.integers(0, 3)) == 0:
        section, key = draw(st.sampled_from(ODD_KEYS))
        (data if section is None else data[section])[key] = draw(st.sampled_from(ODD))
    return data


def _toml(data: dict[str, Any]) -> str:
    try:
        return tomli_w.dumps(data)
    except (TypeError, ValueError):
        return "name = [\n"  # not TOML: the command must say so


GOOD_FLAGS = [["-t", "2"], ["-w", "2"], ["--seed", "7"], ["--param", "relative_gap_limit=0.5"],
              ["--param", "search_branching=FIXED_SEARCH"], ["--set", "pipeline.microbatches=3"],
              ["-o", "out/a"], ["-q"], ["--plot"], ["--name", "other"]]
BAD_FLAGS = [
    ["-t", "nan"], ["-t", "0"], ["-t", "abc"], ["-w", "0"], ["-w", "5000"],
    ["--seed", "99999999999"], ["--param", "relative_gap_limit=abc"],
    ["--param", "restart_algorithms=1"], ["--param", "bogus=1"], ["--param", "num_workers=3"],
    ["--set", 'name=".."'], ["--set", "nonsense"], ["--set", "costs.forward=[1, 2]"],
    ["--memory-limit", "nan"], ["-o", "inputs/instance.toml"], ["--name", "a/b"]]
SOLVE_FLAGS = st.lists(st.sampled_from(GOOD_FLAGS * 5 + BAD_FLAGS), max_size=3)


def _flags(chosen: list[list[str]]) -> list[str]:
    out = ["-w", "1", "--param", "max_deterministic_time=0.2"]
    plot = False
    for f in chosen:
        if f == ["--plot"]:
            plot = True
        else:
            out += f
    return out + ([] if plot else ["--no-plot"])


@contextlib.contextmanager
def workdir() -> Iterator[Path]:
    """A fresh working directory with ``inputs/`` and ``out/``, entered."""
    old = Path.cwd()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "inputs").mkdir()
        (root / "out").mkdir()
        os.chdir(root)
        try:
            yield root
        finally:
            os.chdir(old)


def _digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((root / "inputs").rglob("*")) if p.is_file()}


def _check(root: Path, args: list[str], before: dict[str, str]) -> None:
    """Exit code, no traceback, nothing outside out/, no half-written file."""
    r = runner.invoke(app, args)
    where = f"cpsched {' '.join(map(repr, args))}:\n{r.output}"
    assert r.exit_code in (0, 1, 2), where
    assert r.exception is None or isinstance(r.exception, SystemExit), where
    assert "Traceback" not in r.output, where
    assert sorted(p.name for p in root.iterdir()) == ["inputs", "out"], where
    assert _digest(root) == before, where  # inputs untouched
    for d in [root / "out", *(p for p in (root / "out").rglob("*") if p.is_dir())]:
        assert leftover_temps(d) == [], where
    for p in (root / "out").rglob("*"):
        if p.suffix == ".json":
            assert json.loads(p.read_text())["format"] == "cpsched.schedule/1", where
        elif p.suffix == ".png":
            data = p.read_bytes()
            assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[-8:-4] == b"IEND", where
        elif p.suffix in (".csv", ".md"):
            assert p.read_text().endswith("\n"), where


@SETTINGS
@given(inst=instances(), command=st.sampled_from(["solve", "solve", "simulate"]),
       flags=SOLVE_FLAGS, schedule=st.sampled_from(["1f1b", "interleaved-1f1b", "gpipe"]))
def test_fuzz_instances_and_flags(inst: dict, command: str, flags: list[list[str]],
                                  schedule: str) -> None:
    with workdir() as root:
        (root / "inputs" / "instance.toml").write_text(_toml(inst), encoding="utf-8")
        args = [command, "inputs/instance.toml"]
        if command == "solve":
            args += _flags(flags)
        else:
            args += ["-s", schedule, *_simulate_args(_flags(flags))]
        _check(root, args, _digest(root))


def _simulate_args(args: list[str]) -> list[str]:
    """Drop the solve-only options (and their values) from a simulate command line."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-t", "-w", "--seed", "--param"):
            skip = True
            continue
        out.append(a)
    return out


MUTATIONS = st.sampled_from([
    ("action", "end", math.nan), ("action", "start", "5"), ("action", "start", -3),
    ("action", "device", 10**40), ("action", "stage", 1.0), ("action", "kind", "X"),
    ("action", "overlap", True), ("action", "microbatch", None), ("top", "status", "OPTIMAL"),
    ("top", "status", "WHATEVER"), ("top", "lower_bound", 10**6), ("top", "lower_bound", "abc"),
    ("top", "makespan", 1), ("top", "gap", -1), ("top", "peak_memory", [1]),
    ("top", "format", "other"), ("top", "actions", "none"), ("top", "instance", {"name": 1}),
    ("raw", "deep", None), ("raw", "bigint", None), ("raw", "binary", None),
    ("none", "", None)])


@SETTINGS
@given(mutations=st.lists(MUTATIONS, min_size=1, max_size=3),
       index=st.integers(0, 10_000),
       command=st.sampled_from(["validate", "validate", "export", "export-out"]))
def test_fuzz_schedule_files(mutations: list[tuple[str, str, Any]], index: int,
                             command: str) -> None:
    from cpsched.instance import load_instance
    from cpsched.schedules import run_schedule

    inst_path = Path(__file__).resolve().parents[1] / "instances" / "article-interleaved.toml"
    data = run_schedule("interleaved-1f1b", load_instance(inst_path)).to_dict()
    raw = None
    for where, key, value in mutations:
        if where == "action" and isinstance(data["actions"], list):
            data["actions"][index % len(data["actions"])][key] = value
        elif where == "top":
            data[key] = value
        elif where == "raw":
            raw = {"deep": b'{"format": "cpsched.schedule/1", "x": ' + b"[" * 50_000,
                   "bigint": b'{"makespan": ' + b"9" * 5000 + b"}",
                   "binary": bytes(range(256))}[key]
    with workdir() as root:
        sch = root / "inputs" / "s.json"
        sch.write_bytes(raw if raw is not None else json.dumps(data).encode())
        if command == "validate":
            args = ["validate", str(inst_path), "inputs/s.json"]
        else:
            args = ["export", "inputs/s.json", *(["--output", "out/x.csv"]
                                                 if command == "export-out" else [])]
        _check(root, args, _digest(root))


@settings(max_examples=DEEP // 10 or 10, deadline=None, derandomize=not DEEP, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(cells=st.lists(st.sampled_from(["0F0", "1B0", "0F1", "x", "(0F0;1B0)OVERLAP_F_B", "",
                                       "1F0", "é", "0B0", "0B1", "1F1", "1B1"]),
                      min_size=1, max_size=8),
       stem=st.sampled_from(["ok", "..", "a/b", "x" * 120, "comp"]))
def test_fuzz_import_and_compare(cells: list[str], stem: str) -> None:
    with workdir() as root:
        inst = {"name": "t", "pipeline": {"devices": 2, "microbatches": 2},
                "costs": {"forward": 1, "backward": 2}}
        (root / "inputs" / "t.toml").write_text(tomli_w.dumps(inst))
        half = len(cells) // 2
        (root / "inputs" / "x.csv").write_text(",".join(cells[:half]) + "\n"
                                               + ",".join(cells[half:]) + "\n")
        before = _digest(root)
        _check(root, ["import-torch", "inputs/x.csv", "-i", "inputs/t.toml", "--no-plot"],
               before)
        _check(root, ["compare", "inputs/t.toml", "-t", "2", "-j", "1", "--stem", stem, "-q"],
               before)
