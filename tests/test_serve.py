"""``cpsched serve`` without a browser: the form, the figures, the background jobs, hand
edits, the files offered for download, the app factory and the command (docs/serve.md).

Oracles: the shipped instances and the known values of docs/spec.md §6 (article example:
interleaved 1F1B 285; limit 6: optimum 325), the validator, and the CLI's own messages.
"""

from __future__ import annotations

import base64
import json
import logging
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cpsched import load_instance, run_schedule, validate
from cpsched.cli.app import app as cli
from cpsched.instance import InstanceError
from cpsched.model import Schedule, Status
from cpsched.serve import edit, form, views
from cpsched.serve.figures import block_rgb, gantt_figure, memory_at, memory_figure, metrics_row
from cpsched.serve.jobs import JobManager
from cpsched.serve.solve_ui import check_inputs, progress_text, summary

ROOT = Path(__file__).resolve().parents[1]
ARTICLE = ROOT / "instances" / "article-interleaved.toml"


def _cli_error(*args: str) -> str:
    res = CliRunner().invoke(cli, ["simulate", *args])
    assert res.exit_code == 2
    return res.output.strip().splitlines()[-1]


# ------------------------------------------------------------------------------ form
def test_default_form_is_the_article_example() -> None:
    inst = form.instance_from_values(form.DEFAULT_VALUES)
    assert (inst.p, inst.v, inst.m, inst.forward[0], inst.backward[0]) == (4, 2, 8, 5, 10)
    assert views.known(views.instance_key(inst), "interleaved-1f1b").makespan == 285


@pytest.mark.parametrize("text, value", [
    ("8", 8), (" 2.5 ", 2.5), ("[1, 2]", [1, 2]), ("1, 2, 3", [1, 2, 3]), ("", None),
    ("none", None), ("abc", "abc"), ("true", True)])
def test_parse_text_reads_like_set(text: str, value: Any) -> None:
    assert form.parse_text(text) == value


@pytest.mark.parametrize("field, text, cli", [
    ("devices", "0", "pipeline.devices=0"),
    ("forward", "-1", "costs.forward=-1"),
    ("microbatches", "abc", "pipeline.microbatches=abc"),
    ("released_by_input", "1.5", "memory.released_by_input=1.5"),
    ("limit", "0.5", "memory.limit=0.5"),
])
def test_a_wrong_field_gets_the_cli_message(field: str, text: str, cli: str) -> None:
    values = dict(form.DEFAULT_VALUES, **{field: text})
    with pytest.raises(InstanceError) as err:
        form.instance_from_values(values)
    assert form.field_of(err.value) == field
    flags = ["-p", "4", "-v", "2", "-m", "8", "--forward", "5", "--backward", "10"]
    assert _cli_error(*flags, "--set", cli) == f"error: instance: {err.value}"


def test_instance_wide_errors_and_the_group_size() -> None:
    values = dict(form.DEFAULT_VALUES, placement="v", stages_per_device="3")
    with pytest.raises(InstanceError) as err:
        form.instance_from_values(values)
    assert str(err.value) == ('pipeline.stages_per_device = 3: placement = "v" needs '
                              "stages_per_device = 2")
    with pytest.raises(InstanceError) as err:
        form.instance_from_values(dict(form.DEFAULT_VALUES, forward="0", backward="0"))
    assert form.field_of(err.value) is None  # "costs": next to no single field
    assert form.group_size({"group": ""}) is None and form.group_size({"group": "4"}) == 4
    with pytest.raises(InstanceError) as err:
        form.group_size({"group": "0"})
    assert form.field_of(err.value) == "group"


def test_per_stage_lists_and_split_backward() -> None:
    values = dict(form.DEFAULT_VALUES, stages_per_device="1", forward="1, 2, 3, 4",
                  split_backward=True, backward="", backward_input="2",
                  backward_weight="[1, 1, 1, 2]")
    inst = form.instance_from_values(values)
    assert inst.forward == (1, 2, 3, 4) and inst.backward == (3, 3, 3, 4)
    back = form.values_from_instance(inst)
    assert back["forward"] == "1, 2, 3, 4" and back["split_backward"] is True
    assert form.instance_from_values(back).to_dict() == inst.to_dict()


def test_the_url_carries_the_instance_and_the_selection() -> None:
    inst = load_instance(ROOT / "instances" / "hetero-latency.toml")
    values = form.values_from_instance(inst, group=None)
    query = form.query_from_values(values, ["1f1b", "gpipe"])
    back, selected = form.values_from_query(query, form.DEFAULT_VALUES)
    assert form.instance_from_values(back).to_dict() == inst.to_dict()
    assert selected == ["1f1b", "gpipe"]
    assert form.values_from_query("", form.DEFAULT_VALUES) == (form.DEFAULT_VALUES, None)
    assert form.values_from_query("?unknown=1", {"a": 1}) == ({"a": 1}, None)


