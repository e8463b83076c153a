"""Matplotlib figures: Gantt chart, memory over time, bubble bars, memory–makespan Pareto front.

One function per figure.  Each takes an optional ``ax`` (a new figure, sized for the data, is
created when it is None) and returns the :class:`~matplotlib.axes.Axes` it drew on, so figures
compose (see :func:`gantt_and_memory`).  Nothing here calls ``plt.show``; everything works
with the non-interactive Agg backend.  :func:`save_figure` writes any of them to a file.

Conventions shared by the figures:

* **Time** is in the instance's own units (the numbers of the instance file), x axis.
* **Devices** (pipeline ranks) are rows of the Gantt chart, rank 0 on top.
* **Colour = kind** of action, from the colour-blind-safe Okabe–Ito palette: ``F`` blue,
  ``B`` vermillion, ``I`` bluish green, ``W`` reddish purple.
* **Shade = chunk**: the local index of the stage on its device (``loop``: ``stage // p``;
  ``v``: 0 for ``stage < p``, else 1); chunk 0 is the darkest, the last chunk the lightest.
  With ``bidirectional`` placement (DualPipe) the shade is the *direction* instead: dark for
  microbatches ``0..m/2-1``, light for the others.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib.pyplot as plt
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import MaxNLocator, PercentFormatter

from cpsched.metrics import memory_profile, step_rows
from cpsched.model import Kind, Schedule, TimedAction

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes

__all__ = [
    "KIND_COLORS",
    "block_color",
    "bubble_bars",
    "chunk_of",
    "gantt",
    "gantt_and_memory",
    "gantt_figsize",
    "memory",
    "pareto",
    "save_figure",
]

#: Base (chunk 0) colour per action kind — Okabe & Ito's colour-blind-safe palette.
KIND_COLORS: dict[str, str] = {
    "F": "#0072B2",  # blue
    "B": "#D55E00",  # vermillion
    "I": "#009E73",  # bluish green
    "W": "#CC79A7",  # reddish purple
}
_KIND_NAMES = {"F": "F  forward", "B": "B  backward", "I": "I  backward (input grad)",
               "W": "W  backward (weight grad)"}
#: How far the lightest chunk is blended towards white (0 = no shading, 1 = white).
_LIGHTEST = 0.58
_IDLE_FACE = "#f3f3f3"
_IDLE_HATCH = "#c4c4c4"
_FRAME = "#222222"
#: Height of a device row's blocks (rows are 1 apart).
_ROW_HEIGHT = 0.82
#: Smallest label font size (points) still drawn; smaller labels are omitted.
_MIN_FONT = 4.0
_MAX_FONT = 9.0
#: Widest Gantt figure created automatically (inches).
_MAX_WIDTH = 28.0
#: Colours for schedules in bar charts and Pareto plots (Okabe–Ito, then Tol's muted).
_SERIES_COLORS = ["#E69F00", "#56B4E9", "#009E73", "#0072B2", "#D55E00", "#CC79A7",
                  "#882255", "#44AA99", "#999933", "#AA4499", "#332288", "#DDCC77"]
_OPTIMUM_COLOR = "#222222"


# --------------------------------------------------------------------------- colours
def chunk_of(schedule_or_instance: Any, action: TimedAction) -> tuple[int, int]:
    """``(chunk, number of chunks)`` of an action on its device (the shading index).

    The chunk is the local index of ``action.stage`` among the stages placed on
    ``action.device`` (``Instance.stages_of``); with ``bidirectional`` placement it is the
    direction (0 for microbatches ``< m/2``, else 1).
    """
    inst = getattr(schedule_or_instance, "instance", schedule_or_instance)
    if inst.placement == "bidirectional":
        return (0 if action.microbatch < inst.m // 2 else 1), 2
    local = inst.stages_of(action.device)
    try:
        return local.index(action.stage), max(1, len(local))
    except ValueError:  # a misplaced action (invalid schedule): still draw it
        return 0, max(1, len(local))


def block_color(kind: str, chunk: int = 0, n_chunks: int = 1) -> tuple[float, float, float]:
    """RGB colour of a block: the kind's colour, lightened towards white with the chunk.

    Chunk 0 is the kind's base colour; chunk ``n_chunks - 1`` is blended ``_LIGHTEST`` of the
    way to white; chunks in between are spaced evenly.
    """
    base = to_rgb(KIND_COLORS.get(str(kind), "#777777"))
    t = 0.0 if n_chunks <= 1 else _LIGHTEST * chunk / (n_chunks - 1)
    return tuple(c + (1.0 - c) * t for c in base)  # type: ignore[return-value]


def _text_color(rgb: Sequence[float]) -> str:
    """Black or white, whichever reads better on ``rgb`` (WCAG relative luminance)."""

    def lin(c: float) -> float:
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    lum = 0.2126 * lin(rgb[0]) + 0.7152 * lin(rgb[1]) + 0.0722 * lin(rgb[2])
    return "black" if lum > 0.23 else "white"


# ---------------------------------------------------------------------------- helpers
def _fmt_num(x: float) -> str:
    """``285`` for integral values, else up to 4 significant decimals."""
    return str(int(round(x))) if abs(x - round(x)) < 1e-9 else f"{x:.4g}"


def _new_axes(figsize: tuple[float, float]) -> Axes:
    fig, ax = plt.subplots(figsize=figsize, layout="constrained")
    return ax


def _blocks_per_device(schedule: Schedule) -> int:
    """Most blocks on one device (an overlapped pair counts once)."""
    counts = [0] * max(1, schedule.instance.p)
    for a in step_rows(schedule.actions):
        if 0 <= a.device < len(counts):
            counts[a.device] += 1
    return max(counts)


def gantt_figsize(schedule: Schedule) -> tuple[float, float]:
    """Figure size (inches) that keeps a Gantt chart of ``schedule`` readable.

    Width grows with the number of time slots (makespan / shortest action, at least the
    number of blocks on the busiest device) so the shortest blocks stay about 0.16 inch wide,
    capped at 28 inches; height grows with the number of devices ``p``.
    """
    inst = schedule.instance
    durations = [a.end - a.start for a in schedule.actions if a.end > a.start]
    makespan = schedule.makespan
    slots = makespan / min(durations) if durations else 1.0
    slots = max(slots, _blocks_per_device(schedule))
    width = min(_MAX_WIDTH, max(7.0, 2.6 + 0.16 * slots))
    height = 1.4 + 0.42 * inst.p
    return (round(width, 2), round(max(2.6, height), 2))


def _root_figure(obj: Any) -> Figure | None:
    """The top-level :class:`Figure` of an Axes, SubFigure or Figure (any matplotlib >= 3.8)."""
    fig = obj
    for _ in range(8):  # Axes -> (SubFigure ->)* Figure
        if fig is None or isinstance(fig, Figure):
            return fig
        fig = getattr(fig, "figure", None)
    return None


def _axes_width_points(ax: Axes) -> float:
    """Current drawing width of ``ax`` in points (from its bounding box in display units)."""
    fig = _root_figure(ax)
    dpi = fig.dpi if fig is not None else 72.0
    return max(1.0, ax.bbox.width / dpi * 72.0)


def _axes_height_points(ax: Axes) -> float:
    """Current drawing height of ``ax`` in points."""
    fig = _root_figure(ax)
    dpi = fig.dpi if fig is not None else 72.0
    return max(1.0, ax.bbox.height / dpi * 72.0)


def _idle_intervals(actions: Iterable[TimedAction], p: int,
                    makespan: float) -> list[list[tuple[float, float]]]:
    """Idle ``(start, width)`` intervals per device within ``[0, makespan]``."""
    busy: list[list[tuple[float, float]]] = [[] for _ in range(p)]
    for a in actions:
        if 0 <= a.device < p and a.end > a.start:
            busy[a.device].append((a.start, a.end))
    out: list[list[tuple[float, float]]] = []
    for intervals in busy:
        gaps: list[tuple[float, float]] = []
        t = 0.0
        for s, e in sorted(intervals):
            if s > t + 1e-12:
                gaps.append((t, s - t))
            t = max(t, e)
        if makespan > t + 1e-12:
            gaps.append((t, makespan - t))
        out.append(gaps)
    return out


# ------------------------------------------------------------------------------ gantt
def gantt(schedule: Schedule, ax: Axes | None = None, title: str | None = None, *,
          labels: bool = True, legend: bool = True) -> Axes:
    """Gantt chart of a timed schedule, one row per device (rank 0 on top).

    Every action is one :class:`~matplotlib.patches.Rectangle` in ``ax.patches`` spanning
    ``[start, end]`` on the x axis (instance time units), coloured by kind (:data:`KIND_COLORS`)
    and shaded by chunk (:func:`chunk_of`: chunk 0 dark, last chunk light).  An overlapped F&B
    pair (two actions with the same ``overlap`` id) is drawn as one block split in two halves —
    the ``F`` in the top half, the ``B``/``I`` in the bottom half — with one extra unfilled
    frame ``Rectangle`` around the pair.  So ``len(ax.patches) == len(schedule.actions) +
    number of overlapped pairs``.  Each action patch has ``gid`` ``"action:<stage><kind><mb>"``
    (e.g. ``"action:2F0"``), each frame ``"overlap:<id>"``.

    The microbatch number is written on each block, with a font scaled to the block
    (omitted when the block is too narrow).  Idle time is drawn as hatched grey bars (one
    :class:`~matplotlib.collections.PolyCollection` in ``ax.collections``) so bubbles stand
    out.

    Args:
        schedule: the timed schedule (``schedule.instance`` gives ``p`` and the placement).
        ax: axes to draw on; when None a new figure is created, sized by
            :func:`gantt_figsize` from ``p`` and the number of actions.
        title: replaces the default title ``"<instance> — <method>: makespan X, bubble Y%"``
            (pass ``""`` for none).
        labels: write microbatch numbers on the blocks.
        legend: draw the legend (kinds, chunk shades, overlap, idle) to the right of the axes.

    Returns:
        The axes drawn on.
    """
    inst = schedule.instance
    p = inst.p
    if ax is None:
        ax = _new_axes(gantt_figsize(schedule))
    makespan = schedule.makespan
    xmax = makespan if makespan > 0 else 1.0

    # idle time, behind the blocks
    idle = _idle_intervals(schedule.actions, p, makespan)
    idle_rects = []
    for d, gaps in enumerate(idle):
        for x0, w in gaps:
            y0 = d - _ROW_HEIGHT / 2
            idle_rects.append([(x0, y0), (x0, y0 + _ROW_HEIGHT), (x0 + w, y0 + _ROW_HEIGHT),
                               (x0 + w, y0)])
    if idle_rects:
        pc = PolyCollection(idle_rects, facecolors=_IDLE_FACE, edgecolors=_IDLE_HATCH,
                            linewidths=0.0, hatch="////", zorder=0.5, gid="idle")
        ax.add_collection(pc, autolim=False)

    edge_lw = 0.6 if _blocks_per_device(schedule) < 80 else 0.3
    to_label: list[tuple[float, float, float, float, str, Sequence[float]]] = []

    pairs: dict[int, list[TimedAction]] = {}
    kinds_present: set[str] = set()
    max_chunks = 1
    for a in schedule.actions:
        kind = str(a.kind)
        kinds_present.add(kind)
        chunk, n_chunks = chunk_of(inst, a)
        max_chunks = max(max_chunks, n_chunks)
        face = block_color(kind, chunk, n_chunks)
        w = a.end - a.start
        gid = f"action:{a.stage}{kind}{a.microbatch}"
        if a.overlap is None:
            y0, h = a.device - _ROW_HEIGHT / 2, _ROW_HEIGHT
        else:
            pairs.setdefault(a.overlap, []).append(a)
            # y axis is inverted (rank 0 on top): smaller y is drawn higher.
            top = a.kind == Kind.F
            y0 = a.device - _ROW_HEIGHT / 2 if top else a.device
            h = _ROW_HEIGHT / 2
        ax.add_artist(Rectangle((a.start, y0), w, h, facecolor=face, edgecolor="white",
                               linewidth=edge_lw, zorder=2, gid=gid))
        to_label.append((a.start, w, y0 + h / 2, h, str(a.microbatch), face))
    for ov, members in sorted(pairs.items()):
        x0 = min(m.start for m in members)
        x1 = max(m.end for m in members)
        d = members[0].device
        ax.add_artist(Rectangle((x0, d - _ROW_HEIGHT / 2), x1 - x0, _ROW_HEIGHT, fill=False,
                               edgecolor=_FRAME, linewidth=0.9, zorder=3, gid=f"overlap:{ov}"))

    ax.set_xlim(0, xmax * 1.004)
    ax.set_ylim(p - 0.5, -0.5)
    ax.set_yticks(range(p), [f"rank {d}" for d in range(p)])
    ax.tick_params(axis="y", length=0)
    ax.xaxis.set_major_locator(MaxNLocator(nbins="auto", steps=[1, 2, 2.5, 5, 10]))
    ax.set_xlabel("time (instance units)")
    for spine in ("top", "right", "left"):
        ax.spines[spine].set_visible(False)
    ax.grid(axis="x", color="#dddddd", linewidth=0.5, zorder=0)
    ax.set_axisbelow(True)

    if title is None:
        title = (f"{inst.name} — {schedule.method}: makespan {_fmt_num(makespan)}, "
                 f"bubble {100 * schedule.bubble_fraction:.1f}%")
        shape = f"p={p}, v={inst.v}, m={inst.m}"
        if inst.placement != "loop":
            shape += f", placement {inst.placement}"
        if schedule.status not in ("HEURISTIC", ""):
            shape += f", {schedule.status}"
        title += f"  ({shape})"
    if title:
        ax.set_title(title, loc="left", fontsize=11)

    if legend:
        handles: list[Any] = [Patch(facecolor=KIND_COLORS[k], edgecolor="none",
                                    label=_KIND_NAMES[k])
                              for k in "FBIW" if k in kinds_present]
        if max_chunks > 1:
            word = "direction" if inst.placement == "bidirectional" else "chunk"
            for c in range(max_chunks):
                shade = block_color("X", c, max_chunks)
                handles.append(Patch(facecolor=block_color("F", c, max_chunks),
                                     edgecolor=shade, label=f"{word} {c}"
                                     + (" (dark)" if c == 0 else
                                        " (light)" if c == max_chunks - 1 else "")))
        if pairs:
            handles.append(Patch(facecolor="white", edgecolor=_FRAME,
                                 label="overlapped F&B\n(F top, B/I bottom)"))
        if idle_rects:
            handles.append(Patch(facecolor=_IDLE_FACE, edgecolor=_IDLE_HATCH, hatch="////",
                                 label="idle"))
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0),
                  frameon=False, fontsize=8, handlelength=1.4, borderaxespad=0.0)
    if labels:
        _draw_block_labels(ax, to_label, xmax * 1.004, p)
    return ax


def _draw_block_labels(ax: Axes, blocks: Sequence[tuple[float, float, float, float, str,
                                                        Sequence[float]]],
                       xspan: float, rows: int) -> None:
    """Write ``text`` centred on each block ``(x0, width, y_centre, height, text, face)``.

    Sizes come from the axes' final drawing size (the figure's layout engine is run first,
    so legends and titles have taken their room): one font size for all blocks of the same
    width (fitted to the longest number), at most the size that fits the median block; a
    block where that is below ``_MIN_FONT`` points gets its own fit, or no label.
    """
    if not blocks:
        return
    fig = _root_figure(ax)
    engine = fig.get_layout_engine() if fig is not None else None
    if engine is not None:
        with contextlib.suppress(Exception):  # best effort: else use the current size
            engine.execute(fig)
    pts_per_unit = _axes_width_points(ax) * 0.97 / xspan
    row_pts = _axes_height_points(ax) / max(1, rows)
    ndig = max(len(b[4]) for b in blocks)

    def fit(w: float, h: float, n: int) -> float:
        return min(_MAX_FONT, h * row_pts * 0.6, w * pts_per_unit / (0.64 * n + 0.35))

    widths = sorted(b[1] for b in blocks if b[1] > 0)
    if not widths:
        return
    base = fit(widths[len(widths) // 2], max(b[3] for b in blocks), ndig)
    for x0, w, yc, h, text, face in blocks:
        # same size for every block of one width, whatever its number of digits ...
        size = min(base, fit(w, h, ndig))
        if size < _MIN_FONT:  # ... unless only the shorter numbers fit
            size = min(base, fit(w, h, len(text)))
        if size < _MIN_FONT:
            continue
        ax.text(x0 + w / 2, yc, text, ha="center", va="center", fontsize=round(size, 1),
                color=_text_color(face), clip_on=True, zorder=4)


# ----------------------------------------------------------------------------- memory
def memory(schedule: Schedule, ax: Axes | None = None, *, legend: bool = True) -> Axes:
    """Memory held over time per device, as step lines.

    Draws one step line per device (``ax.lines[d]`` is rank ``d``, from
    :func:`cpsched.metrics.memory_profile`, extended to the makespan), the instance's memory
    limit as a dashed horizontal line (``ax.lines[p]``, gid ``"limit"``) when it has one, and
    each device's peak as a marker (one ``PathCollection`` in ``ax.collections``) at the first
    time it is reached; the highest peak is annotated.  Rank 0's line is the widest and
    rank ``p - 1``'s the thinnest, so profiles that coincide remain visible.

    Args:
        schedule: the timed schedule.
        ax: axes to draw on; a new figure is created when None.
        legend: draw the legend (rank and its peak) to the right of the axes.

    Units: x in the instance's time units, y in the instance's activation units (the
    ``memory.activation`` numbers; 1 per stage per microbatch by default).

    Returns:
        The axes drawn on.
    """
    inst = schedule.instance
    p = inst.p
    if ax is None:
        ax = _new_axes((max(7.0, gantt_figsize(schedule)[0]), 3.2))
    makespan = schedule.makespan
    xmax = makespan if makespan > 0 else 1.0
    profile = memory_profile(schedule)
    colors = _device_colors(p)
    peak_x, peak_y, peak_c = [], [], []
    top = 0.0
    for d, steps in enumerate(profile):
        xs = [t for t, _ in steps]
        ys = [y for _, y in steps]
        if xs[-1] < xmax:
            xs.append(xmax)
            ys.append(ys[-1])
        peak = max(ys)
        t_peak = xs[ys.index(peak)]
        # earlier ranks drawn wider, so coincident profiles (e.g. DualPipe's mirrored
        # ranks) stay visible as nested bands
        lw = 1.2 + (1.3 * (p - 1 - d) / (p - 1) if p > 1 else 0.0)
        ax.step(xs, ys, where="post", color=colors[d], linewidth=lw,
                label=f"rank {d} (peak {_fmt_num(peak)})", gid=f"rank:{d}", zorder=2)
        peak_x.append(t_peak)
        peak_y.append(peak)
        peak_c.append(colors[d])
        top = max(top, peak)
    ax.scatter(peak_x, peak_y, c=peak_c, s=26, marker="o", edgecolors="white", linewidths=0.8,
               zorder=3, gid="peaks")
    limit = inst.memory_limit
    if limit is not None:
        ax.axhline(limit, color="#444444", linestyle="--", linewidth=1.1,
                   label=f"limit {_fmt_num(limit)}", gid="limit", zorder=1)
        top = max(top, limit)
    if peak_y:
        k = max(range(p), key=lambda d: (peak_y[d], -d))
        # above the marker, unless the limit line is right there
        near_limit = limit is not None and 0 <= limit - peak_y[k] <= 0.1 * top
        ax.annotate(f"peak {_fmt_num(peak_y[k])}", (peak_x[k], peak_y[k]),
                    xytext=(5, -11 if near_limit else 5), textcoords="offset points",
                    fontsize=8, color=colors[k])
    ax.set_xlim(0, xmax * 1.004)
    ax.set_ylim(0, top * 1.15 if top > 0 else 1.0)
    integral = all(abs(y - round(y)) < 1e-9 for steps in profile for _, y in steps)
    ax.yaxis.set_major_locator(MaxNLocator(nbins=6, steps=[1, 2, 2.5, 5, 10],
                                           integer=integral))
    ax.set_xlabel("time (instance units)")
    ax.set_ylabel("memory held\n(activation units)")
    ax.grid(color="#e4e4e4", linewidth=0.5)
    ax.set_axisbelow(True)
    for spine in ("top", "right"):
        ax.spines[spine].set_visible(False)
    if legend:
        ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), frameon=False, fontsize=8,
                  borderaxespad=0.0)
    return ax


def _device_colors(p: int) -> list[tuple[float, float, float, float]]:
    """One colour per rank, ordered (viridis without its pale yellow end)."""
    cmap = plt.get_cmap("viridis")
    if p == 1:
        return [cmap(0.25)]
    return [cmap(0.85 * d / (p - 1)) for d in range(p)]


# ------------------------------------------------------------------------ bubble bars
def bubble_bars(df: pd.DataFrame, ax: Axes | None = None, *, optimum: str = "cpsat",
                values: bool | None = None) -> Axes:
    """Grouped bars of bubble fraction per instance: every heuristic next to the optimum.

    Args:
        df: one row per (instance, schedule) with at least these columns (others are
            ignored):

            * ``instance`` (str) — instance name; one group of bars each, in order of first
              appearance;
            * ``schedule`` (str) — schedule name, e.g. ``"1f1b"``; rows with
              ``schedule == optimum`` (``"cpsat"``) are the solver's optimum, drawn last in
              each group in black with hatching;
            * ``bubble_fraction`` (float in [0, 1]) — idle fraction ``1 - busy / (p *
              makespan)``; NaN or missing combinations leave a gap.
        ax: axes to draw on; a new figure is created when None.
        optimum: schedule name of the optimum rows.
        values: write each bar's value (in %) above it; default: when there are at most 40
            bars.

    Returns:
        The axes; ``ax.patches`` holds one bar per non-NaN row, in group order.

    Raises:
        ValueError: a required column is missing, or an (instance, schedule) pair repeats.
    """
    need = ("instance", "schedule", "bubble_fraction")
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise ValueError(f"bubble_bars: df lacks column(s) {', '.join(missing)}; expected "
                         f"columns {', '.join(need)} (got {', '.join(map(str, df.columns))})")
    dup = df.duplicated(subset=["instance", "schedule"], keep=False)
    if dup.any():
        rows = df.loc[dup, ["instance", "schedule"]].drop_duplicates()
        pairs = ", ".join(f"({i}, {s})" for i, s in rows.itertuples(index=False))
        raise ValueError(f"bubble_bars: (instance, schedule) must be unique; repeated: {pairs}")
    instances = list(dict.fromkeys(df["instance"].astype(str)))
    names = list(dict.fromkeys(df["schedule"].astype(str)))
    heuristics = [n for n in names if n != optimum]
    series = heuristics + ([optimum] if optimum in names else [])
    value = {(str(i), str(s)): float(b) for i, s, b in
             df[["instance", "schedule", "bubble_fraction"]].itertuples(index=False)}
    if ax is None:
        width = min(_MAX_WIDTH, max(6.5, 1.6 + 0.28 * len(instances) * (len(series) + 1)))
        ax = _new_axes((width, 3.8))
    # only the bars present in a group are drawn, centred on the group
    present = {g: [s for s in series if not math.isnan(value.get((name, s), math.nan))]
               for g, name in enumerate(instances)}
    n = max([1, *(len(v) for v in present.values())])
    group = 0.82
    bw = group / n
    shown = sum(len(v) for v in present.values())
    if values is None:
        values = shown <= 40
    bar_pts = bw * 0.92 * _axes_width_points(ax) / (len(instances) + 0.2)
    color_of = {s: _SERIES_COLORS[k % len(_SERIES_COLORS)] for k, s in enumerate(heuristics)}
    for s in series:
        xs, ys = [], []
        for g, inst_name in enumerate(instances):
            if s not in present[g]:
                continue
            k, count = present[g].index(s), len(present[g])
            xs.append(g + bw * (k - (count - 1) / 2))
            ys.append(value[(inst_name, s)])
        if not xs:
            continue
        is_opt = s == optimum
        bars = ax.bar(xs, ys, width=bw * 0.92,
                      color=_OPTIMUM_COLOR if is_opt else color_of[s],
                      hatch="///" if is_opt else None,
                      edgecolor="white" if is_opt else "none", linewidth=0.0,
                      label="optimal (CP-SAT)" if is_opt else s, zorder=2, gid=f"series:{s}")
        if values:
            ax.bar_label(bars, labels=[f"{100 * y:.1f}" for y in ys], fontsize=7, padding=1.5,
                         rotation=90 if bar_pts < 22 else 0)
    ax.set_xticks(range(len(instances)), instances,
                  rotation=30 if len(instances) > 4 else 0,
                  ha="right" if len(instances) > 4 else "center")
    ax.set_xlim(-0.6, len(instances) - 0.4)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    ymax = max((y for y in value.values() if not math.isnan(y)), default=0.0)
    ax.set_ylim(0, max(0.05, ymax * (1.25 if values and bar_pts < 22 else 1.15)))
    ax.set_ylabel("bubble (idle fraction)")
    ax.set_title("Bubble fraction: heuristics vs optimum", loc="left", fontsize=11)
    ax.grid(axis="y", color="#e4e4e4", linewidth=0.5)
    ax.set_axisbelow(True)
    for spine in ("top", "right"):
        ax.spines[spine].set_visible(False)
    if series:
        ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), frameon=False, fontsize=8,
                  borderaxespad=0.0)
    return ax


# ----------------------------------------------------------------------------- pareto
def pareto(points: Iterable[Sequence[Any]], ax: Axes | None = None,
           schedules: Iterable[Sequence[Any]] | None = None) -> Axes:
    """The memory–makespan Pareto front from the solver, with known schedules for contrast.

    Args:
        points: ``(memory_limit, makespan, status)`` triples, one per solver run: the best
            makespan found under that per-device memory limit and its status (``"OPTIMAL"``
            when proven).  Drawn, sorted by limit, as a step line (makespan can only drop
            when the limit grows; ``ax.lines[0]``, gid ``"front"``), with proven-optimal
            points filled (``ax.lines[1]``, gid ``"optimal"``) and the others hollow
            (``ax.lines[2]``, gid ``"unproven"``).  Points with no makespan (None, NaN or
            ``status == "INFEASIBLE"``) are marked with an ``x`` on the x axis
            (gid ``"infeasible"``, drawn only when there are some).
        ax: axes to draw on; a new figure is created when None.
        schedules: optional ``(name, peak_memory, makespan)`` of hand-made schedules, each a
            labelled marker (one ``Line2D`` each, after the lines above, gid
            ``"schedule:<name>"``).  ``peak_memory`` may be a per-device list (its max is
            used).

    Units: x in the instance's activation units (memory per device), y in its time units.

    Returns:
        The axes drawn on.
    """
    if ax is None:
        ax = _new_axes((7.0, 4.4))
    feasible: list[tuple[float, float, bool]] = []
    infeasible: list[float] = []
    for pt in points:
        limit, makespan, status = pt[0], pt[1], (pt[2] if len(pt) > 2 else "UNKNOWN")
        status = str(status).upper()
        limit_f = _as_float(limit)
        ms = None if makespan is None else _as_float(makespan)
        if limit_f is None:
            continue
        if ms is None or math.isnan(ms) or status == "INFEASIBLE":
            infeasible.append(limit_f)
        else:
            feasible.append((limit_f, ms, status == "OPTIMAL"))
    feasible.sort()
    sched = []
    for entry in schedules or ():
        name, peak, ms = entry[0], entry[1], entry[2]
        if isinstance(peak, Iterable) and not isinstance(peak, str):
            peak = max(peak)
        sched.append((str(name), float(peak), float(ms)))

    xs_all = [x for x, _, _ in feasible] + [x for _, x, _ in sched] + infeasible
    x_right = max(xs_all, default=1.0)
    x_right = x_right + 0.06 * max(1.0, x_right - min(xs_all, default=0.0))
    fx = [x for x, _, _ in feasible]
    fy = [y for _, y, _ in feasible]
    if feasible:
        # extend the last step to the right edge: more memory never hurts
        fx_line, fy_line = [*fx, x_right], [*fy, fy[-1]]
    else:
        fx_line, fy_line = [], []
    ax.plot(fx_line, fy_line, drawstyle="steps-post", color="#0072B2", linewidth=1.6,
            label="optimal front (CP-SAT)", gid="front", zorder=2)
    opt = [(x, y) for x, y, o in feasible if o]
    unp = [(x, y) for x, y, o in feasible if not o]
    ax.plot([x for x, _ in opt], [y for _, y in opt], linestyle="none", marker="o",
            markersize=6, color="#0072B2", label="proven optimal", gid="optimal", zorder=3)
    ax.plot([x for x, _ in unp], [y for _, y in unp], linestyle="none", marker="o",
            markersize=6, markerfacecolor="white", markeredgecolor="#0072B2",
            markeredgewidth=1.3, label="best found (not proven)", gid="unproven", zorder=3)
    markers = ["s", "D", "^", "v", "P", "X", "<", ">", "h", "p", "*", "8"]
    for k, (name, peak, ms) in enumerate(sched):
        ax.plot([peak], [ms], linestyle="none", marker=markers[k % len(markers)],
                markersize=7, color=_SERIES_COLORS[k % len(_SERIES_COLORS)],
                markeredgecolor="#333333", markeredgewidth=0.6, label=name,
                gid=f"schedule:{name}", zorder=4)
        ax.annotate(name, (peak, ms), xytext=(5, 4), textcoords="offset points", fontsize=8)
    ys_all = fy + [ms for _, _, ms in sched]
    if ys_all:
        lo, hi = min(ys_all), max(ys_all)
        pad = 0.08 * max(hi - lo, 0.05 * hi, 1e-9)
        ax.set_ylim(lo - pad, hi + pad)
    if infeasible:
        y0 = ax.get_ylim()[0]
        ax.plot(infeasible, [y0] * len(infeasible), linestyle="none", marker="x",
                markersize=7, color="#D55E00", clip_on=False, label="infeasible",
                gid="infeasible", zorder=4)
    if xs_all:
        ax.set_xlim(min(0.0, min(xs_all)) if min(xs_all) <= 0 else min(xs_all) * 0.9,
                    x_right)
    ax.set_xlabel("memory per device (activation units)")
    ax.set_ylabel("makespan (time units)")
    ax.set_title("Memory–makespan Pareto front", loc="left", fontsize=11)
    ax.grid(color="#e4e4e4", linewidth=0.5)
    ax.set_axisbelow(True)
    for spine in ("top", "right"):
        ax.spines[spine].set_visible(False)
    ax.legend(loc="upper right", frameon=False, fontsize=8)
    return ax


def _as_float(x: Any) -> float | None:
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


# ------------------------------------------------------------------------------- save
def save_figure(ax_or_fig: Axes | Figure, path: str | Path, *, dpi: float = 150,
                close: bool = False) -> Path:
    """Write the figure holding ``ax_or_fig`` to ``path`` (format from the suffix, e.g.
    ``.png``, ``.svg``, ``.pdf``), creating parent directories; tight bounding box so
    outside legends are kept.

    Args:
        close: also close the figure (free its memory; use in loops and scripts).

    Returns:
        ``path`` as a :class:`~pathlib.Path`.
    """
    root = _root_figure(ax_or_fig)
    if root is None:
        raise ValueError("save_figure: the axes belong to no figure")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    root.savefig(out, dpi=dpi, bbox_inches="tight", facecolor="white")
    if close:
        plt.close(root)
    return out


def gantt_and_memory(schedule: Schedule, path: str | Path, *, dpi: float = 150,
                     title: str | None = None) -> Path:
    """One PNG (or any format by suffix) with the Gantt chart above and memory below.

    The two panels share the time axis.  The figure is built outside pyplot (no global
    state, nothing to close), sized by :func:`gantt_figsize`.  This is what the command line
    writes as ``<out>/<name>.png``.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.
    """
    w, h = gantt_figsize(schedule)
    mem_h = 2.4
    fig = Figure(figsize=(w, h + mem_h), layout="constrained")
    ax_g, ax_m = fig.subplots(2, 1, sharex=True, height_ratios=[h - 1.0, mem_h - 0.6])
    memory(schedule, ax=ax_m)  # first, so the Gantt labels are sized for the final layout
    gantt(schedule, ax=ax_g, title=title)
    ax_g.tick_params(axis="x", labelbottom=True)
    ax_g.set_xlabel("")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=dpi, bbox_inches="tight", facecolor="white")
    return out
