"""Writing figures to files: any figure, and the command line's Gantt-over-memory picture."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from cpsched.plots.gantt_chart import gantt, gantt_figsize
from cpsched.plots.layout import root_figure
from cpsched.plots.memory_chart import memory

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from cpsched.model import Schedule


def save_figure(ax_or_fig: Axes | Figure, path: str | Path, *, dpi: float = 150,
                close: bool = False) -> Path:
    """Write the figure holding ``ax_or_fig`` to ``path``, creating parent directories.

    The format comes from the suffix (``.png``, ``.svg``, ``.pdf``, ...); the bounding box is
    tight, so legends outside the axes are kept; the background is white.

    Args:
        ax_or_fig: an Axes, SubFigure or Figure; its top-level figure is written.
        path: the output file.
        dpi: resolution of raster formats, in dots per inch.
        close: also close the figure (free its memory; use in loops and scripts).

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        ValueError: ``ax_or_fig`` belongs to no figure, or matplotlib does not know the
            suffix.
        OSError: the file or its folder cannot be written.
    """
    root = root_figure(ax_or_fig)
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
    state, nothing to close), sized by :func:`~cpsched.plots.gantt_figsize` plus 2.4 inches
    for the memory panel.  This is what ``cpsched solve`` writes as ``<out>/<name>.png``.

    Args:
        schedule: the timed schedule.
        path: the output file; parent directories are created.
        dpi: resolution of raster formats, in dots per inch.
        title: the Gantt chart's title (see :func:`~cpsched.plots.gantt`).

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        ValueError: matplotlib does not know the suffix.
        OSError: the file or its folder cannot be written.
    """
    fig = gantt_and_memory_figure(schedule, title=title)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=dpi, bbox_inches="tight", facecolor="white")
    return out


def gantt_and_memory_figure(schedule: Schedule, *, title: str | None = None) -> Figure:
    """The figure :func:`gantt_and_memory` writes: a :class:`Figure` outside pyplot whose
    ``axes`` are ``[gantt, memory]``, sized by :func:`~cpsched.plots.gantt_figsize` plus 2.4
    inches for the memory panel."""
    w, h = gantt_figsize(schedule)
    mem_h = 2.4
    fig = Figure(figsize=(w, h + mem_h), layout="constrained")
    ax_g, ax_m = fig.subplots(2, 1, sharex=True, height_ratios=[h - 1.0, mem_h - 0.6])
    memory(schedule, ax=ax_m)  # first, so the Gantt labels are sized for the final layout
    gantt(schedule, ax=ax_g, title=title)
    ax_g.tick_params(axis="x", labelbottom=True)
    ax_g.set_xlabel("")
    return fig
