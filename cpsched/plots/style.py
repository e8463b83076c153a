"""Colours, shades and number formats shared by every figure.

* **Colour = kind** of action, from Okabe & Ito's colour-blind-safe palette (:data:`KIND_COLORS`).
* **Shade = chunk**: a device holds ``v`` (``pipeline.stages_per_device``) stages, its
  *chunks*; :func:`chunk_of` gives an action's chunk index on its device and
  :func:`block_color` lightens the kind's colour with it.
* Series (schedules in bar charts and Pareto plots) and devices (memory lines) get their own
  palettes, :data:`SERIES_COLORS` and :func:`device_colors`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import matplotlib.pyplot as plt
from matplotlib.colors import to_rgb

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from cpsched.model import TimedAction

RGB = tuple[float, float, float]

#: Base (chunk 0) colour per action kind — Okabe & Ito's colour-blind-safe palette.
KIND_COLORS: dict[str, str] = {
    "F": "#0072B2",  # blue
    "B": "#D55E00",  # vermillion
    "I": "#009E73",  # bluish green
    "W": "#CC79A7",  # reddish purple
}
#: Legend label per action kind.
KIND_NAMES: dict[str, str] = {
    "F": "F  forward",
    "B": "B  backward",
    "I": "I  backward (input grad)",
    "W": "W  backward (weight grad)",
}
#: How far the lightest chunk is blended towards white (0 = no shading, 1 = white).
LIGHTEST = 0.58
#: Idle bars of the Gantt chart: face and hatch colours.
IDLE_FACE = "#f3f3f3"
IDLE_HATCH = "#c4c4c4"
#: Frame around an overlapped F&B pair; also the optimum's bar colour.
FRAME = "#222222"
OPTIMUM_COLOR = "#222222"
#: Light grid lines.
GRID_COLOR = "#e4e4e4"
#: Colours for schedules in bar charts and Pareto plots (Okabe–Ito, then Tol's muted).
SERIES_COLORS: list[str] = [
    "#E69F00", "#56B4E9", "#009E73", "#0072B2", "#D55E00", "#CC79A7",
    "#882255", "#44AA99", "#999933", "#AA4499", "#332288", "#DDCC77",
]


def chunk_of(schedule_or_instance: Any, action: TimedAction) -> tuple[int, int]:
    """``(chunk, number of chunks)`` of an action on its device: its shading index.

    The chunk is the local index of ``action.stage`` among the stages placed on
    ``action.device`` (``Instance.stages_of``), so ``0 <= chunk < v``; with ``bidirectional``
    placement (DualPipe) it is the direction instead: 0 for microbatches ``< m // 2``, else 1
    (and the count is 2).  A misplaced action (invalid schedule) gets chunk 0.

    Args:
        schedule_or_instance: a :class:`~cpsched.model.Schedule` (its ``instance`` is used)
            or an :class:`~cpsched.instance.Instance`.
        action: the timed action.

    Returns:
        ``(chunk, n_chunks)`` with ``n_chunks >= 1``.

    Raises:
        AttributeError: ``schedule_or_instance`` is neither a schedule nor an instance.
    """
    inst = getattr(schedule_or_instance, "instance", schedule_or_instance)
    if inst.placement == "bidirectional":
        return (0 if action.microbatch < inst.m // 2 else 1), 2
    local = inst.stages_of(action.device)
    try:
        return local.index(action.stage), max(1, len(local))
    except ValueError:  # a misplaced action (invalid schedule): still draw it
        return 0, max(1, len(local))


def block_color(kind: str, chunk: int = 0, n_chunks: int = 1) -> RGB:
    """RGB colour of a block: the kind's colour, lightened towards white with the chunk.

    Chunk 0 is the kind's base colour (:data:`KIND_COLORS`; grey for an unknown kind); chunk
    ``n_chunks - 1`` is blended :data:`LIGHTEST` of the way to white; chunks in between are
    spaced evenly.

    Returns:
        ``(r, g, b)``, each in ``[0, 1]``.  Raises nothing.
    """
    base = to_rgb(KIND_COLORS.get(str(kind), "#777777"))
    t = 0.0 if n_chunks <= 1 else LIGHTEST * chunk / (n_chunks - 1)
    return tuple(c + (1.0 - c) * t for c in base)  # type: ignore[return-value]


def text_color(rgb: Sequence[float]) -> str:
    """``"black"`` or ``"white"``, whichever reads better on ``rgb`` (WCAG luminance)."""

    def lin(c: float) -> float:
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    lum = 0.2126 * lin(rgb[0]) + 0.7152 * lin(rgb[1]) + 0.0722 * lin(rgb[2])
    return "black" if lum > 0.23 else "white"


def device_colors(p: int) -> list[tuple[float, float, float, float]]:
    """One RGBA colour per rank ``0..p-1``, ordered (viridis without its pale yellow end)."""
    cmap = plt.get_cmap("viridis")
    if p == 1:
        return [cmap(0.25)]
    return [cmap(0.85 * d / (p - 1)) for d in range(p)]


def fmt_num(x: float) -> str:
    """``"285"`` for integral values, else up to 4 significant digits (``"2.5"``)."""
    return str(int(round(x))) if abs(x - round(x)) < 1e-9 else f"{x:.4g}"


def hide_spines(ax: Axes, *sides: str) -> None:
    """Hide the named spines (``"top"``, ``"right"``, ``"left"``, ``"bottom"``) of ``ax``."""
    for side in sides:
        ax.spines[side].set_visible(False)
