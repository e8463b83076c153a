"""End to end, for real: ``examples/run_torch.py --trace-dir`` trains on 2 CPU processes
(gloo) under the PyTorch profiler, ``cpsched import-trace`` reads the traces, the measured
schedule validates (durations as measured, no clock skew: both ranks share this host's
clock), and the derived instance solves to a proven optimum.  Skipped without torch.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cpsched import load_instance, run_schedule, solve, validate
from cpsched.cli.app import app
from cpsched.instance import Instance
from cpsched.model import Kind, Schedule
from cpsched.trace import import_trace

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "run_torch.py"


def _traced_run(tmp_path: Path, sched: Schedule) -> Path:
    pytest.importorskip("torch", reason="the real run needs torch (the torch extra)")
    path = tmp_path / "schedule.json"
    sched.to_json(path)
    traces = tmp_path / "traces"
    proc = subprocess.run([sys.executable, str(EXAMPLE), str(path), "--steps", "2",
                           "--trace-dir", str(traces)], capture_output=True, text=True,
                          timeout=150, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert proc.stdout.startswith("OK")
    assert sorted(p.name for p in traces.iterdir()) == ["rank0.json", "rank1.json",
                                                         "trace-meta.json"]
    meta = json.loads((traces / "trace-meta.json").read_text())
    assert meta["ranks"] == 2 and meta["profiled_step"] == 1
    return traces


def _check_measured(traces: Path, sched: Schedule) -> Instance:
    """The library's view: shape, alignment, validation, replay, optimum."""
    run = import_trace([traces])
    inst = run.instance
    src = sched.instance
    assert (inst.p, inst.v, inst.m, inst.placement, inst.split_backward) == (
        src.p, src.v, src.m, src.placement, src.split_backward)
    assert run.raw.same_clock and run.aligned.mode == "none"
    assert run.aligned.offsets == [0.0, 0.0]
    assert run.aligned.skew == [], run.aligned.skew
    assert run.violations == []
    lagless = inst.replace(**{"costs.p2p_latency": 0})
    assert validate(run.measured, lagless, durations="as-given") == []
    assert run.measured.orders() == sched.orders()  # what ran is the schedule given
    assert len(run.measured.actions) == len(sched.actions)
    assert all(x > 0 for x in inst.forward)
    assert run.replay.orders() == sched.orders() and validate(run.replay) == []
    res = solve(inst, time_limit=None, workers=1)
    assert res.status == "OPTIMAL" and validate(res.schedule) == []
    assert res.makespan <= run.replay.makespan + 1e-9
    return inst


def test_real_1f1b_trace_imports_validates_and_solves(tmp_path: Path) -> None:
    inst = Instance.from_dict({"name": "e2e", "pipeline": {"devices": 2, "microbatches": 4},
                               "costs": {"forward": 1, "backward": 2}})
    sched = run_schedule("1f1b", inst)
    traces = _traced_run(tmp_path, sched)
    _check_measured(traces, sched)
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["import-trace", str(traces), "--out", str(out),
                                   "--no-solve"])
    assert res.exit_code == 0, res.output
    assert "clocks: one host, kept as read" in res.output
    assert "step time: measured" in res.output and "model error" in res.output
    derived = load_instance(out / "traces.toml")
    assert derived.p == 2 and derived.backward_input == (0, 0)
    measured = Schedule.from_json(out / "traces.json")
    assert measured.method == "measured" and (out / "traces.png").stat().st_size > 0


def test_real_dualpipev_trace_with_pairs_and_split_backward(tmp_path: Path) -> None:
    inst = Instance.from_dict({
        "name": "e2e-v", "pipeline": {"devices": 2, "stages_per_device": 2, "microbatches": 4,
                                      "placement": "v", "split_backward": True},
        "costs": {"forward": 2, "backward_input": 2, "backward_weight": 1,
                  "overlap_forward_backward": 3}})
    sched = run_schedule("dualpipev", inst)
    assert {a.kind for a in sched.actions} == {Kind.F, Kind.B, Kind.I, Kind.W}
    traces = _traced_run(tmp_path, sched)
    derived = _check_measured(traces, sched)
    assert derived.overlap_forward_backward is not None
