"""Figure geometry: new axes, drawing sizes in points, and fitting labels into blocks."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from cpsched.plots.style import text_color

if TYPE_CHECKING:
    from matplotlib.axes import Axes

#: Widest figure created automatically (inches).
MAX_WIDTH = 28.0
#: Smallest label font size (points) still drawn; smaller labels are omitted.
MIN_FONT = 4.0
#: Largest label font size (points).
MAX_FONT = 9.0


class BlockLabel(NamedTuple):
    """A text to centre on a block: its box in data units, the text and the block's colour."""

    x0: float
    width: float
    y_centre: float
    height: float
    text: str
    face: Sequence[float]


def new_axes(figsize: tuple[float, float]) -> Axes:
    """Axes of a new pyplot figure of ``figsize`` inches (width, height), constrained layout."""
    _fig, ax = plt.subplots(figsize=figsize, layout="constrained")
    return ax


def root_figure(obj: Any) -> Figure | None:
    """The top-level :class:`Figure` of an Axes, SubFigure or Figure; None if there is none."""
    fig = obj
    for _ in range(8):  # Axes -> (SubFigure ->)* Figure
        if fig is None or isinstance(fig, Figure):
            return fig
        fig = getattr(fig, "figure", None)
    return None


def axes_width_points(ax: Axes) -> float:
    """Current drawing width of ``ax`` in points (at least 1)."""
    fig = root_figure(ax)
    dpi = fig.dpi if fig is not None else 72.0
    return max(1.0, ax.bbox.width / dpi * 72.0)


def axes_height_points(ax: Axes) -> float:
    """Current drawing height of ``ax`` in points (at least 1)."""
    fig = root_figure(ax)
    dpi = fig.dpi if fig is not None else 72.0
    return max(1.0, ax.bbox.height / dpi * 72.0)


def label_sizes(blocks: Sequence[BlockLabel], pts_per_unit: float,
                row_pts: float) -> list[float | None]:
    """The font size (points, one decimal) of each block's label, or None where none fits.

    One font size for all blocks of the same width (fitted to the longest text), at most the
    size that fits the median block; a block where that is below :data:`MIN_FONT` points gets
    its own fit to its own text, or no label.

    Args:
        blocks: the blocks, in data units (x: time, y: rows of height 1).
        pts_per_unit: points per data unit on the x axis.
        row_pts: points per row (unit of y).
    """
    if not blocks:
        return []
    ndig = max(len(b.text) for b in blocks)

    def fit(w: float, h: float, n: int) -> float:
        return min(MAX_FONT, h * row_pts * 0.6, w * pts_per_unit / (0.64 * n + 0.35))

    widths = sorted(b.width for b in blocks if b.width > 0)
    if not widths:
        return [None] * len(blocks)
    base = fit(widths[len(widths) // 2], max(b.height for b in blocks), ndig)
    sizes: list[float | None] = []
    for b in blocks:
        # same size for every block of one width, whatever its number of digits ...
        size = min(base, fit(b.width, b.height, ndig))
        if size < MIN_FONT:  # ... unless only the shorter texts fit
            size = min(base, fit(b.width, b.height, len(b.text)))
        sizes.append(round(size, 1) if size >= MIN_FONT else None)
    return sizes


def draw_block_labels(ax: Axes, blocks: Sequence[BlockLabel], xspan: float, rows: int) -> None:
    """Write each block's text centred on it, in black or white by its colour, at the size
    :func:`label_sizes` gives for the axes' final drawing size (the figure's layout engine is
    run first, so legends and titles have taken their room).

    Args:
        ax: the axes the blocks are drawn on.
        blocks: the blocks, in data units.
        xspan: width of the x axis in data units (``xlim`` right minus left).
        rows: number of unit-height rows on the y axis.
    """
    if not blocks:
        return
    fig = root_figure(ax)
    engine = fig.get_layout_engine() if fig is not None else None
    if engine is not None:
        with contextlib.suppress(Exception):  # best effort: else use the current size
            engine.execute(fig)
    pts_per_unit = axes_width_points(ax) * 0.97 / xspan
    row_pts = axes_height_points(ax) / max(1, rows)
    for b, size in zip(blocks, label_sizes(blocks, pts_per_unit, row_pts), strict=True):
        if size is not None:
            ax.text(b.x0 + b.width / 2, b.y_centre, b.text, ha="center", va="center",
                    fontsize=size, color=text_color(b.face), clip_on=True, zorder=4,
                    in_layout=False)
