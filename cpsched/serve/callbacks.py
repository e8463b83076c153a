"""The page's callbacks for the instance, the schedule cards, the panels and the downloads.

Flow: the URL (once, when the page opens) or an uploaded TOML fills the form; every form
change validates the instance (:func:`cpsched.serve.form.instance_from_values`) into the
``instance`` store, or puts the CLI's message next to the wrong field; the instance and the
selected cards draw one panel per schedule and the comparison table; the URL follows the form.
Solving and hand edits are in :mod:`~cpsched.serve.solve_ui` and :mod:`~cpsched.serve.edit_ui`.
"""

from __future__ import annotations

import logging
from typing import Any

from dash import ALL, Dash, Input, Output, State, ctx, dcc, html, no_update
from dash.exceptions import PreventUpdate

from cpsched.display import fmt
from cpsched.instance import InstanceError
from cpsched.schedules import NotApplicable
from cpsched.serve import form, views
from cpsched.serve.figures import gantt_figure, memory_figure, metrics_row
from cpsched.serve.layout import GRAPH_CONFIG, download_buttons, metrics_table
from cpsched.simulate import OrderError

log = logging.getLogger("cpsched.serve")

TEXT_IDS = [f.id for f in form.FIELDS if f.kind == "text"]
FORM_INPUTS = [Input(f"f-{f.id}", "value") for f in form.FIELDS]


def _values(args: tuple[Any, ...] | list[Any]) -> dict[str, Any]:
    """Form values from the callback arguments in :data:`FORM_INPUTS` order."""
    out = dict(zip(form.FIELD_IDS, args, strict=True))
    out["split_backward"] = bool(out["split_backward"])
    return out


def _outputs(values: dict[str, Any]) -> list[Any]:
    """Form component values in :data:`FORM_INPUTS` order."""
    return [(["on"] if values.get(f.id) else []) if f.kind == "bool" else values.get(f.id)
            for f in form.FIELDS]


def register_form(app: Dash, defaults: dict[str, Any]) -> None:
    """Callbacks filling the form (URL, upload), syncing the slider, validating the form."""

    @app.callback(
        [Output(f"f-{f.id}", "value") for f in form.FIELDS]
        + [Output("loaded", "data"), Output("selected", "data"), Output("err-upload",
                                                                         "children")],
        Input("url-in", "search"), Input("upload", "contents"),
        State("upload", "filename"), State("loaded", "data"))
    def fill_form(search: str | None, contents: str | None, filename: str | None,
                  loaded: bool | None) -> list[Any]:
        """Fill the form from an uploaded TOML, or once from the URL."""
        if ctx.triggered_id == "upload" and contents:
            try:
                inst = form.instance_from_upload(contents, filename)
            except InstanceError as exc:
                return [no_update] * (len(form.FIELDS) + 2) + [f"instance: {exc}"]
            values = form.values_from_instance(inst)
            return _outputs(values) + [True, no_update, ""]
        if loaded:
            raise PreventUpdate
        values, selected = form.values_from_query(search, defaults)
        return _outputs(values) + [True, selected, ""]

    @app.callback(
        Output("f-microbatches", "value", allow_duplicate=True), Output("m-slider", "value"),
        Input("f-microbatches", "value"), Input("m-slider", "value"),
        prevent_initial_call=True)
    def sync_slider(text: str | None, slider: int | None) -> tuple[Any, Any]:
        """Keep the microbatch slider and text box in step."""
        if ctx.triggered_id == "m-slider":
            return str(slider), no_update
        value = form.parse_text(text)
        if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 256:
            return no_update, value
        return no_update, no_update

    @app.callback(
        [Output("instance", "data"), Output("err-instance", "children"),
         Output("panels", "style")]
        + [Output(f"err-{f.id}", "children") for f in form.FIELDS]
        + [Output(f"f-{i}", "className") for i in TEXT_IDS],
        FORM_INPUTS)
    def read_form(*args: Any) -> list[Any]:
        """Validate the form: the instance, or each message by its field."""
        values = _values(args)
        errors = dict.fromkeys(form.FIELD_IDS, "")
        general, data = "", None
        try:
            inst = form.instance_from_values(values)
            data = {"key": views.instance_key(inst), "group": None}
        except InstanceError as exc:
            where = form.field_of(exc)
            if where is None:
                general = str(exc)
            else:
                errors[where] = str(exc)
        if data is not None:
            try:
                data["group"] = form.group_size(values)
            except InstanceError as exc:
                errors["group"] = str(exc)
        stale = {"opacity": 0.35} if data is None else {}  # the last valid instance's
        return ([data, general, stale] + [errors[i] for i in form.FIELD_IDS]
                + ["bad" if errors[i] else "" for i in TEXT_IDS])

    @app.callback(Output("url-out", "search"), FORM_INPUTS, Input("selected", "data"),
                  State("loaded", "data"), prevent_initial_call=True)
    def follow_url(*args: Any) -> str:
        """Write the form and the selection into the URL query."""
        if not args[-1]:
            raise PreventUpdate
        return form.query_from_values(_values(args[:len(form.FIELDS)]), args[-2])


