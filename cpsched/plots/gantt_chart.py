"""The Gantt chart: one row per device, one block per action, idle time hatched."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.collections import PathCollection, PolyCollection
from matplotlib.patches import Patch, Rectangle
from matplotlib.path import Path
from matplotlib.ticker import MaxNLocator
from matplotlib.transforms import TransformedPatchPath

from cpsched.metrics import step_rows
from cpsched.model import Kind
from cpsched.plots.layout import (
    MAX_WIDTH,
    BlockLabel,
    draw_block_labels,
    label_sizes,
    new_axes,
)
from cpsched.plots.style import (
    FRAME,
    IDLE_FACE,
    IDLE_HATCH,
    KIND_COLORS,
    KIND_NAMES,
    block_color,
    chunk_of,
    fmt_num,
    hide_spines,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from cpsched.model import Schedule, TimedAction

#: Height of a device row's blocks (rows are 1 apart).
ROW_HEIGHT = 0.82


def blocks_per_device(schedule: Schedule) -> int:
    """Most blocks on one device (an overlapped pair counts once)."""
    counts = [0] * max(1, schedule.instance.p)
    for a in step_rows(schedule.actions):
        if 0 <= a.device < len(counts):
            counts[a.device] += 1
    return max(counts)


def gantt_figsize(schedule: Schedule) -> tuple[float, float]:
    """Figure size ``(width, height)`` in inches that keeps a Gantt chart readable.

    Width grows with the number of time slots (makespan / shortest action, at least the
    number of blocks on the busiest device) so the shortest blocks stay about 0.16 inch wide:
    between 7 and 28 inches.  Height grows with the number of devices ``p``: at least 2.6
    inches.  Raises nothing for a schedule whose instance has ``p >= 1``.
    """
    durations = [a.end - a.start for a in schedule.actions if a.end > a.start]
    slots = schedule.makespan / min(durations) if durations else 1.0
    slots = max(slots, blocks_per_device(schedule))
    width = min(MAX_WIDTH, max(7.0, 2.6 + 0.16 * slots))
    height = 1.4 + 0.42 * schedule.instance.p
    return (round(width, 2), round(max(2.6, height), 2))


#: Points of a chart's width that are not the Gantt axes (rank labels left, legend right):
#: 165–200 measured on the command line's 16-rank PNGs (:func:`label_count`).
MARGIN_PTS = 190.0


def label_count(schedule: Schedule) -> int:
    """About how many blocks the command line's PNG (:func:`cpsched.plots.gantt_and_memory`)
    numbers, found without drawing: the labels :func:`gantt` would fit into axes as wide as
    the figure of :func:`gantt_figsize` less :data:`MARGIN_PTS`.  Numbering a block costs
    about as much as drawing four (docs/modelling.md §61), so the time a PNG takes is
    estimated from this and the number of actions."""
    if not schedule.actions:
        return 0
    w, h = gantt_figsize(schedule)
    xspan = (schedule.makespan if schedule.makespan > 0 else 1.0) * 1.004
    pts_per_unit = max(72.0, 72.0 * w - MARGIN_PTS) * 0.97 / xspan
    row_pts = (h - 1.0) * 72.0 * 0.85 / max(1, schedule.instance.p)
    blocks = []
    for a in schedule.actions:
        y0, height = _block_rows(a)
        blocks.append(BlockLabel(a.start, a.end - a.start, y0 + height / 2, height,
                                 str(a.microbatch), ()))
    return sum(size is not None for size in label_sizes(blocks, pts_per_unit, row_pts))


def _block_rows(a: TimedAction) -> tuple[float, float]:
    """``(y0, height)`` of an action's block: its device's row, or the top half (``F``) or
    bottom half (``B``/``I``) of it in an overlapped pair (the y axis is inverted: rank 0 on
    top, smaller y drawn higher)."""
    if a.overlap is None:
        return a.device - ROW_HEIGHT / 2, ROW_HEIGHT
    y0 = a.device - ROW_HEIGHT / 2 if a.kind == Kind.F else a.device
    return y0, ROW_HEIGHT / 2


def idle_intervals(actions: Iterable[TimedAction], p: int,
                   makespan: float) -> list[list[tuple[float, float]]]:
    """Idle ``(start, width)`` intervals per device ``0..p-1`` within ``[0, makespan]``."""
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


@dataclass
class _Drawn:
    """What :func:`_draw_blocks` drew: what the legend and the labels need."""

    labels: list[BlockLabel] = field(default_factory=list)
    pairs: dict[int, list[TimedAction]] = field(default_factory=dict)
    kinds: set[str] = field(default_factory=set)
    max_chunks: int = 1


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
    (omitted when the block is too narrow).  Idle time is drawn as hatched grey bars so
    bubbles stand out: one :class:`~matplotlib.collections.PolyCollection` in
    ``ax.collections``, gid ``"idle"``, one polygon per idle interval (the grey faces), and
    over it one :class:`~matplotlib.collections.PathCollection` of a single compound path,
    gid ``"idle-hatch"``, that carries the hatch (hatching each polygon on its own took
    2 of the 4.5 s of writing a 12 288-action PNG; docs/modelling.md §61).

    Args:
        schedule: the timed schedule (``schedule.instance`` gives ``p`` and the placement).
        ax: axes to draw on; when None a new pyplot figure is created, sized by
            :func:`gantt_figsize`.
        title: replaces the default title ``"<instance> — <method>: makespan X, bubble Y%"``
            (pass ``""`` for none).
        labels: write microbatch numbers on the blocks.
        legend: draw the legend (kinds, chunk shades, overlap, idle) right of the axes.

    Returns:
        The axes drawn on.  Nothing is raised for an invalid schedule: actions on devices
        outside ``0..p-1`` are drawn outside the rows.
    """
    p = schedule.instance.p
    if ax is None:
        ax = new_axes(gantt_figsize(schedule))
    xmax = schedule.makespan if schedule.makespan > 0 else 1.0
    has_idle = _draw_idle(ax, schedule)
    drawn = _draw_blocks(ax, schedule)
    _style_axes(ax, p, xmax)
    if title is None:
        title = _default_title(schedule)
    if title:
        ax.set_title(title, loc="left", fontsize=11)
    if legend:
        _draw_legend(ax, schedule, drawn, has_idle)
    if labels:
        draw_block_labels(ax, drawn.labels, xmax * 1.004, p)
    return ax


