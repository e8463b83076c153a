"""Interactive Plotly figures of a schedule: the Gantt chart and memory over time.

The Gantt chart follows the pipeline-scheduling article's style: one row per device (device 0
on top), **colour = microbatch**, **shade = kind and chunk** (a forward is the microbatch's
colour, its backward darker, a weight-gradient ``W`` lighter; later chunks paler), and an
overlapped F&B pair drawn as two half-height blocks in one frame.  It is vectorised: one
``Bar`` trace per (kind, chunk) shade group, each block one element of its arrays, so a
schedule of several thousand actions (p=16, v=2, m=64: 4096) is a handful of traces.  Hovering
a block shows its action, stage, microbatch, start, end and the memory its device holds at
that moment (docs/spec.md §1.5, :func:`cpsched.metrics.memory_profile`).

Colours of kinds elsewhere in the project (``cpsched.plots``) encode the kind; here the
microbatch is the hue because following one microbatch through the pipeline is what the
interactive view is for.
"""

from __future__ import annotations

import bisect
import colorsys
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from cpsched.display import fmt, verdict
from cpsched.metrics import memory_profile
from cpsched.model import Schedule

#: How much darker a backward (``B``/``I``) is than its microbatch's forward, and how much
#: lighter a ``W`` is (blend towards black / white).
DARKER, LIGHTER = 0.35, 0.45
#: How far the last chunk is blended towards white.
CHUNK_FADE = 0.4
#: Blocks drawn with their microbatch number written inside, at most.
MAX_LABELS = 600
#: Marks (memory overruns, deadlock steps) and the selected block.
ALERT, SELECT = "#d62728", "#000000"
KIND_WORDS = {"F": "forward", "B": "backward", "I": "input-grad backward",
              "W": "weight-grad backward"}


def microbatch_rgb(i: int) -> tuple[float, float, float]:
    """A distinct hue per microbatch ``i`` (golden-ratio steps around the colour wheel, so
    neighbours differ strongly), as ``(r, g, b)`` in ``[0, 1]``."""
    hue = (0.58 + 0.381966 * i) % 1.0
    return colorsys.hls_to_rgb(hue, 0.5, 0.62)


def _blend(rgb: Sequence[float], target: float, t: float) -> tuple[float, ...]:
    return tuple(c + (target - c) * t for c in rgb)


def block_rgb(kind: str, microbatch: int, chunk: int, n_chunks: int) -> str:
    """CSS colour of one block: the microbatch's hue, darker for ``B``/``I``, lighter for
    ``W``, paler with the chunk (chunk 0 full, chunk ``n_chunks - 1`` blended
    :data:`CHUNK_FADE` towards white)."""
    rgb: tuple[float, ...] = microbatch_rgb(microbatch)
    if kind in ("B", "I"):
        rgb = _blend(rgb, 0.0, DARKER)
    elif kind == "W":
        rgb = _blend(rgb, 1.0, LIGHTER)
    if n_chunks > 1:
        rgb = _blend(rgb, 1.0, CHUNK_FADE * chunk / (n_chunks - 1))
    return "#" + "".join(f"{round(255 * c):02x}" for c in rgb)


def memory_at(schedule: Schedule) -> list[float]:
    """Memory held by each action's device right after its start (allocations of that
    instant included), one value per ``schedule.actions`` row."""
    profile = memory_profile(schedule)
    times = [[t for t, _ in steps] for steps in profile]
    out = []
    for a in schedule.actions:
        k = bisect.bisect_right(times[a.device], a.start) - 1
        out.append(profile[a.device][max(k, 0)][1])
    return out


def _num(x: float) -> float | int:
    return int(x) if float(x).is_integer() else round(float(x), 6)