def test_upload_reads_an_instance_file() -> None:
    path = ROOT / "instances" / "zb-split.toml"
    data = "data:application/toml;base64," + base64.b64encode(path.read_bytes()).decode()
    assert form.instance_from_upload(data, path.name).to_dict() == load_instance(path).to_dict()
    bad = "data:;base64," + base64.b64encode(b"[pipeline\n").decode()
    with pytest.raises(InstanceError) as err:
        form.instance_from_upload(bad, "x.toml")
    assert err.value.field == "instance file" and "valid TOML" in str(err.value)


# --------------------------------------------------------------------------- figures
def test_gantt_has_one_trace_per_kind_and_chunk_and_every_block() -> None:
    inst = load_instance(ARTICLE)
    sch = run_schedule("interleaved-1f1b", inst)
    fig = gantt_figure(sch, "x", highlight={"0B0"}, selected="1F0", marks=[(10.0, 1)])
    bars = [t for t in fig.data if t.type == "bar" and t.customdata is not None]
    assert sorted(t.name for t in bars) == ["B chunk 0", "B chunk 1", "F chunk 0",
                                            "F chunk 1"]
    assert sum(len(t.x) for t in bars) == len(sch.actions) == 128
    by_name = {c: (t, k) for t in bars for k, c in enumerate(t.customdata)}
    t, k = by_name["0B0"]
    assert (t.base[k], t.base[k] + t.x[k], t.y[k]) == (135, 145, 0)
    assert t.hovertext[k] == ("<b>0B0</b> backward<br>stage 0, microbatch 0<br>start 135, "
                              "end 145<br>device 0 holds 11 memory")
    frames = {t.name: t for t in fig.data if t.hoverinfo == "skip"}
    assert set(frames) == {"marked", "selected"}  # outlines that take no hover or click
    assert (frames["marked"].base[0], frames["marked"].marker.line.color) == (135, "#d62728")
    assert [s.type for s in fig.data].count("scatter") == 1  # the mark
    assert block_rgb("F", 0, 0, 2) != block_rgb("B", 0, 0, 2) != block_rgb("F", 0, 1, 2)


def test_hover_memory_is_what_the_device_holds_then() -> None:
    inst = load_instance(None, {"pipeline.devices": 4, "pipeline.microbatches": 8,
                                "costs.forward": 5, "costs.backward": 10})
    sch = run_schedule("1f1b", inst)
    held = dict(zip(((a.device, str(a.action)) for a in sch.actions), memory_at(sch),
                    strict=True))
    # 1F1B on device 0 runs p = 4 forwards before its first backward (docs/spec.md §6.1)
    assert [held[(0, f"0F{i}")] for i in range(4)] == [1, 2, 3, 4]
    assert max(memory_at(sch)) == max(sch.peak_memory) == 4


def test_overlapped_pairs_are_drawn_as_two_half_blocks() -> None:
    sch = run_schedule("dualpipe", load_instance(ROOT / "instances" / "dualpipe.toml"))
    fig = gantt_figure(sch)
    paired = [(t.name[0], w, o) for t in fig.data if t.customdata is not None
              for w, o, h in zip(t.width, t.offset, t.hovertext, strict=True)
              if "overlapped pair" in h]
    n_pairs = sum(a.overlap is not None for a in sch.actions) // 2
    assert len(paired) == 2 * n_pairs > 0
    frame, = (t for t in fig.data if t.name == "pairs")
    assert len(frame.base) == n_pairs  # one frame around each pair
    assert {(k, w, o) for k, w, o in paired} <= {("F", 0.4, -0.4), ("B", 0.4, 0.0),
                                                ("I", 0.4, 0.0)}


def test_memory_figure_shows_the_limit_and_overruns() -> None:
    inst = load_instance(ROOT / "instances" / "article-memory6.toml")
    sch = run_schedule("interleaved-1f1b", inst)
    bad = validate(sch)
    marks = edit.memory_marks(bad)
    assert marks and all(d in range(inst.p) for _, d in marks)
    fig = memory_figure(sch, marks)
    assert len(fig.data) == inst.p + 1 and fig.layout.shapes[0].y0 == 6
    row = metrics_row(sch, bad)
    assert (row["makespan"], row["fits"], row["status"], row["gap"]) == \
        ("285", "no", "OVER LIMIT", "-")