def _draw_idle(ax: Axes, schedule: Schedule) -> bool:
    """Hatched idle bars behind the blocks; True when there is any idle time."""
    idle = idle_intervals(schedule.actions, schedule.instance.p, schedule.makespan)
    rects = []
    for d, gaps in enumerate(idle):
        y0 = d - ROW_HEIGHT / 2
        y1 = y0 + ROW_HEIGHT
        for x0, w in gaps:
            rects.append([(x0, y0), (x0, y1), (x0 + w, y1), (x0 + w, y0)])
    if rects:
        pc = PolyCollection(rects, facecolors=IDLE_FACE, edgecolors="none", linewidths=0.0,
                            zorder=0.5, gid="idle")
        ax.add_collection(pc, autolim=False)
        ax.add_collection(_hatch_over(rects), autolim=False)
    return bool(rects)


def _hatch_over(rects: list[list[tuple[float, float]]]) -> PathCollection:
    """The idle bars' hatch as one compound path: Agg hatches a path in one pass, where a
    collection of ``n`` polygons is hatched ``n`` times (same pixels, a fraction of the time)."""
    verts = np.array([v for r in rects for v in (*r, r[0])], dtype=float)
    step = [Path.MOVETO] + [Path.LINETO] * 3 + [Path.CLOSEPOLY]
    codes = np.tile(np.array(step, dtype=Path.code_type), len(rects))
    return PathCollection([Path(verts, codes)], facecolors="none", edgecolors=IDLE_HATCH,
                          linewidths=0.0, hatch="////", zorder=0.6, gid="idle-hatch")