def _groups(schedule: Schedule) -> dict[tuple[str, int], dict[str, list[Any]]]:
    """Block arrays per (kind, chunk): position, size, microbatch, action name (the
    ``customdata`` a click reports) and hover text."""
    inst = schedule.instance
    mem = memory_at(schedule)
    local = [inst.stages_of(d) for d in range(inst.p)]
    groups: dict[tuple[str, int], dict[str, list[Any]]] = {}
    for a, held in zip(schedule.actions, mem, strict=True):
        kind = str(a.kind)
        if inst.placement == "bidirectional":
            chunk = 0 if a.microbatch < inst.m // 2 else 1
        else:
            chunk = local[a.device].index(a.stage) if a.stage in local[a.device] else 0
        g = groups.setdefault((kind, chunk), {k: [] for k in (
            "base", "x", "y", "width", "offset", "mb", "name", "hover")})
        paired = a.overlap is not None
        g["base"].append(a.start)
        g["x"].append(a.end - a.start)
        g["y"].append(a.device)
        g["width"].append(0.4 if paired else 0.8)
        g["offset"].append((-0.4 if kind == "F" else 0.0) if paired else -0.4)
        g["mb"].append(a.microbatch)
        name = f"{a.stage}{kind}{a.microbatch}"
        g["name"].append(name)
        g["hover"].append(
            f"<b>{name}</b> {KIND_WORDS.get(kind, kind)}"
            + (f" (overlapped pair {a.overlap})" if paired else "")
            + f"<br>stage {a.stage}, microbatch {a.microbatch}<br>start {_num(a.start)}, "
            f"end {_num(a.end)}<br>device {a.device} holds {_num(round(held, 9))} memory")
    return groups


def _bar(inst: Any, kind: str, chunk: int, g: dict[str, list[Any]], labels: bool) -> go.Bar:
    """One vectorised trace: every block of one (kind, chunk).  Colours go in as a numpy
    array of strings, the hover as one string per block (plotly validates numpy string
    arrays at once, nested per-block lists one value at a time), and blocks have no
    outline: per-block colour scales and outlines make Plotly.js several times slower to
    draw thousands of bars."""
    n_chunks = 2 if inst.placement == "bidirectional" else inst.v
    fills = np.array([block_rgb(kind, i, chunk, n_chunks) for i in range(inst.m)])
    mb = np.asarray(g["mb"], int)
    return go.Bar(
        orientation="h", base=np.asarray(g["base"], float), x=np.asarray(g["x"], float),
        y=np.asarray(g["y"]), width=np.asarray(g["width"]), offset=np.asarray(g["offset"]),
        customdata=np.array(g["name"]), hovertext=np.array(g["hover"]),
        hovertemplate="%{hovertext}<extra></extra>",
        name=f"{kind} chunk {chunk}" if n_chunks > 1 else kind,
        marker={"color": fills[mb], "line": {"width": 0}},
        text=mb if labels else None, textposition="inside", insidetextanchor="middle",
        textfont={"size": 9})


def _frames(schedule: Schedule, highlight: set[str], selected: str | None) -> list[go.Bar]:
    """Outlines drawn over the blocks, as traces that take no hover or click: each
    overlapped pair (one frame around its two half blocks), the ``highlight`` blocks (red)
    and the ``selected`` one (black)."""
    pairs: dict[int, Any] = {}
    marked: dict[str, list[Any]] = {ALERT: [], SELECT: []}
    for a in schedule.actions:
        if a.overlap is not None:
            pairs.setdefault(a.overlap, a)
        name = f"{a.stage}{a.kind}{a.microbatch}"
        if name in highlight or name == selected:
            marked[ALERT if name in highlight else SELECT].append(a)
    out = []
    for rows, color, width, label in ((list(pairs.values()), "#222222", 1.5, "pairs"),
                                      (marked[ALERT], ALERT, 3.0, "marked"),
                                      (marked[SELECT], SELECT, 3.0, "selected")):
        if rows:
            out.append(go.Bar(
                orientation="h", base=[a.start for a in rows], x=[a.end - a.start for a in rows],
                y=[a.device for a in rows], width=0.8, offset=-0.4, name=label,
                marker={"color": "rgba(0,0,0,0)", "line": {"color": color, "width": width}},
                hoverinfo="skip"))
    return out