def _selection(inst_data: dict[str, Any], selected: list[str] | None) -> list[str]:
    inst = views.instance_of(inst_data["key"])
    return views.default_selection(inst) if selected is None else list(selected)


def register_cards(app: Dash) -> None:
    """Callbacks drawing the schedule cards and toggling a selection."""

    @app.callback(Output({"type": "card", "name": ALL}, "className"),
                  Output({"type": "why", "name": ALL}, "children"),
                  Input("instance", "data"), Input("selected", "data"))
    def mark_cards(inst_data: dict[str, Any] | None, selected: list[str] | None
                   ) -> tuple[list[str], list[str]]:
        """Grey out cards that do not apply (with why), mark the selected."""
        if not inst_data:
            raise PreventUpdate
        chosen = set(_selection(inst_data, selected))
        classes, whys = [], []
        for card in views.cards(views.instance_of(inst_data["key"]), inst_data["group"]):
            classes.append("card" + (" na" if card.reason else "") + (
                " selected" if card.name in chosen and not card.reason else ""))
            whys.append(f"not applicable: {card.reason}" if card.reason else "")
        return classes, whys

    @app.callback(Output("selected", "data", allow_duplicate=True),
                  Input({"type": "card", "name": ALL}, "n_clicks"),
                  State("selected", "data"), State("instance", "data"),
                  prevent_initial_call=True)
    def toggle(_clicks: list[int | None], selected: list[str] | None,
               inst_data: dict[str, Any] | None) -> list[str]:
        """Select or deselect the clicked card (if it applies)."""
        if not inst_data or not ctx.triggered or not ctx.triggered[0]["value"]:
            raise PreventUpdate
        name = ctx.triggered_id["name"]
        card = next(c for c in views.cards(views.instance_of(inst_data["key"]),
                                           inst_data["group"]) if c.name == name)
        if card.reason:
            raise PreventUpdate
        chosen = _selection(inst_data, selected)
        return [n for n in chosen if n != name] if name in chosen else [*chosen, name]


def schedule_panel(key: str, name: str, group: int | None) -> tuple[html.Div, dict[str, str]
                                                                   | None]:
    """One schedule's panel (title, metrics, downloads, Gantt, memory) and its table row
    (None when it could not be built)."""
    label = views.label(name, group)
    try:
        sch = views.known(key, name, group)
    except NotApplicable as exc:
        return html.Div(html.P(f"{label}: not applicable: {exc}", className="note"),
                        className="panel"), None
    except OrderError:
        log.exception("schedule %s failed on %s", name, key)
        return html.Div(html.P(f"{label}: the generator failed (a bug; see the server log)",
                               className="bad-text"), className="panel"), None
    bad = views.violations_of(key, name, group)
    row = metrics_row(sch, bad, label)
    head = html.Div([html.H3(label), html.Span(
        f"makespan {row['makespan']}, bubble {row['bubble']}, peak memory "
        + " ".join(fmt(x, 2) for x in sch.peak_memory)
        + (f" — {bad[0]}" if bad else ""), className="bad-text" if bad else "note"),
        download_buttons(name, sch.instance.placement != "bidirectional")], className="bar")
    return html.Div([
        head,
        dcc.Graph(id={"type": "gantt", "name": name}, figure=gantt_figure(sch, label),
                  config=GRAPH_CONFIG),
        dcc.Graph(id={"type": "memory", "name": name}, figure=memory_figure(sch),
                  config=GRAPH_CONFIG),
    ], className="panel", id=f"panel-{name}"), row