def _draw_blocks(ax: Axes, schedule: Schedule) -> _Drawn:
    """One rectangle per action (halves for overlapped pairs), then a frame per pair."""
    inst = schedule.instance
    edge_lw = 0.6 if blocks_per_device(schedule) < 80 else 0.3
    drawn = _Drawn()
    # one clip path for every block (each would else get its own copy of the axes' frame)
    clip = TransformedPatchPath(ax.patch)
    for a in schedule.actions:
        kind = str(a.kind)
        drawn.kinds.add(kind)
        chunk, n_chunks = chunk_of(inst, a)
        drawn.max_chunks = max(drawn.max_chunks, n_chunks)
        face = block_color(kind, chunk, n_chunks)
        w = a.end - a.start
        y0, h = _block_rows(a)
        if a.overlap is not None:
            drawn.pairs.setdefault(a.overlap, []).append(a)
        ax.add_artist(Rectangle((a.start, y0), w, h, facecolor=face, edgecolor="white",
                                linewidth=edge_lw, zorder=2, in_layout=False, clip_path=clip,
                                gid=f"action:{a.stage}{kind}{a.microbatch}"))
        drawn.labels.append(BlockLabel(a.start, w, y0 + h / 2, h, str(a.microbatch), face))
    for ov, members in sorted(drawn.pairs.items()):
        x0 = min(m.start for m in members)
        x1 = max(m.end for m in members)
        d = members[0].device
        ax.add_artist(Rectangle((x0, d - ROW_HEIGHT / 2), x1 - x0, ROW_HEIGHT, fill=False,
                                edgecolor=FRAME, linewidth=0.9, zorder=3, in_layout=False,
                                clip_path=clip, gid=f"overlap:{ov}"))
    return drawn


def _style_axes(ax: Axes, p: int, xmax: float) -> None:
    """Limits, rank labels (rank 0 on top), time ticks, grid, spines."""
    ax.set_xlim(0, xmax * 1.004)
    ax.set_ylim(p - 0.5, -0.5)
    ax.set_yticks(range(p), [f"rank {d}" for d in range(p)])
    ax.tick_params(axis="y", length=0)
    ax.xaxis.set_major_locator(MaxNLocator(nbins="auto", steps=[1, 2, 2.5, 5, 10]))
    ax.set_xlabel("time (instance units)")
    hide_spines(ax, "top", "right", "left")
    ax.grid(axis="x", color="#dddddd", linewidth=0.5, zorder=0)
    ax.set_axisbelow(True)


def _default_title(schedule: Schedule) -> str:
    """``"<instance> — <method>: makespan X, bubble Y%  (p=.., v=.., m=..[, ...])"``."""
    inst = schedule.instance
    title = (f"{inst.name} — {schedule.method}: makespan {fmt_num(schedule.makespan)}, "
             f"bubble {100 * schedule.bubble_fraction:.1f}%")
    shape = f"p={inst.p}, v={inst.v}, m={inst.m}"
    if inst.placement != "loop":
        shape += f", placement {inst.placement}"
    if schedule.status not in ("HEURISTIC", ""):
        shape += f", {schedule.status}"
    return f"{title}  ({shape})"


def _draw_legend(ax: Axes, schedule: Schedule, drawn: _Drawn, has_idle: bool) -> None:
    """Kinds present, chunk (or direction) shades, overlapped pairs and idle, right of ``ax``."""
    handles: list[Any] = [Patch(facecolor=KIND_COLORS[k], edgecolor="none", label=KIND_NAMES[k])
                          for k in "FBIW" if k in drawn.kinds]
    n = drawn.max_chunks
    if n > 1:
        word = "direction" if schedule.instance.placement == "bidirectional" else "chunk"
        for c in range(n):
            tone = " (dark)" if c == 0 else " (light)" if c == n - 1 else ""
            handles.append(Patch(facecolor=block_color("F", c, n),
                                 edgecolor=block_color("X", c, n), label=f"{word} {c}{tone}"))
    if drawn.pairs:
        handles.append(Patch(facecolor="white", edgecolor=FRAME,
                             label="overlapped F&B\n(F top, B/I bottom)"))
    if has_idle:
        handles.append(Patch(facecolor=IDLE_FACE, edgecolor=IDLE_HATCH, hatch="////",
                             label="idle"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0),
              frameon=False, fontsize=8, handlelength=1.4, borderaxespad=0.0)
