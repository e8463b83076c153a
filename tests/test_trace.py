"""``cpsched import-trace`` on traces written here: Megatron-LM timer files (VPP 1 and 2),
PyTorch profiler Chrome traces (synthetic, in the runtime's ``PP:`` naming), clock alignment,
skew, derived costs, the validator's ``durations="as-given"`` mode, and the errors.

The traces are made from schedules cpsched simulates on known costs, so the derived instance
must give those costs back exactly and the measured order, replayed, the measured step time.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cpsched import run_schedule, solve, validate
from cpsched.cli.app import app
from cpsched.instance import Instance, load_instance
from cpsched.model import Kind, Schedule
from cpsched.trace import TraceError, import_trace, read_trace
from cpsched.trace.align import align
from cpsched.trace.chrome import parse_action_name
from cpsched.trace.shape import pipeline_shape

runner = CliRunner()


def instance(p: int, v: int, m: int, latency: float, split: bool = False,
             placement: str = "loop") -> Instance:
    costs: dict = {"forward": 1, "p2p_latency": latency}
    costs |= {"backward_input": 1, "backward_weight": 0.5} if split else {"backward": 2}
    return Instance.from_dict({"name": "x", "pipeline": {
        "devices": p, "stages_per_device": v, "microbatches": m, "placement": placement,
        "split_backward": split}, "costs": costs})


# --------------------------------------------------------------------------- Megatron
def write_megatron(folder: Path, sched: Schedule, offsets: dict[int, float] | None = None,
                   tp_copies: int = 1) -> Path:
    """The schedule as Megatron timer files (docs/trace.md), rank r's clock shifted by
    ``offsets[r]`` ms."""
    inst = sched.instance
    p, v = inst.p, inst.v
    folder.mkdir(parents=True, exist_ok=True)
    for r in range(p):
        events: dict[str, float] = {}
        for a in sched.actions:
            if a.device != r:
                continue
            name = "forward" if a.kind == Kind.F else "backward"
            key = f"{name}-{a.microbatch}" if v == 1 else f"{name}-{a.stage // p}-{a.microbatch}"
            shift = (offsets or {}).get(r, 0.0) + 100.0
            events[f"{key}-start"] = a.start + shift
            events[f"{key}-end"] = a.end + shift
        for t in range(tp_copies):
            g = r * tp_copies + t
            (folder / f"event_times_PP{p}_VPP{v}_TPxCPxDP_rank_{t}_pp_rank_{r}_rank_{g}.json"
             ).write_text(json.dumps(events), encoding="utf-8")
    return folder


def test_megatron_pp_gives_back_costs_latency_and_step(tmp_path: Path) -> None:
    sched = run_schedule("1f1b", instance(2, 1, 4, 0.5))
    assert sched.makespan == 17
    run = import_trace([write_megatron(tmp_path / "t", sched, tp_copies=2)], name="meg")
    inst = run.instance
    assert (inst.p, inst.v, inst.m, inst.placement, inst.split_backward) == (2, 1, 4, "loop",
                                                                            False)
    assert inst.forward == (1, 1) and inst.backward == (2, 2) and inst.p2p_latency == 0.5
    assert run.aligned.mode == "deps" and run.aligned.offsets == [0.0, 0.0]
    assert run.aligned.skew == [] and run.violations == []
    assert run.measured.makespan == 17 and run.replay.makespan == 17
    assert [(a.start, a.end) for a in run.measured.actions] == [
        (a.start, a.end) for a in sched.actions]
    assert validate(run.measured) == []  # the costs are exact, so even the plain rules hold
    assert any("TPxCPxDP ranks > 0" in n for n in run.notes)
    res = solve(inst, time_limit=None, workers=1)
    # m (F + B) + (p - 1)(F + B) + 2 (p - 1) L = 12 + 3 + 1: the per-device bound, reached
    assert res.status == "OPTIMAL" and res.makespan == 16 and validate(res.schedule) == []


def test_megatron_vpp_and_clock_offset_recovered(tmp_path: Path) -> None:
    sched = run_schedule("interleaved-1f1b", instance(2, 2, 4, 0.25))
    folder = write_megatron(tmp_path / "t", sched, offsets={1: 1234.5})
    run = import_trace([folder])
    assert run.shape.v == 2 and run.instance.placement == "loop"
    assert run.instance.forward == (1,) * 4 and run.instance.p2p_latency == 0.25
    assert run.aligned.offsets == [0.0, -1234.5]
    assert "round trip" in run.aligned.why[1]
    assert run.measured.makespan == sched.makespan == run.replay.makespan
    assert run.violations == [] and run.aligned.skew == []


def test_skew_is_reported_with_its_size(tmp_path: Path) -> None:
    sched = run_schedule("1f1b", instance(2, 1, 4, 0.5))
    folder = write_megatron(tmp_path / "t", sched, offsets={1: -0.75})
    run = import_trace([folder], align_mode="none")
    assert run.aligned.mode == "none"
    # 1F0, 1F2, 1F3 waited for their input: 0.5 - 0.75 (1F1 waited for its device)
    assert [(str(g.consumer), g.gap) for g in run.aligned.skew] == [
        ("1F0", -0.25), ("1F2", -0.25), ("1F3", -0.25)]
    assert all(g.source == 0 and g.target == 1 for g in run.aligned.skew)
    assert run.violations == []  # the validator's dependency lines are exactly the skew
    res = runner.invoke(app, ["import-trace", str(folder), "--align", "none", "--no-solve",
                              "--no-plot", "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output  # skew is reported, not an error
    assert ("clock skew: 3 dependencies look violated after alignment, up to 0.250000 ms "
            "(1F0 on device 1 starts before 0F0 on device 0 ends)") in res.output
    fixed = import_trace([folder], align_mode="deps")  # the round trip finds the offset
    assert fixed.aligned.skew == [] and fixed.aligned.offsets == [0.0, 0.75]
    assert fixed.instance.p2p_latency == 0.5


def test_megatron_cli_writes_instance_schedule_and_reports(tmp_path: Path) -> None:
    sched = run_schedule("1f1b", instance(2, 1, 4, 0.5))
    folder = write_megatron(tmp_path / "run1", sched)
    out = tmp_path / "out"
    args = ["import-trace", str(folder), "--out", str(out), "--no-solve", "--no-plot"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "step time: measured 17.000 ms" in res.output
    assert "simulated with the measured costs 17.000 ms (model error +0.0%" in res.output
    derived = load_instance(out / "run1.toml")
    assert derived.forward == (1, 1) and derived.p2p_latency == 0.5
    measured = Schedule.from_json(out / "run1.json")
    assert measured.method == "measured" and measured.makespan == 17
    again = runner.invoke(app, args + ["--set", "memory.limit=2"])
    assert again.exit_code == 0 and (out / "run1-2.toml").exists()  # never overwritten
    assert load_instance(out / "run1-2.toml").memory_limit == 2


def test_cli_memory_limit_broken_by_the_measured_run_exits_1(tmp_path: Path) -> None:
    sched = run_schedule("gpipe", instance(2, 1, 4, 0.5))
    folder = write_megatron(tmp_path / "t", sched)
    res = runner.invoke(app, ["import-trace", str(folder), "--out", str(tmp_path / "o"),
                              "--no-solve", "--no-plot", "--memory-limit", "2", "-q"])
    assert res.exit_code == 1 and "memory limit 2" in res.output


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: d.pop("backward-3-end"), r"key 'backward-3-end': has 'backward-3-start' but "
     r"not this one \(unmatched start/end\)"),
    (lambda d: d.update({"recompute-0-start": 1.0}), r"key 'recompute-0-start': unknown event"),
    (lambda d: d.update({"forward-0-start": "x"}), r"must be a finite number"),
    (lambda d: [d.pop(k) for k in ("forward-3-start", "forward-3-end")],
     r"key 'forward-3-start': missing: microbatches 0..3 appear"),
])
def test_megatron_errors_name_file_and_entry(tmp_path: Path, edit, message: str) -> None:  # noqa: ANN001
    sched = run_schedule("1f1b", instance(2, 1, 4, 0.5))
    folder = write_megatron(tmp_path / "t", sched)
    f = next(folder.glob("*pp_rank_1_*.json"))
    data = json.loads(f.read_text())
    edit(data)
    f.write_text(json.dumps(data))
    with pytest.raises(TraceError, match=message) as info:
        read_and_analyse(folder)
    assert info.value.file == str(f)


def read_and_analyse(folder: Path):  # noqa: ANN201
    return import_trace([folder])


def test_megatron_missing_rank_and_wrong_sizes(tmp_path: Path) -> None:
    sched = run_schedule("1f1b", instance(2, 1, 4, 0.5))
    folder = write_megatron(tmp_path / "t", sched)
    next(folder.glob("*pp_rank_1_*.json")).unlink()
    with pytest.raises(TraceError, match=r"pp_rank 1 missing"):
        read_trace([folder])
    vfolder = write_megatron(tmp_path / "v", run_schedule("interleaved-1f1b",
                                                          instance(2, 2, 4, 0)))
    f = next(vfolder.glob("*pp_rank_0_*.json"))
    data = json.loads(f.read_text()) | {"forward-2-0-start": 0.0}
    f.write_text(json.dumps(data))
    with pytest.raises(TraceError, match=r"chunk 2: VPP2 has chunks 0..1"):
        read_trace([vfolder])
    (vfolder / "event_times_PP2_VPP2_bad.json").write_text("{}")
    with pytest.raises(TraceError, match=r"not a Megatron timer file name"):
        read_trace([vfolder])


# --------------------------------------------------------------------------- Chrome
def chrome_trace(sched: Schedule, rank: int, steps: int = 1, shift: float = 0.0,
                 wait: float = 0.3) -> dict:
    """A PyTorch-profiler-like trace of ``rank``: per action a ``PP:`` range (µs) that
    starts ``wait`` ms before the action when its input comes from another rank, a
    ``PP:{s}RECV_F{i}`` range holding a ``gloo:recv`` that ends when the action starts."""
    inst = sched.instance
    events: list[dict] = []
    period = sched.makespan + 5
    for k in range(steps):
        for a in sched.actions:
            if a.device != rank:
                continue
            t0 = (a.start + k * period) * 1000 + shift
            t1 = (a.end + k * period) * 1000 + shift
            remote = (a.kind == Kind.F and a.stage > 0) or (
                a.kind == Kind.B and a.stage < inst.num_stages - 1)
            begin = t0 - wait * 1000 if remote else t0
            events.append({"ph": "X", "cat": "user_annotation", "name": f"PP:{a.action}",
                           "ts": begin, "dur": t1 - begin, "pid": rank, "tid": 1})
            if remote:
                kind = "RECV_F" if a.kind == Kind.F else "RECV_B"
                r0 = begin - 50
                events.append({"ph": "X", "name": f"PP:{a.stage}{kind}{a.microbatch}",
                               "ts": r0, "dur": 20, "pid": rank, "tid": 1})
                events.append({"ph": "X", "name": "gloo:recv", "ts": r0 + 5,
                               "dur": t0 - r0 - 5, "pid": rank, "tid": 1})
        events.append({"ph": "X", "name": f"PP:{rank}REDUCE_GRAD",
                       "ts": (sched.makespan + k * period) * 1000 + shift, "dur": 7,
                       "pid": rank, "tid": 1})
    return {"schemaVersion": 1, "host_name": "h", "traceEvents": events,
            "distributedInfo": {"backend": "gloo", "rank": rank, "world_size": inst.p}}


def write_chrome(folder: Path, sched: Schedule, **kw) -> Path:  # noqa: ANN003
    folder.mkdir(parents=True, exist_ok=True)
    for r in range(sched.instance.p):
        (folder / f"rank{r}.json").write_text(json.dumps(chrome_trace(sched, r, **kw)))
    return folder


def test_action_names_of_the_runtime() -> None:
    assert [str(a) for a in parse_action_name("12F3", "f", "e")[0]] == ["12F3"]
    assert parse_action_name("1RECV_B2", "f", "e") == ((), ("RECV_B", 1, 2))
    assert parse_action_name("0REDUCE_GRAD", "f", "e") == ((), None)
    pair, _ = parse_action_name("(3F2;0B0)OVERLAP_F_B", "f", "e")
    assert [str(a) for a in pair] == ["3F2", "0B0"]
    with pytest.raises(TraceError, match=r"unknown pipeline action 'PP:1X0'"):
        parse_action_name("1X0", "f", "e")
    with pytest.raises(TraceError, match=r"one F and one B or I"):
        parse_action_name("(0F1;1F0)OVERLAP_F_B", "f", "e")


def test_chrome_waits_are_cut_and_costs_exact(tmp_path: Path) -> None:
    sched = run_schedule("1f1b", instance(2, 1, 4, 0.5))
    folder = write_chrome(tmp_path / "t", sched, steps=2)
    raw = read_trace([folder])
    assert raw.source == "pytorch-profiler" and raw.same_clock and raw.step == (1, 2)
    run = import_trace([folder])
    assert run.aligned.mode == "none"
    assert run.instance.forward == (1, 1) and run.instance.backward == (2, 2)
    assert run.instance.p2p_latency == 0.5
    assert run.measured.makespan == 17 and run.replay.makespan == 17
    waits = {str(a): w for a, w in run.aligned.waited.items() if w}
    assert waits and set(waits.values()) == {0.3} and "1F0" in waits and "0F0" not in waits
    assert run.raw.overhead == {0: 4 * 20 + 7, 1: 4 * 20 + 7}  # RECV + REDUCE_GRAD, µs
    first = import_trace([folder], step=0)
    assert first.measured.makespan == 17


def test_chrome_offset_clocks_align_on_dependencies(tmp_path: Path) -> None:
    sched = run_schedule("1f1b", instance(2, 1, 4, 0.5))
    folder = tmp_path / "t"
    folder.mkdir()
    for r in range(2):
        doc = chrome_trace(sched, r, shift=777_000.0 * r)
        doc["host_name"] = f"host{r}"
        (folder / f"trace_rank_{r}.json").write_text(json.dumps(doc))
    run = import_trace([folder])
    assert run.aligned.mode == "deps" and run.aligned.offsets == [0.0, -777.0]
    assert run.measured.makespan == 17 and run.aligned.skew == []


def _chrome_error(tmp_path: Path, mutate) -> TraceError:  # noqa: ANN001
    sched = run_schedule("1f1b", instance(2, 1, 4, 0.5))
    folder = write_chrome(tmp_path / "t", sched)
    f = folder / "rank1.json"
    doc = json.loads(f.read_text())
    mutate(doc, folder)
    f.write_text(json.dumps(doc))
    with pytest.raises(TraceError) as info:
        import_trace([folder])
    return info.value


def test_chrome_errors(tmp_path: Path) -> None:
    def rename(doc, _):  # noqa: ANN001, ANN202
        doc["traceEvents"][0]["name"] = "PP:1Q0"

    e = _chrome_error(tmp_path / "a", rename)
    assert e.file.endswith("rank1.json") and e.entry.startswith("traceEvents[0]")
    assert "unknown pipeline action 'PP:1Q0'" in str(e)

    def unmatched(doc, _):  # noqa: ANN001, ANN202
        doc["traceEvents"].append({"ph": "B", "name": "PP:1F0", "ts": 1, "pid": 1, "tid": 1})

    assert "without its end" in str(_chrome_error(tmp_path / "b", unmatched))

    def partial(doc, _):  # noqa: ANN001, ANN202
        doc["traceEvents"].append(dict(doc["traceEvents"][0]))

    assert "partial or mixed step" in str(_chrome_error(tmp_path / "c", partial))

    def drop_rank0(doc, folder):  # noqa: ANN001, ANN202
        (folder / "rank0.json").unlink()

    assert "is the trace of a rank missing" in str(_chrome_error(tmp_path / "d", drop_rank0))

    def not_json(doc, folder):  # noqa: ANN001, ANN202
        doc.clear()

    assert "traceEvents: missing" in str(_chrome_error(tmp_path / "e", not_json))


def test_cli_bad_trace_is_one_line_exit_2(tmp_path: Path) -> None:
    sched = run_schedule("1f1b", instance(2, 1, 4, 0.5))
    folder = write_chrome(tmp_path / "t", sched)
    (folder / "rank1.json").write_text("{not json")
    res = runner.invoke(app, ["import-trace", str(folder), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and re.match(r"error: trace .*rank1\.json: not a JSON trace",
                                        lines[0]), res.output
    res = runner.invoke(app, ["import-trace", str(tmp_path / "nothing"), "--out",
                              str(tmp_path / "o")])
    assert res.exit_code == 2 and "no such file or directory" in res.output
    res = runner.invoke(app, ["import-trace", str(folder), "--step", "0"])
    assert res.exit_code == 2 and "--step = 0" in res.output


# --------------------------------------------------------------------------- pieces
def test_validate_as_given_checks_all_but_durations() -> None:
    sched = run_schedule("1f1b", instance(2, 1, 4, 0.5))
    rows = [a._replace(end=a.end + 0.1) if a.device == 0 and a.kind == Kind.F else a
            for a in sched.actions]
    stretched = Schedule(sched.instance, rows, method="x")
    assert any("lasts" in v for v in validate(stretched))
    as_given = validate(stretched, durations="as-given")
    assert as_given and not any("lasts" in v for v in as_given)  # overlaps/deps remain
    assert validate(sched, durations="as-given") == []
    with pytest.raises(ValueError, match="as-given"):
        validate(sched, durations="measured")


def test_shape_and_placement_from_a_v_schedule(tmp_path: Path) -> None:
    sched = run_schedule("zbv", instance(2, 2, 4, 0.25, split=True, placement="v"))
    run = import_trace([write_megatron_like_chrome(tmp_path, sched)])
    shape = run.shape
    assert (shape.p, shape.v, shape.placement, shape.split_backward) == (2, 2, "v", True)
    assert run.instance.backward_input == (1,) * 4 and run.instance.backward_weight == (0.5,) * 4
    assert run.measured.makespan == sched.makespan == run.replay.makespan
    again = align(pipeline_shape(run.raw), 1e-3, "deps")
    assert again.step_ms == sched.makespan


def write_megatron_like_chrome(tmp_path: Path, sched: Schedule) -> Path:
    """A Chrome trace without receive ranges (waits unknown), for shapes beyond 1F1B."""
    folder = tmp_path / "c"
    folder.mkdir()
    for r in range(sched.instance.p):
        events = [{"ph": "X", "name": f"PP:{a.action}", "ts": a.start * 1000,
                   "dur": (a.end - a.start) * 1000, "pid": r, "tid": 1}
                  for a in sched.actions if a.device == r]
        (folder / f"rank{r}.json").write_text(json.dumps({"traceEvents": events}))
    return folder


def test_validate_command_durations_as_given(tmp_path: Path) -> None:
    """``cpsched validate --durations as-given`` accepts a measured-style file whose last
    action ran shorter than the instance's cost; the default rejects it naming the action."""
    inst = instance(2, 1, 4, 0.0)
    sched = run_schedule("1f1b", inst)
    doc = json.loads(sched.to_json())
    for key in ("makespan", "gap", "bubble_fraction", "peak_memory"):
        doc.pop(key, None)
    last = max(doc["actions"], key=lambda a: a["end"])
    last["end"] -= 0.5  # measured: faster than the instance's cost
    path = tmp_path / "measured.json"
    path.write_text(json.dumps(doc))
    toml = tmp_path / "inst.toml"
    toml.write_text('name = "t"\n[pipeline]\ndevices = 2\nmicrobatches = 4\n'
                    "[costs]\nforward = 1\nbackward = 2\n")
    strict = runner.invoke(app, ["validate", str(toml), str(path)])
    assert strict.exit_code == 1 and "lasts 1.5; its duration is 2" in strict.output
    given = runner.invoke(app, ["validate", str(toml), str(path), "--durations", "as-given"])
    assert given.exit_code == 0, given.output
    bad = runner.invoke(app, ["validate", str(toml), str(path), "--durations", "measured"])
    assert bad.exit_code == 2 and "--durations = 'measured'" in bad.output
