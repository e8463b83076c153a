"""The Solve section: start a background CP-SAT job (:mod:`cpsched.serve.jobs`), show its
incumbent, bound and elapsed time while it runs, cancel it, and add the optimum as one more
panel with its gap and its improvement over the best known schedule that fits (the solver's
warm start: the shortest registered schedule the validator accepts, docs/spec.md §7).
"""

from __future__ import annotations

import math
from typing import Any

from dash import Dash, Input, Output, State, dcc, html, no_update
from dash.exceptions import PreventUpdate

from cpsched.display import fmt
from cpsched.model import Schedule
from cpsched.serve import views
from cpsched.serve.figures import gantt_figure, memory_figure, metrics_row
from cpsched.serve.jobs import Job, JobManager
from cpsched.serve.layout import GRAPH_CONFIG, download_buttons

#: Largest time limit and worker count the page accepts.
MAX_SECONDS, MAX_WORKERS = 3600.0, 8


def check_inputs(seconds: Any, workers: Any) -> str | None:
    """Why the time limit or the worker count cannot be used (None: both fine)."""
    if not isinstance(seconds, int | float) or isinstance(seconds, bool) or \
            not math.isfinite(seconds) or not 0 < seconds <= MAX_SECONDS:
        return (f"time limit = {seconds}: must be a number of seconds > 0 and <= "
                f"{MAX_SECONDS:g}")
    if not isinstance(workers, int) or isinstance(workers, bool) or \
            not 1 <= workers <= MAX_WORKERS:
        return f"workers = {workers}: must be an integer from 1 to {MAX_WORKERS}"
    return None


def progress_text(status: dict[str, Any]) -> str:
    """``running 3.2 s — incumbent 290, bound 285`` (or how the job ended)."""
    inc, bound = fmt(status["incumbent"]), fmt(status["bound"])
    state = status["state"]
    if state == "failed":
        return status["error"]
    word = {"running": "running", "done": "finished", "cancelled": "cancelled"}[state]
    return f"{word} {status['elapsed']:.1f} s — incumbent {inc}, bound {bound}"


def summary(job: Job) -> tuple[str, dict[str, str]]:
    """One line on the optimum — status, makespan, bound, gap, the best known schedule that
    fits and how much shorter the optimum is — and its table row."""
    sch = job.schedule
    assert sch is not None
    warm = job.result.warm_start
    warm_ms = sch.extra.get("warm_start_makespan")
    gap = sch.gap or 0.0
    line = (f"{sch.status}: makespan {fmt(sch.makespan)}, lower bound {fmt(sch.lower_bound)}, "
            f"gap {100 * gap:.1f}%")
    if warm and warm_ms is not None:
        what = "the optimum" if sch.status == "OPTIMAL" else "the best schedule found"
        line += (f"; best known schedule that fits: {warm} {fmt(warm_ms)}, {what} is "
                 f"{100 * views.improvement(warm_ms, sch.makespan):.1f}% shorter")
    return line, metrics_row(sch, [], "cpsat")


def solve_panel(job: Job) -> html.Div:
    """The optimum's panel: summary line, downloads, Gantt chart, memory."""
    sch: Schedule | None = job.schedule
    if sch is None:
        return html.Div(html.P(job.error or "no schedule", className="bad-text"))
    line, _ = summary(job)
    return html.Div([
        html.Div([html.H3("cpsat"), html.Span(line, id="solve-summary"),
                  download_buttons("cpsat", sch.instance.placement != "bidirectional")],
                 className="bar"),
        dcc.Graph(id="solve-gantt", figure=gantt_figure(sch, f"cpsat ({sch.status})"),
                  config=GRAPH_CONFIG),
        dcc.Graph(id="solve-memory", figure=memory_figure(sch), config=GRAPH_CONFIG),
    ], className="panel")


def register_solve(app: Dash, jobs: JobManager) -> None:
    """Callbacks: Solve starts a job, the poll shows progress and the result, Cancel stops."""

    @app.callback(
        Output("job", "data"), Output("poll", "disabled"), Output("solve", "disabled"),
        Output("cancel", "disabled"), Output("solve-status", "children"),
        Input("solve", "n_clicks"), State("instance", "data"), State("solve-time", "value"),
        State("solve-workers", "value"), prevent_initial_call=True)
    def start(clicks: int | None, inst_data: dict[str, Any] | None, seconds: Any,
              workers: Any) -> tuple[Any, ...]:
        """Start a job for the current instance (or say why not)."""
        if not clicks:
            raise PreventUpdate
        if not inst_data:
            return no_update, True, False, True, "fix the instance first"
        why = check_inputs(seconds, workers)
        if why:
            return no_update, True, False, True, why
        job_id = jobs.start(views.instance_of(inst_data["key"]), time_limit=float(seconds),
                            workers=int(workers))
        return {"id": job_id, "key": inst_data["key"]}, False, True, False, "starting…"

    @app.callback(
        Output("solve-status", "children", allow_duplicate=True),
        Input("cancel", "n_clicks"), State("job", "data"), prevent_initial_call=True)
    def cancel(clicks: int | None, job: dict[str, Any] | None) -> str:
        """Ask this tab's job to stop; it keeps its best schedule."""
        if not clicks or not job:
            raise PreventUpdate
        return "cancelling…" if jobs.cancel(job["id"]) else no_update

    @app.callback(
        Output("solve-status", "children", allow_duplicate=True),
        Output("poll", "disabled", allow_duplicate=True),
        Output("solve", "disabled", allow_duplicate=True),
        Output("cancel", "disabled", allow_duplicate=True),
        Output("solve-panel", "children"), Output("solution", "data"),
        Input("poll", "n_intervals"), State("job", "data"), prevent_initial_call=True)
    def poll(_n: int | None, job_data: dict[str, Any] | None) -> tuple[Any, ...]:
        """Progress while running; the optimum's panel and table row when done."""
        status = jobs.status(job_data["id"]) if job_data else None
        if status is None:
            return "the solve was forgotten by the server; press Solve again", True, False, \
                True, no_update, no_update
        if status["state"] == "running":
            return progress_text(status), no_update, no_update, no_update, no_update, \
                no_update
        job = jobs.get(job_data["id"])
        assert job is not None
        solution = None
        if job.schedule is not None:
            solution = {"key": job_data["key"], "row": summary(job)[1], "id": job.id}
        return progress_text(status), True, False, True, solve_panel(job), solution


__all__ = ["check_inputs", "progress_text", "register_solve", "solve_panel", "summary"]
