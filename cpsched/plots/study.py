"""Figures of a study over many schedules: bubble bars per instance, the Pareto front."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from matplotlib.ticker import PercentFormatter

from cpsched.plots.layout import MAX_WIDTH, axes_width_points, new_axes
from cpsched.plots.style import GRID_COLOR, OPTIMUM_COLOR, SERIES_COLORS, hide_spines

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes

#: Columns :func:`bubble_bars` needs.
BUBBLE_COLUMNS = ("instance", "schedule", "bubble_fraction")
#: Marker shapes of the hand-made schedules in :func:`pareto`, in turn.
_MARKERS = ["s", "D", "^", "v", "P", "X", "<", ">", "h", "p", "*", "8"]
#: Width of a group of bars, in group units (groups are 1 apart).
_GROUP = 0.82


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
        ax: axes to draw on; a new pyplot figure is created when None.
        optimum: schedule name of the optimum rows.
        values: write each bar's value (in %) above it; default: when there are at most 40
            bars.

    Returns:
        The axes; ``ax.patches`` holds one bar per non-NaN row, in group order; each series
        has gid ``"series:<schedule>"``.

    Raises:
        ValueError: a required column is missing, or an (instance, schedule) pair repeats.
    """
    _check_bubble_frame(df)
    instances = list(dict.fromkeys(df["instance"].astype(str)))
    names = list(dict.fromkeys(df["schedule"].astype(str)))
    heuristics = [n for n in names if n != optimum]
    series = heuristics + ([optimum] if optimum in names else [])
    value = {(str(i), str(s)): float(b) for i, s, b in
             df[list(BUBBLE_COLUMNS)].itertuples(index=False)}
    if ax is None:
        width = min(MAX_WIDTH, max(6.5, 1.6 + 0.28 * len(instances) * (len(series) + 1)))
        ax = new_axes((width, 3.8))
    # only the bars present in a group are drawn, centred on the group
    present = {g: [s for s in series if not math.isnan(value.get((name, s), math.nan))]
               for g, name in enumerate(instances)}
    bw = _GROUP / max([1, *(len(v) for v in present.values())])
    if values is None:
        values = sum(len(v) for v in present.values()) <= 40
    bar_pts = bw * 0.92 * axes_width_points(ax) / (len(instances) + 0.2)
    color_of = {s: SERIES_COLORS[k % len(SERIES_COLORS)] for k, s in enumerate(heuristics)}
    for s in series:
        xs, ys = [], []
        for g, inst_name in enumerate(instances):
            if s in present[g]:
                k, count = present[g].index(s), len(present[g])
                xs.append(g + bw * (k - (count - 1) / 2))
                ys.append(value[(inst_name, s)])
        if xs:
            is_opt = s == optimum
            _draw_series(ax, s, xs, ys, bw, is_opt, OPTIMUM_COLOR if is_opt else color_of[s],
                         values, bar_pts)
    ymax = max((y for y in value.values() if not math.isnan(y)), default=0.0)
    _style_bubble_axes(ax, instances, ymax * (1.25 if values and bar_pts < 22 else 1.15))
    if series:
        ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), frameon=False, fontsize=8,
                  borderaxespad=0.0)
    return ax


def _check_bubble_frame(df: pd.DataFrame) -> None:
    """Raise ValueError naming missing columns or repeated (instance, schedule) pairs."""
    missing = [c for c in BUBBLE_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"bubble_bars: df lacks column(s) {', '.join(missing)}; expected "
                         f"columns {', '.join(BUBBLE_COLUMNS)} "
                         f"(got {', '.join(map(str, df.columns))})")
    dup = df.duplicated(subset=["instance", "schedule"], keep=False)
    if dup.any():
        rows = df.loc[dup, ["instance", "schedule"]].drop_duplicates()
        pairs = ", ".join(f"({i}, {s})" for i, s in rows.itertuples(index=False))
        raise ValueError(f"bubble_bars: (instance, schedule) must be unique; repeated: {pairs}")


def _draw_series(ax: Axes, name: str, xs: list[float], ys: list[float], bw: float,
                 is_opt: bool, color: str, values: bool, bar_pts: float) -> None:
    """The bars of one schedule (hatched black for the optimum), with values if asked."""
    bars = ax.bar(xs, ys, width=bw * 0.92, color=color, hatch="///" if is_opt else None,
                  edgecolor="white" if is_opt else "none", linewidth=0.0,
                  label="optimal (CP-SAT)" if is_opt else name, zorder=2, gid=f"series:{name}")
    if values:
        ax.bar_label(bars, labels=[f"{100 * y:.1f}" for y in ys], fontsize=7, padding=1.5,
                     rotation=90 if bar_pts < 22 else 0)


def _style_bubble_axes(ax: Axes, instances: list[str], top: float) -> None:
    """Instance names under the groups, percent y axis up to ``top`` (at least 5%)."""
    slanted = len(instances) > 4
    ax.set_xticks(range(len(instances)), instances, rotation=30 if slanted else 0,
                  ha="right" if slanted else "center")
    ax.set_xlim(-0.6, len(instances) - 0.4)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    ax.set_ylim(0, max(0.05, top))
    ax.set_ylabel("bubble (idle fraction)")
    ax.set_title("Bubble fraction: heuristics vs optimum", loc="left", fontsize=11)
    ax.grid(axis="y", color=GRID_COLOR, linewidth=0.5)
    ax.set_axisbelow(True)
    hide_spines(ax, "top", "right")