def test_a_big_gantt_is_a_few_traces_and_fast() -> None:
    inst = load_instance(None, {"pipeline.devices": 16, "pipeline.stages_per_device": 2,
                                "pipeline.microbatches": 64, "costs.forward": 5,
                                "costs.backward": 10})
    sch = views.known(views.instance_key(inst), "interleaved-1f1b")
    t0 = time.perf_counter()
    fig = gantt_figure(sch, "big")
    seconds = time.perf_counter() - t0
    assert len(fig.data) == 4 and sum(len(t.x) for t in fig.data) == 4096
    assert seconds < 3.0  # measured 0.07-0.17 s; generous for a busy machine


# ------------------------------------------------------------------------------ jobs
def test_a_job_solves_to_the_known_optimum() -> None:
    jobs = JobManager()
    inst = load_instance(ROOT / "instances" / "article-memory6.toml")
    job_id = jobs.start(inst, time_limit=None, workers=1)  # in-process, deterministic
    job = jobs.wait(job_id, 120)
    assert job is not None and job.state == "done"
    assert (job.schedule.status, job.schedule.makespan) == (Status.OPTIMAL, 325)
    assert validate(job.schedule) == []
    status = jobs.status(job_id)
    assert (status["incumbent"], status["bound"]) == (325, 325)
    line, row = summary(job)
    assert line.startswith("OPTIMAL: makespan 325, lower bound 325, gap 0.0%")
    assert "best known schedule that fits: list 340" in line and "4.4% shorter" in line
    assert row["schedule"] == "cpsat" and row["fits"] == "yes"
    assert progress_text(status).startswith("finished")


class _Handle:
    def __init__(self) -> None:
        self.stopped = threading.Event()

    def stop_search(self) -> None:
        self.stopped.set()


def test_cancel_stops_the_search_and_keeps_the_best() -> None:
    inst = load_instance(ARTICLE)
    best = run_schedule("interleaved-1f1b", inst)
    handle = _Handle()

    class Result:
        schedule, makespan, lower_bound, warm_start = best, best.makespan, None, None

    def fake(_inst: Any, *, on_solver: Any, on_progress: Any, **_kw: Any) -> Any:
        on_progress(0.1, 290.0, 280.0)
        on_solver(handle)
        assert handle.stopped.wait(30)
        return Result()

    jobs = JobManager(fake)
    job_id = jobs.start(inst, time_limit=5, workers=1)
    assert jobs.cancel(job_id)
    job = jobs.wait(job_id, 30)
    assert job.state == "cancelled" and job.schedule is best
    assert not jobs.cancel(job_id)  # no longer running
    assert jobs.status("nope") is None


def test_a_failed_solve_is_logged_and_one_line(caplog: pytest.LogCaptureFixture) -> None:
    def boom(*_a: Any, **_k: Any) -> Any:
        raise RuntimeError("model bug")

    jobs = JobManager(boom)
    with caplog.at_level(logging.ERROR, logger="cpsched.serve"):
        job = jobs.wait(jobs.start(load_instance(ARTICLE), time_limit=1), 30)
    assert job.state == "failed" and "\n" not in job.error and "RuntimeError" in job.error
    assert any(r.exc_info for r in caplog.records)


def test_solve_inputs_are_checked() -> None:
    assert check_inputs(20, 2) is None
    assert check_inputs(0, 1) == "time limit = 0: must be a number of seconds > 0 and <= 3600"
    assert check_inputs(None, 1).startswith("time limit = None")
    assert check_inputs(5, 0) == "workers = 0: must be an integer from 1 to 8"


# ----------------------------------------------------------------------------- edits
def test_orders_round_trip_as_text_with_pairs() -> None:
    sch = run_schedule("dualpipe", load_instance(ROOT / "instances" / "dualpipe.toml"))
    rows = edit.orders_to_text(sch.orders())
    assert any("OVERLAP_F_B" in s for r in rows for s in r)
    assert edit.text_to_orders(rows) == sch.orders()
    again = edit.retime(sch.instance, rows)
    assert again.schedule.makespan == sch.makespan and again.violations == []


def test_moving_a_backward_first_deadlocks_and_names_the_cycle() -> None:
    inst = load_instance(ARTICLE)
    rows = edit.orders_to_text(run_schedule("interleaved-1f1b", inst).orders())
    moved = edit.move(rows, "0B0", -100)
    assert moved[0][0] == "0B0" and sorted(moved[0]) == sorted(rows[0])
    out = edit.retime(inst, moved)
    assert out.schedule is None and out.error.startswith("deadlock: rank 0 waits at 0B0")
    assert {"0B0", "1B0", "0F0"} <= set(out.cycle)
    assert edit.retime(inst, edit.move(moved, "0B0", 100)).schedule is not None
    assert edit.move(rows, "99F99", 1) == rows


