"""The page: the instance form, the schedule cards, the comparison table, the Solve and Edit
sections and one panel per selected schedule (plain Dash components; the style sheet is
inlined into the page, so the package needs no data files).

Ids used by the callbacks and the browser tests: form inputs ``f-FIELD`` with their message
``err-FIELD`` (FIELD from :data:`cpsched.serve.form.FIELDS`), ``err-instance`` (a problem of
the instance as a whole), cards ``{"type": "card", "name": NAME}``, ``table``, ``panels``,
``solve``/``cancel``/``solve-status``/``solve-panel``, ``edit-from``/``edit-start``/
``edit-earlier``/``edit-later``/``edit-message``/``edit-panel``, download buttons
``{"type": "dl", "src": SOURCE, "what": json|csv|png|svg}``.
"""

from __future__ import annotations

from typing import Any

from dash import dcc, html

from cpsched.serve.form import FIELDS, PLACEMENTS

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0;
       color: #222; background: #fafafa; }
.top { padding: 10px 18px; background: #1f2d3d; color: #fff; }
.top h1 { font-size: 20px; margin: 0; } .top p { margin: 2px 0 0; font-size: 13px;
          color: #cfd8e3; }
.layout { display: flex; align-items: flex-start; gap: 14px; padding: 12px; }
.side { width: 290px; flex: none; background: #fff; border: 1px solid #ddd;
        border-radius: 6px; padding: 10px; position: sticky; top: 8px; }
.main { flex: 1; min-width: 0; }
.field { margin-bottom: 7px; } .field label { display: block; font-size: 12px;
         color: #555; } .field input[type=text] { width: 100%; box-sizing: border-box;
         padding: 4px 6px; border: 1px solid #bbb; border-radius: 4px; }
.field .bad input, .field input.bad { border-color: #c62828; background: #fff4f4; }
.err { color: #c62828; font-size: 12px; white-space: pre-wrap; }
.err:empty { display: none; }
.section { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 10px;
           margin-bottom: 12px; } .section h2 { font-size: 15px; margin: 0 0 8px; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(170px, 1fr));
         gap: 6px; }
.card { border: 1px solid #ccc; border-radius: 6px; padding: 6px 8px; cursor: pointer;
        font-size: 12px; background: #fff; user-select: none; }
.card b { font-size: 13px; } .card.selected { border: 2px solid #1565c0;
          background: #e3f0fd; } .card.na { opacity: 0.45; cursor: not-allowed; }
.card .why { color: #8d2b00; display: block; margin-top: 2px; } .why:empty { display: none; }
.card.na .sum { display: none; }
.panel { border-top: 1px solid #e3e3e3; padding-top: 6px; margin-top: 6px; }
.panel h3 { font-size: 14px; margin: 4px 0; display: inline-block; }
.bar { display: flex; flex-wrap: wrap; align-items: center; gap: 6px; font-size: 13px; }
button { font-size: 12px; padding: 3px 9px; border: 1px solid #888; border-radius: 4px;
         background: #f4f4f4; cursor: pointer; } button:disabled { opacity: 0.5; }
button.primary { background: #1565c0; color: #fff; border-color: #0d47a1; }
table.metrics { border-collapse: collapse; font-size: 13px; }
table.metrics td, table.metrics th { border-bottom: 1px solid #e3e3e3; padding: 3px 10px;
         text-align: right; } table.metrics td:first-child,
         table.metrics th:first-child { text-align: left; }
.bad-text { color: #c62828; } .ok-text { color: #2e7d32; }
.note { color: #666; font-size: 12px; }
"""

INDEX = """<!DOCTYPE html>
<html><head>{%metas%}<title>{%title%}</title>{%favicon%}{%css%}<style>""" + CSS + \
    """</style></head><body>{%app_entry%}<footer>{%config%}{%scripts%}{%renderer%}</footer>
</body></html>"""

GRAPH_CONFIG: dict[str, Any] = {"displaylogo": False,
                                "toImageButtonOptions": {"format": "svg"}}


def _field(f: Any, value: Any) -> html.Div:
    """One labelled input with its message line."""
    if f.kind == "choice":
        control: Any = dcc.RadioItems(
            id=f"f-{f.id}", options=list(PLACEMENTS), value=value or "loop", inline=True,
            inputStyle={"marginRight": "3px", "marginLeft": "6px"})
    elif f.kind == "bool":
        control = dcc.Checklist(id=f"f-{f.id}", options=[{"label": " " + f.label,
                                                          "value": "on"}],
                                value=["on"] if value else [])
    else:
        control = dcc.Input(id=f"f-{f.id}", type="text", value=value, debounce=True,
                            placeholder=f.hint, autoComplete="off")
    label = [] if f.kind == "bool" else [html.Label(f.label, htmlFor=f"f-{f.id}")]
    return html.Div([*label, control, html.Div(id=f"err-{f.id}", className="err")],
                    className="field")


def sidebar(values: dict[str, Any], m_max: int) -> html.Div:
    """The instance form: upload/download, the microbatch slider, every field."""
    fields = []
    for f in FIELDS:
        fields.append(_field(f, values.get(f.id)))
        if f.id == "microbatches":
            fields.append(dcc.Slider(id="m-slider", min=1, max=m_max, step=1,
                                     value=_int(values.get("microbatches"), 8),
                                     marks=None, tooltip={"placement": "bottom"}))
    return html.Div([
        html.Div([dcc.Upload(html.Button("Load TOML…"), id="upload", multiple=False),
                  html.Button("Download TOML", id="dl-toml")], className="bar"),
        html.Div(id="err-upload", className="err"),
        html.Hr(), *fields,
        html.Div(id="err-instance", className="err"),
    ], className="side")


def _int(text: Any, default: int) -> int:
    try:
        return max(1, int(str(text)))
    except ValueError:
        return default


def cards() -> html.Div:
    """One card per registered schedule, in registry order (their classes and reasons are
    set by a callback for the current instance)."""
    from cpsched.schedules import REGISTRY

    return html.Div([
        html.Div([html.B(spec.name), html.Br(), html.Span(spec.summary, className="sum"),
                  html.Span(id={"type": "why", "name": spec.name}, className="why")],
                 id={"type": "card", "name": spec.name}, className="card", title=spec.summary)
        for spec in REGISTRY.values()], id="cards", className="cards")


def solve_section() -> html.Div:
    """Solve: time limit, workers, Solve/Cancel, live progress, the optimum's panel."""
    return html.Div([
        html.H2("Optimum (CP-SAT)"),
        html.Div([
            html.Label("time limit (s)"),
            dcc.Input(id="solve-time", type="number", value=20, min=0.5, max=3600,
                      style={"width": "70px"}),
            html.Label("workers"),
            dcc.Input(id="solve-workers", type="number", value=2, min=1, max=8, step=1,
                      style={"width": "50px"}),
            html.Button("Solve", id="solve", className="primary"),
            html.Button("Cancel", id="cancel", disabled=True),
            html.Span(id="solve-status", className="note"),
        ], className="bar"),
        html.Div(id="solve-panel"),
    ], className="section")


def edit_section() -> html.Div:
    """Hand edits: start from a schedule, select a block (click), move it."""
    return html.Div([
        html.H2("Edit a schedule by hand"),
        html.Div([
            html.Label("start from"),
            dcc.Dropdown(id="edit-from", options=[], value=None, clearable=False,
                         style={"width": "230px"}),
            html.Button("Start editing", id="edit-start"),
            html.Span("then click a block and move it:", className="note"),
            html.Button("◀ earlier", id="edit-earlier"),
            html.Button("later ▶", id="edit-later"),
            html.Label("by"),
            dcc.Input(id="edit-steps", type="number", value=1, min=1, step=1,
                      style={"width": "50px"}),
            html.Span(id="edit-picked", className="note"),
        ], className="bar"),
        html.Div(id="edit-message"),
        html.Div([
            download_buttons("edited"),
            dcc.Graph(id="edit-gantt", config=GRAPH_CONFIG),
            dcc.Graph(id="edit-memory", config=GRAPH_CONFIG),
        ], id="edit-panel", style={"display": "none"}),
    ], className="section")


def page(values: dict[str, Any], m_max: int = 256) -> html.Div:
    """The whole page with the form showing ``values``."""
    stores = [dcc.Store(id=i) for i in ("loaded", "instance", "selected", "job", "solution",
                                        "edit", "picked")]
    return html.Div([
        dcc.Location(id="url-in"), dcc.Location(id="url-out", refresh=False),
        *stores, dcc.Download(id="download"),
        dcc.Interval(id="poll", interval=400, disabled=True),
        html.Div([html.H1("cpsched — pipeline schedule explorer"),
                  html.P("Known schedules side by side, the provable optimum, and your own "
                         "edits; every schedule timed by one simulator and checked by one "
                         "validator.")], className="top"),
        html.Div(id="server-error", className="err", style={"padding": "0 14px"}),
        html.Div([
            sidebar(values, m_max),
            html.Div([
                html.Div([html.H2("Schedules"), cards()], className="section"),
                html.Div([html.H2(id="table-title"), html.Div(id="table")],
                         className="section"),
                solve_section(),
                html.Div([html.H2("Gantt charts"), html.Div(id="panels")],
                         className="section"),
                edit_section(),
            ], className="main"),
        ], className="layout"),
    ])


def download_buttons(src: str, csv: bool = True) -> html.Span:
    """JSON / PyTorch CSV / PNG / SVG buttons of one schedule (``src``: its name, ``cpsat``
    or ``edited``)."""
    whats = [("json", "JSON"), ("csv", "PyTorch CSV"), ("png", "PNG"), ("svg", "SVG")]
    return html.Span([html.Button(text, id={"type": "dl", "src": src, "what": what})
                      for what, text in whats if csv or what != "csv"], className="bar")


def metrics_table(rows: list[dict[str, str]]) -> html.Table:
    """The comparison table: one row per schedule."""
    if not rows:
        return html.Table(className="metrics")
    cols = list(rows[0])
    head = html.Tr([html.Th(c) for c in cols])
    body = [html.Tr([html.Td(r[c], className="bad-text" if r[c] in ("no", "OVER LIMIT",
                                                                  "INVALID") else None)
                     for c in cols], id=f"row-{r['schedule'].replace(' ', '-')}")
            for r in rows]
    return html.Table([html.Thead(head), html.Tbody(body)], className="metrics")


__all__ = ["CSS", "GRAPH_CONFIG", "INDEX", "download_buttons", "edit_section",
           "metrics_table", "page", "sidebar", "solve_section"]