# ----------------------------------------------------------------------------- pareto
def pareto(points: Iterable[Sequence[Any]], ax: Axes | None = None,
           schedules: Iterable[Sequence[Any]] | None = None) -> Axes:
    """The memory–makespan Pareto front from the solver, with known schedules for contrast.

    Args:
        points: ``(memory_limit, makespan, status)`` triples, one per solver run: the best
            makespan found under that per-device memory limit and its status (``"OPTIMAL"``
            when proven; a missing status counts as ``"UNKNOWN"``).  Drawn, sorted by limit,
            as a step line (makespan can only drop when the limit grows; ``ax.lines[0]``, gid
            ``"front"``), with proven-optimal points filled (``ax.lines[1]``, gid
            ``"optimal"``) and the others hollow (``ax.lines[2]``, gid ``"unproven"``).
            Points with no makespan (None, NaN or ``status == "INFEASIBLE"``) are marked with
            an ``x`` on the x axis (gid ``"infeasible"``, the last line, drawn only when there
            are some).  Points whose limit is not a number are skipped.
        ax: axes to draw on; a new pyplot figure is created when None.
        schedules: optional ``(name, peak_memory, makespan)`` of hand-made schedules, each a
            labelled marker (one ``Line2D`` each, after the lines above, gid
            ``"schedule:<name>"``).  ``peak_memory`` may be a per-device list (its max is
            used).

    Units: x in the instance's activation units (memory per device), y in its time units.

    Returns:
        The axes drawn on.

    Raises:
        IndexError: a point has fewer than 2 items, or a schedule fewer than 3.
        TypeError, ValueError: a schedule's peak memory or makespan is not a number.
    """
    if ax is None:
        ax = new_axes((7.0, 4.4))
    feasible, infeasible = _split_points(points)
    sched = _schedule_points(schedules)
    xs_all = [x for x, _, _ in feasible] + [x for _, x, _ in sched] + infeasible
    x_right = max(xs_all, default=1.0)
    x_right = x_right + 0.06 * max(1.0, x_right - min(xs_all, default=0.0))
    _draw_front(ax, feasible, x_right)
    for k, (name, peak, ms) in enumerate(sched):
        ax.plot([peak], [ms], linestyle="none", marker=_MARKERS[k % len(_MARKERS)],
                markersize=7, color=SERIES_COLORS[k % len(SERIES_COLORS)],
                markeredgecolor="#333333", markeredgewidth=0.6, label=name,
                gid=f"schedule:{name}", zorder=4)
        ax.annotate(name, (peak, ms), xytext=(5, 4), textcoords="offset points", fontsize=8)
    ys_all = [y for _, y, _ in feasible] + [ms for _, _, ms in sched]
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
    _style_pareto_axes(ax)
    return ax


def _as_float(x: Any) -> float | None:
    """``float(x)``, or None when ``x`` is not a number."""
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def _split_points(points: Iterable[Sequence[Any]],
                  ) -> tuple[list[tuple[float, float, bool]], list[float]]:
    """``(limit, makespan, proven)`` of feasible points sorted by limit; infeasible limits."""
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
    return feasible, infeasible


def _schedule_points(schedules: Iterable[Sequence[Any]] | None,
                     ) -> list[tuple[str, float, float]]:
    """``(name, peak memory, makespan)`` per schedule, a per-device peak list reduced to max."""
    out = []
    for entry in schedules or ():
        name, peak, ms = entry[0], entry[1], entry[2]
        if isinstance(peak, Iterable) and not isinstance(peak, str):
            peak = max(peak)
        out.append((str(name), float(peak), float(ms)))
    return out


def _draw_front(ax: Axes, feasible: list[tuple[float, float, bool]], x_right: float) -> None:
    """The step line to ``x_right``, then proven (filled) and unproven (hollow) points."""
    fx = [x for x, _, _ in feasible]
    fy = [y for _, y, _ in feasible]
    # extend the last step to the right edge: more memory never hurts
    fx_line, fy_line = ([*fx, x_right], [*fy, fy[-1]]) if feasible else ([], [])
    ax.plot(fx_line, fy_line, drawstyle="steps-post", color="#0072B2", linewidth=1.6,
            label="optimal front (CP-SAT)", gid="front", zorder=2)
    opt = [(x, y) for x, y, o in feasible if o]
    unp = [(x, y) for x, y, o in feasible if not o]
    ax.plot([x for x, _ in opt], [y for _, y in opt], linestyle="none", marker="o",
            markersize=6, color="#0072B2", label="proven optimal", gid="optimal", zorder=3)
    ax.plot([x for x, _ in unp], [y for _, y in unp], linestyle="none", marker="o",
            markersize=6, markerfacecolor="white", markeredgecolor="#0072B2",
            markeredgewidth=1.3, label="best found (not proven)", gid="unproven", zorder=3)


def _style_pareto_axes(ax: Axes) -> None:
    """Axis labels with units, title, grid, spines, legend."""
    ax.set_xlabel("memory per device (activation units)")
    ax.set_ylabel("makespan (time units)")
    ax.set_title("Memory–makespan Pareto front", loc="left", fontsize=11)
    ax.grid(color=GRID_COLOR, linewidth=0.5)
    ax.set_axisbelow(True)
    hide_spines(ax, "top", "right")
    ax.legend(loc="upper right", frameon=False, fontsize=8)