def register_panels(app: Dash) -> None:
    """Callbacks drawing the selected schedules, the table and the edit sources."""

    @app.callback(Output("panels", "children"), Output("table", "children"),
                  Output("table-title", "children"), Output("edit-from", "options"),
                  Input("instance", "data"), Input("selected", "data"),
                  Input("solution", "data"))
    def show(inst_data: dict[str, Any] | None, selected: list[str] | None,
             solution: dict[str, Any] | None) -> tuple[Any, ...]:
        """One panel per selected schedule, the table, the edit sources."""
        if not inst_data:
            raise PreventUpdate
        key, group = inst_data["key"], inst_data["group"]
        inst = views.instance_of(key)
        ok = [c.name for c in views.cards(inst, group) if c.reason is None]
        panels, rows = [], []
        for name in [n for n in _selection(inst_data, selected) if n in ok]:
            panel, row = schedule_panel(key, name, group)
            panels.append(panel)
            if row:
                rows.append(row)
        if solution and solution.get("key") == key:
            rows.append(solution["row"])
        title = (f"{inst.name}: p={inst.p} v={inst.v} m={inst.m} {inst.placement}"
                 f"{' split' if inst.split_backward else ''}, {inst.n_actions} actions"
                 + ("" if inst.memory_limit is None else
                    f", memory limit {fmt(inst.memory_limit)}"))
        sources = [{"label": views.label(n, group), "value": n} for n in ok]
        if solution and solution.get("key") == key:
            sources.append({"label": "cpsat (the optimum)", "value": "cpsat"})
        return (panels or html.P("Select a schedule above.", className="note"),
                metrics_table(rows), title, sources)


def register_downloads(app: Dash, schedule_of: Any) -> None:
    """Callbacks for the instance TOML and the schedule downloads; ``schedule_of(src,
    inst_data, job, edit)`` finds the schedule a download button stands for."""

    @app.callback(Output("download", "data", allow_duplicate=True), Input("dl-toml", "n_clicks"),
                  State("instance", "data"), prevent_initial_call=True)
    def toml(clicks: int | None, inst_data: dict[str, Any] | None) -> Any:
        """The current instance as a TOML file."""
        if not clicks or not inst_data:
            raise PreventUpdate
        inst = views.instance_of(inst_data["key"])
        return dcc.send_string(inst.to_toml(), f"{inst.name}.toml")

    @app.callback(Output("download", "data"), Output("server-error", "children"),
                  Input({"type": "dl", "src": ALL, "what": ALL}, "n_clicks"),
                  State("instance", "data"), State("job", "data"), State("edit", "data"),
                  prevent_initial_call=True)
    def schedule(_clicks: list[int | None], inst_data: dict[str, Any] | None,
                 job: dict[str, Any] | None, edit: dict[str, Any] | None) -> tuple[Any, str]:
        """The file a download button stands for (or one line why not)."""
        if not inst_data or not ctx.triggered or not ctx.triggered[0]["value"]:
            raise PreventUpdate
        src, what = ctx.triggered_id["src"], ctx.triggered_id["what"]
        sch = schedule_of(src, inst_data, job, edit)
        if sch is None:
            return no_update, f"{src}: nothing to download (it does not time)"
        try:
            name, content = views.schedule_file(sch, what)
        except ValueError as exc:  # TorchCsvError is a ValueError
            return no_update, f"{src} as {what}: {exc}"
        return dcc.send_bytes(content, name), ""


__all__ = ["register_cards", "register_downloads", "register_form", "register_panels",
           "schedule_panel"]