def gantt_figure(schedule: Schedule, title: str = "", *, highlight: Iterable[str] = (),
                 selected: str | None = None,
                 marks: Sequence[tuple[float, int]] = ()) -> go.Figure:
    """The schedule's Gantt chart (one row per device, time on x in instance units).

    Args:
        schedule: the timed schedule.
        title: the chart's title.
        highlight: action names (``"2F0"``) framed in red, e.g. the steps of a deadlock.
        selected: one action name framed in black (the block a hand edit moves).
        marks: ``(time, device)`` points marked with a red cross, e.g. memory overruns.

    Returns:
        A figure with one ``Bar`` trace per (kind, chunk), then outline traces (pairs,
        ``highlight``, ``selected``; no hover) and the marks.
    """
    inst = schedule.instance
    groups = _groups(schedule)
    labels = len(schedule.actions) <= MAX_LABELS
    traces: list[Any] = [_bar(inst, kind, chunk, g, labels)
                         for (kind, chunk), g in sorted(groups.items())]
    traces += _frames(schedule, set(highlight), selected)
    if marks:
        traces.append(go.Scatter(
            x=[t for t, _ in marks], y=[d for _, d in marks], mode="markers", name="violation",
            marker={"symbol": "x", "size": 14, "color": ALERT, "line": {"width": 2}},
            hovertemplate="violation at %{x} on device %{y}<extra></extra>"))
    fig = go.Figure(traces)
    fig.update_layout(
        title={"text": title, "x": 0.01, "font": {"size": 14}}, barmode="overlay",
        bargap=0.0, height=90 + 26 * inst.p, margin={"l": 60, "r": 10, "t": 34, "b": 34},
        plot_bgcolor="#f7f7f7", showlegend=False, uirevision=title, hovermode="closest",
        uniformtext={"minsize": 7, "mode": "hide"})
    fig.update_yaxes(autorange="reversed", tickmode="array", tickvals=list(range(inst.p)),
                     ticktext=[f"dev {d}" for d in range(inst.p)], showgrid=False,
                     zeroline=False)
    fig.update_xaxes(title_text="time", rangemode="tozero", zeroline=False)
    return fig


def memory_figure(schedule: Schedule, marks: Sequence[tuple[float, int]] = ()) -> go.Figure:
    """Memory held over time, one step line per device, with the instance's limit dashed.

    Args:
        schedule: the timed schedule.
        marks: ``(time, device)`` of memory overruns, marked with a red cross at the memory
            the device holds then.

    Returns:
        A figure with one ``Scatter`` per device (``line_shape="hv"``).
    """
    inst = schedule.instance
    profile = memory_profile(schedule)
    end = schedule.makespan
    traces: list[Any] = []
    for d, steps in enumerate(profile):
        xs = [t for t, _ in steps] + [end]
        ys = [h for _, h in steps] + [steps[-1][1]]
        traces.append(go.Scatter(x=np.asarray(xs, float), y=np.asarray(ys, float),
                                 mode="lines", line_shape="hv", name=f"dev {d}",
                                 hovertemplate=f"dev {d}: %{{y}} at %{{x}}<extra></extra>"))
    if marks:
        held = []
        for t, d in marks:
            times = [s[0] for s in profile[d]]
            held.append(profile[d][max(bisect.bisect_right(times, t) - 1, 0)][1])
        traces.append(go.Scatter(
            x=[t for t, _ in marks], y=held, mode="markers", name="over the limit",
            marker={"symbol": "x", "size": 13, "color": ALERT, "line": {"width": 2}}))
    fig = go.Figure(traces)
    if inst.memory_limit is not None:
        fig.add_hline(y=inst.memory_limit, line_dash="dash", line_color=ALERT,
                      annotation_text=f"limit {_num(inst.memory_limit)}",
                      annotation_position="top left")
    fig.update_layout(height=190, margin={"l": 60, "r": 10, "t": 10, "b": 34},
                      plot_bgcolor="#f7f7f7", legend={"font": {"size": 9}},
                      hovermode="closest", showlegend=inst.p <= 8)
    fig.update_xaxes(title_text="time", rangemode="tozero")
    fig.update_yaxes(title_text="memory", rangemode="tozero")
    return fig


def fits(schedule: Schedule) -> bool | None:
    """Whether every device's peak memory is within the instance's limit (None: no limit)."""
    limit = schedule.instance.memory_limit
    if limit is None:
        return None
    return max(schedule.peak_memory, default=0.0) <= limit + 1e-6


def metrics_row(schedule: Schedule, violations: Sequence[str], label: str | None = None
                ) -> dict[str, str]:
    """One row of the comparison table: schedule, makespan, bubble %, peak memory (max over
    devices), fits the limit, status, gap (against ``schedule.lower_bound``)."""
    ok = fits(schedule)
    status = verdict(schedule.status, violations)
    gap = None if violations else schedule.gap
    return {
        "schedule": label or schedule.method,
        "makespan": fmt(schedule.makespan),
        "bubble": f"{100 * schedule.bubble_fraction:.1f}%",
        "peak memory": fmt(max(schedule.peak_memory, default=0.0), 2),
        "fits": "no limit" if ok is None else "yes" if ok else "no",
        "status": status,
        "gap": "-" if gap is None else f"{100 * gap:.1f}%",
    }


__all__ = ["block_rgb", "fits", "gantt_figure", "memory_at", "memory_figure",
           "metrics_row", "microbatch_rgb"]
