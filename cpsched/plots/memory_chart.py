"""Memory held over time per device, with each device's peak and the instance's limit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from matplotlib.ticker import MaxNLocator

from cpsched.metrics import memory_profile
from cpsched.plots.gantt_chart import gantt_figsize
from cpsched.plots.layout import new_axes
from cpsched.plots.style import GRID_COLOR, device_colors, fmt_num, hide_spines

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from cpsched.model import Schedule

#: A device's peak: ``(first time reached, value, colour)``.
Peak = tuple[float, float, tuple[float, float, float, float]]


def memory(schedule: Schedule, ax: Axes | None = None, *, legend: bool = True) -> Axes:
    """Memory held over time per device, as step lines.

    Draws one step line per device (``ax.lines[d]`` is rank ``d``, gid ``"rank:<d>"``, from
    :func:`cpsched.metrics.memory_profile`, extended to the makespan), the instance's memory
    limit as a dashed horizontal line (``ax.lines[p]``, gid ``"limit"``) when it has one, and
    each device's peak as a marker (one ``PathCollection`` in ``ax.collections``, gid
    ``"peaks"``) at the first time it is reached; the highest peak is annotated.  Rank 0's line
    is the widest and rank ``p - 1``'s the thinnest, so profiles that coincide remain visible.

    Args:
        schedule: the timed schedule.
        ax: axes to draw on; a new pyplot figure is created when None.
        legend: draw the legend (rank and its peak) to the right of the axes.

    Units: x in the instance's time units, y in the instance's activation units (the
    ``memory.activation`` numbers; 1 per stage per microbatch by default).

    Returns:
        The axes drawn on.

    Raises:
        IndexError: an action's device is ``p`` or more (from
            :func:`~cpsched.metrics.memory_profile`).
    """
    inst = schedule.instance
    if ax is None:
        ax = new_axes((max(7.0, gantt_figsize(schedule)[0]), 3.2))
    xmax = schedule.makespan if schedule.makespan > 0 else 1.0
    profile = memory_profile(schedule)
    peaks = _draw_profiles(ax, profile, xmax, device_colors(inst.p))
    ax.scatter([t for t, _, _ in peaks], [y for _, y, _ in peaks], c=[c for _, _, c in peaks],
               s=26, marker="o", edgecolors="white", linewidths=0.8, zorder=3, gid="peaks")
    top = max((y for _, y, _ in peaks), default=0.0)
    limit = inst.memory_limit
    if limit is not None:
        ax.axhline(limit, color="#444444", linestyle="--", linewidth=1.1,
                   label=f"limit {fmt_num(limit)}", gid="limit", zorder=1)
        top = max(top, limit)
    if peaks:
        _annotate_highest(ax, peaks, limit, top)
    ax.set_xlim(0, xmax * 1.004)
    ax.set_ylim(0, top * 1.15 if top > 0 else 1.0)
    integral = all(abs(y - round(y)) < 1e-9 for steps in profile for _, y in steps)
    ax.yaxis.set_major_locator(MaxNLocator(nbins=6, steps=[1, 2, 2.5, 5, 10],
                                           integer=integral))
    ax.set_xlabel("time (instance units)")
    ax.set_ylabel("memory held\n(activation units)")
    ax.grid(color=GRID_COLOR, linewidth=0.5)
    ax.set_axisbelow(True)
    hide_spines(ax, "top", "right")
    if legend:
        ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), frameon=False, fontsize=8,
                  borderaxespad=0.0)
    return ax


def _draw_profiles(ax: Axes, profile: list[list[tuple[float, float]]], xmax: float,
                   colors: list[tuple[float, float, float, float]]) -> list[Peak]:
    """One step line per device (``profile[d]`` is ``[(time, memory), ...]``); the peaks."""
    p = len(profile)
    peaks: list[Peak] = []
    for d, steps in enumerate(profile):
        xs = [t for t, _ in steps]
        ys = [y for _, y in steps]
        if xs[-1] < xmax:
            xs.append(xmax)
            ys.append(ys[-1])
        peak = max(ys)
        # earlier ranks drawn wider, so coincident profiles (e.g. DualPipe's mirrored
        # ranks) stay visible as nested bands
        lw = 1.2 + (1.3 * (p - 1 - d) / (p - 1) if p > 1 else 0.0)
        ax.step(xs, ys, where="post", color=colors[d], linewidth=lw,
                label=f"rank {d} (peak {fmt_num(peak)})", gid=f"rank:{d}", zorder=2)
        peaks.append((xs[ys.index(peak)], peak, colors[d]))
    return peaks


def _annotate_highest(ax: Axes, peaks: list[Peak], limit: float | None, top: float) -> None:
    """Write ``"peak X"`` by the highest peak (lowest rank on ties), below it if the limit
    line is right above."""
    k = max(range(len(peaks)), key=lambda d: (peaks[d][1], -d))
    t, y, color = peaks[k]
    near_limit = limit is not None and 0 <= limit - y <= 0.1 * top
    ax.annotate(f"peak {fmt_num(y)}", (t, y), xytext=(5, -11 if near_limit else 5),
                textcoords="offset points", fontsize=8, color=color)