def test_a_forward_moved_earlier_breaks_the_memory_limit_at_a_named_time() -> None:
    inst = load_instance(None, {"pipeline.devices": 2, "pipeline.microbatches": 4,
                                "costs.forward": 1, "costs.backward": 2,
                                "memory.limit": 2})
    rows = edit.orders_to_text(run_schedule("1f1b", inst).orders())
    assert rows[0][:3] == ["0F0", "0F1", "0B0"]
    out = edit.retime(inst, edit.move(rows, "0F2", -2))  # a third forward before 0B0
    assert out.schedule is not None and len(out.violations) == 1
    assert out.violations[0].startswith("device 0 holds 3 > memory limit 2 at time ")
    (t, d), = out.marks
    assert d == 0 and t == 2  # 0F2 starts at 2, right after 0F0 and 0F1


# ------------------------------------------------------------------------ views, files
def test_cards_give_the_reason_a_schedule_does_not_apply() -> None:
    inst = load_instance(ARTICLE)
    cards = {c.name: c for c in views.cards(inst)}
    assert cards["interleaved-1f1b"].reason is None
    assert cards["1f1b"].reason == "pipeline.stages_per_device = 2: 1f1b needs 1"
    grouped = {c.name: c for c in views.cards(inst, group=3)}["interleaved-1f1b"]
    assert "needs >= devices = 4" in grouped.reason
    assert views.default_selection(inst) == ["gpipe", "interleaved-1f1b"]
    assert views.improvement(340, 325) == pytest.approx(15 / 340)


def test_downloads_are_valid_files(tmp_path: Path) -> None:
    inst = load_instance(ARTICLE)
    sch = views.known(views.instance_key(inst), "interleaved-1f1b")
    name, content = views.schedule_file(sch, "json")
    assert name == "article-interleaved-interleaved-1f1b.json"
    back = Schedule.from_dict(json.loads(content))
    assert validate(back) == [] and back.makespan == 285
    (tmp_path / name).write_bytes(content)
    res = CliRunner().invoke(cli, ["validate", str(ARTICLE), str(tmp_path / name)])
    assert res.exit_code == 0, res.output
    name, content = views.schedule_file(sch, "csv")
    assert content.decode().splitlines()[0].split(",")[:2] == ["0F0", "0F1"]
    for what, magic in (("png", b"\x89PNG"), ("svg", b"<?xml")):
        assert views.schedule_file(sch, what)[1].startswith(magic)
    dual = run_schedule("dualpipe", load_instance(ROOT / "instances" / "dualpipe.toml"))
    with pytest.raises(ValueError, match="bidirectional"):
        views.schedule_file(dual, "csv")


# -------------------------------------------------------------------- app and command
def test_the_app_serves_its_page_and_layout() -> None:
    from cpsched.serve import create_app

    app = create_app(load_instance(ARTICLE))
    client = app.server.test_client()
    assert client.get("/").status_code == 200
    layout = client.get("/_dash-layout").get_data(as_text=True)
    for needle in ('"f-microbatches"', '"solve"', '"edit-gantt"', '"article-interleaved"'):
        assert needle in layout
    assert len(app.callback_map) >= 12 and isinstance(app.jobs, JobManager)


def test_serve_command_checks_its_input(monkeypatch: pytest.MonkeyPatch) -> None:
    import dash

    runs: list[dict[str, Any]] = []
    monkeypatch.setattr(dash.Dash, "run", lambda self, **kw: runs.append(kw))
    runner = CliRunner()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        res = runner.invoke(cli, ["serve", "--port", str(port)])
        assert res.exit_code == 2
        assert res.output.strip().startswith(f"error: --host 127.0.0.1 --port {port}: "
                                             "cannot listen (")
    res = runner.invoke(cli, ["serve", str(ARTICLE), "--port", str(port), "--host", "0.0.0.0"])
    assert res.exit_code == 0, res.output
    assert runs == [{"host": "0.0.0.0", "port": port, "debug": False}]
    res = runner.invoke(cli, ["serve", "--port", "70000"])
    assert res.exit_code == 2 and "--port = 70000: must be an integer from 1 to 65535" in \
        res.output
    res = runner.invoke(cli, ["serve", "--devices", "0"])
    assert res.exit_code == 2
    assert res.output.strip() == "error: instance: pipeline.devices = 0: must be an integer >= 1"
    assert "Traceback" not in res.output
