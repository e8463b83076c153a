"""The Edit section: start from any schedule, click a block, move it earlier or later in its
device's order; the orders are re-timed by the one simulator and checked by the one validator
at once (:mod:`cpsched.serve.edit`).  A deadlock shows the waiting cycle (its steps framed in
red on the last order that ran); a memory overrun names device and time and is marked on both
charts.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from dash import Dash, Input, Output, State, ctx, html, no_update
from dash.exceptions import PreventUpdate

from cpsched.display import fmt
from cpsched.model import Schedule
from cpsched.serve import views
from cpsched.serve.edit import Retimed, move, orders_to_text, retime
from cpsched.serve.figures import gantt_figure, memory_figure
from cpsched.serve.jobs import JobManager

HIDDEN, SHOWN = {"display": "none"}, {"display": "block"}


@lru_cache(maxsize=128)
def _retimed(key: str, rows_json: str, method: str) -> Retimed:
    return retime(views.instance_of(key), json.loads(rows_json), method)


def retimed(edit: dict[str, Any], rows: list[list[str]] | None = None) -> Retimed:
    """The edit's orders (or ``rows``) re-timed and validated (cached)."""
    return _retimed(edit["key"], json.dumps(rows if rows is not None else edit["rows"]),
                    f"edited-{edit['base']}")


def edited_schedule(edit: dict[str, Any] | None) -> Schedule | None:
    """The hand-edited schedule (None: no edit, or its orders do not run)."""
    return None if not edit else retimed(edit).schedule


def base_schedule(src: str, inst_data: dict[str, Any], solution: dict[str, Any] | None,
                  jobs: JobManager) -> Schedule | None:
    """The schedule an edit starts from: a known one, or the optimum of this tab's solve."""
    if src == "cpsat":
        job = jobs.get(solution.get("id")) if solution else None
        return None if job is None else job.schedule
    return views.known(inst_data["key"], src, inst_data["group"])


def _message(r: Retimed, base: str) -> html.Div:
    if r.schedule is None:
        return html.Div([html.B("the new order does not run: "), html.Span(r.error)],
                        className="bad-text", id="edit-error")
    if r.violations:
        return html.Div([html.B(f"{len(r.violations)} violation(s): "),
                         html.Ul([html.Li(v) for v in r.violations[:10]])],
                        className="bad-text", id="edit-error")
    s = r.schedule
    return html.Div(f"valid: makespan {fmt(s.makespan)}, bubble "
                    f"{100 * s.bubble_fraction:.1f}%, peak memory "
                    f"{' '.join(fmt(x, 2) for x in s.peak_memory)} (edited from {base})",
                    className="ok-text", id="edit-ok")


def register_edit(app: Dash, jobs: JobManager) -> None:
    """Callbacks: start editing, pick a block, move it, draw the edited schedule."""

    @app.callback(Output("edit", "data"), Output("picked", "data"),
                  Input("edit-start", "n_clicks"), State("edit-from", "value"),
                  State("instance", "data"), State("solution", "data"),
                  prevent_initial_call=True)
    def start(clicks: int | None, src: str | None, inst_data: dict[str, Any] | None,
              solution: dict[str, Any] | None) -> tuple[Any, Any]:
        """Load the chosen schedule's orders into this tab's edit."""
        if not clicks or not src or not inst_data:
            raise PreventUpdate
        sch = base_schedule(src, inst_data, solution, jobs)
        if sch is None:
            raise PreventUpdate
        rows = orders_to_text(sch.orders())
        return {"key": inst_data["key"], "base": src, "rows": rows, "good": rows}, None

    @app.callback(Output("picked", "data", allow_duplicate=True),
                  Input("edit-gantt", "clickData"), prevent_initial_call=True)
    def pick(click: dict[str, Any] | None) -> str:
        """Select the clicked block (its action name)."""
        points = (click or {}).get("points") or []
        if not points or not points[0].get("customdata"):
            raise PreventUpdate
        return str(points[0]["customdata"])  # the block's action name

    @app.callback(Output("edit", "data", allow_duplicate=True),
                  Input("edit-earlier", "n_clicks"), Input("edit-later", "n_clicks"),
                  State("edit", "data"), State("picked", "data"), State("edit-steps", "value"),
                  prevent_initial_call=True)
    def shift(_e: int | None, _l: int | None, edit: dict[str, Any] | None,
              picked: str | None, steps: Any) -> dict[str, Any]:
        """Move the selected block's step earlier or later."""
        if not edit or not picked or not ctx.triggered or not ctx.triggered[0]["value"]:
            raise PreventUpdate
        n = steps if isinstance(steps, int) and steps >= 1 else 1
        rows = move(edit["rows"], picked, -n if ctx.triggered_id == "edit-earlier" else n)
        good = rows if retimed(edit, rows).schedule is not None else edit["good"]
        return {**edit, "rows": rows, "good": good}

    @app.callback(Output("edit-gantt", "figure"), Output("edit-memory", "figure"),
                  Output("edit-panel", "style"), Output("edit-message", "children"),
                  Output("edit-picked", "children"),
                  Input("edit", "data"), Input("picked", "data"), Input("instance", "data"))
    def draw(edit: dict[str, Any] | None, picked: str | None,
             inst_data: dict[str, Any] | None) -> tuple[Any, ...]:
        """Draw the edit: re-timed, validated, the cycle or overruns marked."""
        chosen = f"selected: {picked}" if picked else ""
        if not edit:
            return no_update, no_update, HIDDEN, "", chosen
        if not inst_data or inst_data["key"] != edit["key"]:
            return no_update, no_update, HIDDEN, html.P(
                "The instance changed since this edit started: press Start editing again.",
                className="note"), chosen
        r = retimed(edit)
        shown = r if r.schedule is not None else retimed(edit, edit["good"])
        sch = shown.schedule
        if sch is None:  # even the starting order fails: nothing to draw
            return no_update, no_update, HIDDEN, _message(r, edit["base"]), chosen
        title = f"hand-edited from {edit['base']}" + (
            "" if r.schedule is not None else " (last order that runs)")
        gantt = gantt_figure(sch, title, highlight=r.cycle, selected=picked, marks=r.marks)
        return gantt, memory_figure(sch, r.marks), SHOWN, _message(r, edit["base"]), chosen


__all__ = ["base_schedule", "edited_schedule", "register_edit", "retimed"]
