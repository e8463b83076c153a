"""Tests for cpsched.plots: artists drawn per figure, given axes, placements, split backward,
overlapped pairs, memory limit, and image comparisons against stored baselines.

Regenerate the baselines (after an intended visual change) with
``CPSCHED_UPDATE_BASELINES=1 pytest tests/test_plots.py`` and look at them before committing.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.collections import PathCollection, PolyCollection  # noqa: E402
from matplotlib.colors import to_rgb  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from matplotlib.testing.compare import compare_images  # noqa: E402

from cpsched import plots  # noqa: E402
from cpsched.instance import Instance  # noqa: E402
from cpsched.model import Action, Kind, Overlap, Schedule  # noqa: E402
from cpsched.schedules import run_schedule  # noqa: E402
from cpsched.simulate import simulate  # noqa: E402

BASELINES = Path(__file__).parent / "baseline_images"
UPDATE = os.environ.get("CPSCHED_UPDATE_BASELINES") == "1"


# ---------------------------------------------------------------------- public names
def test_public_names() -> None:
    assert plots.__all__ == ["KIND_COLORS", "block_color", "bubble_bars", "chunk_of", "gantt",
                             "gantt_and_memory", "gantt_figsize", "memory", "pareto",
                             "save_figure"]
    for name in plots.__all__[1:]:
        assert callable(getattr(plots, name)), name


# ------------------------------------------------------------------------ fixtures
def make_instance(name: str, p: int, m: int, v: int = 1, placement: str = "loop",
                  split: bool = False, limit: float | None = None, **costs: float) -> Instance:
    data: dict = {"name": name,
                  "pipeline": {"devices": p, "stages_per_device": v, "microbatches": m,
                               "placement": placement, "split_backward": split},
                  "costs": costs}
    if limit is not None:
        data["memory"] = {"limit": limit}
    return Instance.from_dict(data)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def article_sched() -> Schedule:
    """The article's example: p=4, v=2, m=8, F=5, B=10, interleaved 1F1B (makespan 285)."""
    inst = make_instance("article-interleaved", 4, 8, v=2, forward=5, backward=10)
    return run_schedule("interleaved-1f1b", inst)


@pytest.fixture(scope="module")
def split_schedule() -> Schedule:
    """1F1B-shaped with I in place of B and each W right after its I (split backward)."""
    inst = make_instance("zb-like", 3, 4, split=True, forward=5, backward_input=5,
                         backward_weight=5)
    orders = []
    for r in range(inst.p):
        warm = min(inst.p - r - 1, inst.m)
        ops = [Action(Kind.F, r, i) for i in range(warm)]
        for k in range(inst.m - warm):
            ops += [Action(Kind.F, r, warm + k), Action(Kind.I, r, k), Action(Kind.W, r, k)]
        for i in range(inst.m - warm, inst.m):
            ops += [Action(Kind.I, r, i), Action(Kind.W, r, i)]
        orders.append(ops)
    return simulate(inst, orders, method="zb-like")


@pytest.fixture(scope="module")
def overlap_schedule() -> Schedule:
    """1F1B-shaped where F(warm + k) runs overlapped with B(k - 1) in steady state."""
    inst = make_instance("overlap", 3, 5, forward=5, backward=10, overlap_forward_backward=12)
    orders = []
    for r in range(inst.p):
        warm = min(inst.p - r - 1, inst.m)
        ops: list = [Action(Kind.F, r, i) for i in range(warm + 1)]
        for k in range(1, inst.m - warm):
            ops.append(Overlap(Action(Kind.F, r, warm + k), Action(Kind.B, r, k - 1)))
        ops += [Action(Kind.B, r, i) for i in range(inst.m - warm - 1, inst.m)]
        orders.append(ops)
    return simulate(inst, orders, method="1f1b-overlap")


def gpipe_like_orders(inst: Instance) -> list[list[Action]]:
    """All forwards (stage order), then all backwards (reverse stage order), per device."""
    orders: list[list[Action]] = [[] for _ in range(inst.p)]
    for i in range(inst.m):
        for s in range(inst.num_stages):
            orders[inst.device_of(s, i)].append(Action(Kind.F, s, i))
    for i in range(inst.m):
        for s in reversed(range(inst.num_stages)):
            orders[inst.device_of(s, i)].append(Action(Kind.B, s, i))
    return orders


def action_patches(ax: Axes) -> list[Rectangle]:
    return [p for p in ax.patches if str(p.get_gid() or "").startswith("action:")]


def frame_patches(ax: Axes) -> list[Rectangle]:
    return [p for p in ax.patches if str(p.get_gid() or "").startswith("overlap:")]


def patch_by_gid(ax: Axes, gid: str) -> Rectangle:
    (patch,) = [p for p in ax.patches if p.get_gid() == gid]
    return patch


def n_pairs(schedule: Schedule) -> int:
    return len({a.overlap for a in schedule.actions if a.overlap is not None})


# --------------------------------------------------------------------------- gantt
def test_gantt_one_rectangle_per_action(article_sched: Schedule) -> None:
    ax = plots.gantt(article_sched)
    assert isinstance(ax, Axes)
    assert len(ax.patches) == len(article_sched.actions) == 128
    assert all(isinstance(p, Rectangle) for p in ax.patches)
    assert not frame_patches(ax)
    rect = patch_by_gid(ax, "action:4F0")  # chunk 1 of rank 0
    a = next(x for x in article_sched.actions if (x.stage, x.kind, x.microbatch) == (4, "F", 0))
    assert rect.get_x() == a.start and rect.get_width() == a.end - a.start
    assert rect.get_y() < a.device < rect.get_y() + rect.get_height()


def test_gantt_axes_title_and_legend(article_sched: Schedule) -> None:
    ax = plots.gantt(article_sched)
    assert ax.get_xlim()[0] == 0 and ax.get_xlim()[1] >= article_sched.makespan
    lo, hi = ax.get_ylim()
    assert lo > hi  # inverted: rank 0 on top
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"rank {d}" for d in range(4)]
    title = ax.get_title(loc="left")
    for part in ("article-interleaved", "interleaved-1f1b", "285", "15.8%"):
        assert part in title
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.startswith("F") for t in legend) and any(t.startswith("B") for t in legend)
    assert "chunk 0 (dark)" in legend and "chunk 1 (light)" in legend and "idle" in legend
    assert not any(t.startswith("I ") or t.startswith("W ") for t in legend)
    assert "time" in ax.get_xlabel()


def test_gantt_custom_title_and_no_legend(article_sched: Schedule) -> None:
    ax = plots.gantt(article_sched, title="", legend=False)
    assert ax.get_title(loc="left") == "" and ax.get_legend() is None
    ax = plots.gantt(article_sched, title="mine")
    assert ax.get_title(loc="left") == "mine"


def test_gantt_uses_given_axes(article_sched: Schedule) -> None:
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(8, 5))
    out = plots.gantt(article_sched, ax=ax2)
    assert out is ax2
    assert len(ax2.patches) == len(article_sched.actions) and not ax1.patches
    assert len(plt.get_fignums()) == 1


def test_gantt_new_figure_sized_from_p_and_actions(article_sched: Schedule) -> None:
    small = run_schedule("1f1b", make_instance("s", 2, 2, forward=1, backward=2))
    big = run_schedule("interleaved-1f1b",
                       make_instance("big", 8, 32, v=2, forward=5, backward=10))
    w_small, h_small = plots.gantt_figsize(small)
    w_art, h_art = plots.gantt_figsize(article_sched)
    w_big, h_big = plots.gantt_figsize(big)
    assert w_small <= w_art < w_big <= 28 and h_small < h_art < h_big
    ax = plots.gantt(big)
    assert tuple(ax.get_figure().get_size_inches()) == pytest.approx((w_big, h_big))
    assert len(ax.patches) == len(big.actions) == 1024
    texts = [t for t in ax.texts]
    assert len(texts) > 800  # most blocks keep their microbatch number
    assert min(t.get_fontsize() for t in texts) >= 4.0


def test_gantt_chunk_shading_and_kind_colors(article_sched: Schedule) -> None:
    ax = plots.gantt(article_sched)
    f0 = to_rgb(patch_by_gid(ax, "action:0F0").get_facecolor())  # rank 0, chunk 0
    f1 = to_rgb(patch_by_gid(ax, "action:4F0").get_facecolor())  # rank 0, chunk 1
    b0 = to_rgb(patch_by_gid(ax, "action:0B0").get_facecolor())
    assert f0 == pytest.approx(to_rgb(plots.KIND_COLORS["F"]))
    assert sum(f1) > sum(f0)  # chunk 1 is lighter
    assert b0 == pytest.approx(to_rgb(plots.KIND_COLORS["B"]))
    assert len({tuple(to_rgb(c)) for c in plots.KIND_COLORS.values()}) == 4


def test_block_color_interpolates_between_chunks() -> None:
    c = [sum(plots.block_color("F", k, 4)) for k in range(4)]
    assert c == sorted(c) and len(set(c)) == 4
    assert plots.block_color("W", 0, 1) == pytest.approx(to_rgb(plots.KIND_COLORS["W"]))


def test_gantt_labels_are_microbatch_numbers(article_sched: Schedule) -> None:
    ax = plots.gantt(article_sched)
    texts = ax.texts
    assert len(texts) == len(article_sched.actions)  # every block is wide enough here
    assert {t.get_text() for t in texts} == {str(i) for i in range(8)}
    ax = plots.gantt(article_sched, labels=False)
    assert not ax.texts


def test_gantt_omits_labels_on_narrow_blocks(article_sched: Schedule) -> None:
    fig, ax = plt.subplots(figsize=(1.5, 1.0))
    plots.gantt(article_sched, ax=ax, legend=False, title="")
    assert len(ax.texts) == 0


def test_gantt_idle_time_drawn(article_sched: Schedule) -> None:
    ax = plots.gantt(article_sched)
    (idle,) = [c for c in ax.collections if c.get_gid() == "idle"]
    assert isinstance(idle, PolyCollection)
    area = 0.0
    for path in idle.get_paths():
        xs = [v[0] for v in path.vertices]
        area += max(xs) - min(xs)
    p = article_sched.instance.p
    assert area == pytest.approx(article_sched.bubble_fraction * p * article_sched.makespan)
    # the hatch: one compound path over exactly the same polygons, drawn above the faces
    (hatch,) = [c for c in ax.collections if c.get_gid() == "idle-hatch"]
    assert hatch.get_hatch() == "////" and not idle.get_hatch()
    (compound,) = hatch.get_paths()
    polygons = [poly[:4] for poly in compound.to_polygons(closed_only=False)]
    faces = [path.vertices[:4] for path in idle.get_paths()]
    assert len(polygons) == len(faces) > 0
    for got, want in zip(polygons, faces, strict=True):
        assert np.allclose(got, want)
    assert hatch.get_zorder() > idle.get_zorder()


def test_gantt_no_idle_collection_without_idle_time() -> None:
    inst = make_instance("one", 1, 2, forward=1, backward=1)
    ax = plots.gantt(run_schedule("1f1b", inst))
    assert not [c for c in ax.collections if c.get_gid() == "idle"]
    assert "idle" not in [t.get_text() for t in ax.get_legend().get_texts()]


def test_gantt_v_placement() -> None:
    inst = make_instance("v", 2, 2, v=2, placement="v", forward=1, backward=2)
    sched = simulate(inst, gpipe_like_orders(inst), method="v-afab")
    ax = plots.gantt(sched)
    assert len(ax.patches) == len(sched.actions) == 16
    # stage 3 sits on device 0 as its second chunk: light, in row 0
    a = next(x for x in sched.actions if (x.stage, x.kind, x.microbatch) == (3, "F", 0))
    assert a.device == 0 and plots.chunk_of(sched, a) == (1, 2)
    rect = patch_by_gid(ax, "action:3F0")
    assert rect.get_y() < 0 < rect.get_y() + rect.get_height()
    assert sum(to_rgb(rect.get_facecolor())) > sum(to_rgb(plots.KIND_COLORS["F"]))


def test_gantt_bidirectional_shades_by_direction() -> None:
    inst = make_instance("bi", 2, 4, placement="bidirectional", forward=1, backward=2)
    sched = simulate(inst, gpipe_like_orders(inst), method="bidir-afab")
    ax = plots.gantt(sched)
    assert len(ax.patches) == len(sched.actions)
    early = next(a for a in sched.actions if a.microbatch == 0)
    late = next(a for a in sched.actions if a.microbatch == 3)
    assert plots.chunk_of(sched, early) == (0, 2) and plots.chunk_of(sched, late) == (1, 2)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "direction 0 (dark)" in legend and "placement bidirectional" in ax.get_title("left")


def test_gantt_split_backward(split_schedule: Schedule) -> None:
    ax = plots.gantt(split_schedule)
    assert len(ax.patches) == len(split_schedule.actions) == 3 * 4 * 3
    i_face = to_rgb(patch_by_gid(ax, "action:1I0").get_facecolor())
    w_face = to_rgb(patch_by_gid(ax, "action:1W0").get_facecolor())
    assert i_face == pytest.approx(to_rgb(plots.KIND_COLORS["I"]))
    assert w_face == pytest.approx(to_rgb(plots.KIND_COLORS["W"]))
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.startswith("I ") for t in legend) and any(t.startswith("W ") for t in legend)
    assert not any(t.startswith("B ") for t in legend)
    assert not any(t.startswith("chunk") for t in legend)  # v = 1: one shade


def test_gantt_overlap_pairs_split_in_halves(overlap_schedule: Schedule) -> None:
    sched = overlap_schedule
    pairs = n_pairs(sched)
    assert pairs > 0
    ax = plots.gantt(sched)
    assert len(action_patches(ax)) == len(sched.actions)
    assert len(frame_patches(ax)) == pairs
    assert len(ax.patches) == len(sched.actions) + pairs
    solo = [a for a in sched.actions if a.overlap is None]
    assert len(solo) == len(sched.actions) - 2 * pairs  # one full-height rect each
    f = next(a for a in sched.actions if a.overlap is not None and a.kind == Kind.F)
    b = next(a for a in sched.actions if a.overlap == f.overlap and a is not f)
    rf = patch_by_gid(ax, f"action:{f.stage}F{f.microbatch}")
    rb = patch_by_gid(ax, f"action:{b.stage}{b.kind}{b.microbatch}")
    frame = patch_by_gid(ax, f"overlap:{f.overlap}")
    assert rf.get_height() == pytest.approx(rb.get_height())
    assert rf.get_height() == pytest.approx(frame.get_height() / 2)
    assert rf.get_y() < rb.get_y()  # y axis inverted: F drawn in the top half
    assert rf.get_x() == rb.get_x() == frame.get_x() == f.start
    assert not frame.get_fill()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.startswith("overlapped F&B") for t in legend)


def test_gantt_and_memory_every_feature(every_feature: Instance) -> None:
    """v placement, split backward, float per-stage costs, latency, released_by_input."""
    inst = every_feature
    orders: list[list[Action]] = [[] for _ in range(inst.p)]
    for i in range(inst.m):
        for s in range(inst.num_stages):
            orders[inst.device_of(s, i)].append(Action(Kind.F, s, i))
    for i in range(inst.m):
        for s in reversed(range(inst.num_stages)):
            orders[inst.device_of(s, i)] += [Action(Kind.I, s, i), Action(Kind.W, s, i)]
    sched = simulate(inst, orders, method="afab-split")
    ax = plots.gantt(sched)
    assert len(ax.patches) == len(sched.actions) == 4 * 4 * 3
    assert "chunk 1 (light)" in [t.get_text() for t in ax.get_legend().get_texts()]
    ax = plots.memory(sched)
    assert ax.lines[-1].get_gid() == "limit"
    ys = {y for line in ax.lines[:-1] for y in line.get_ydata()}
    assert any(y != int(y) for y in ys)  # half releases at the end of I
    assert [max(line.get_ydata()) for line in ax.lines[:-1]] == sched.peak_memory


# -------------------------------------------------------------------------- memory
def test_memory_lines_and_peaks(article_sched: Schedule) -> None:
    ax = plots.memory(article_sched)
    p = article_sched.instance.p
    assert len(ax.lines) == p  # no limit line
    for d, line in enumerate(ax.lines):
        assert line.get_gid() == f"rank:{d}"
        assert line.get_drawstyle() == "steps-post"
        assert max(line.get_ydata()) == article_sched.peak_memory[d]
        assert line.get_xdata()[-1] == article_sched.makespan
    (peaks,) = [c for c in ax.collections if c.get_gid() == "peaks"]
    assert isinstance(peaks, PathCollection)
    assert [y for _, y in peaks.get_offsets()] == article_sched.peak_memory
    assert any("peak 11" in t.get_text() for t in ax.texts)
    assert "rank 0 (peak 11)" in [t.get_text() for t in ax.get_legend().get_texts()]


def test_memory_limit_line() -> None:
    inst = make_instance("lim", 4, 8, v=2, forward=5, backward=10, limit=12)
    sched = run_schedule("interleaved-1f1b", inst)
    ax = plots.memory(sched)
    assert len(ax.lines) == inst.p + 1
    limit = ax.lines[-1]
    assert limit.get_gid() == "limit" and limit.get_linestyle() == "--"
    assert set(limit.get_ydata()) == {12}
    assert ax.get_ylim()[1] > 12


def test_memory_split_backward_release(split_schedule: Schedule) -> None:
    ax = plots.memory(split_schedule)
    assert [max(line.get_ydata()) for line in ax.lines] == split_schedule.peak_memory
    assert all(line.get_ydata()[-1] == 0 for line in ax.lines)


def test_memory_uses_given_axes(article_sched: Schedule) -> None:
    fig, ax = plt.subplots()
    assert plots.memory(article_sched, ax=ax, legend=False) is ax
    assert ax.get_legend() is None and len(plt.get_fignums()) == 1


# --------------------------------------------------------------------- bubble bars
@pytest.fixture
def compare_df() -> pd.DataFrame:
    return pd.DataFrame([
        ("a", "gpipe", 0.27), ("a", "1f1b", 0.27), ("a", "cpsat", 0.16),
        ("b", "interleaved-1f1b", 0.16), ("b", "cpsat", 0.16),
        ("c", "1f1b", 0.18), ("c", "zb-h1", math.nan), ("c", "cpsat", 0.0),
    ], columns=["instance", "schedule", "bubble_fraction"]).assign(extra=1)


def test_bubble_bars_one_bar_per_row(compare_df: pd.DataFrame) -> None:
    ax = plots.bubble_bars(compare_df)
    assert len(ax.patches) == 7  # NaN row skipped
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c"]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[-1] == "optimal (CP-SAT)" and "gpipe" in legend
    opt = [p for p in ax.patches if p.get_hatch()]
    assert sorted(p.get_height() for p in opt) == [0.0, 0.16, 0.16]
    # bars of one group stay within it
    for p in ax.patches:
        centre = p.get_x() + p.get_width() / 2
        assert abs(centre - round(centre)) < 0.45


def test_bubble_bars_given_axes(compare_df: pd.DataFrame) -> None:
    fig, ax = plt.subplots()
    assert plots.bubble_bars(compare_df, ax=ax, values=False) is ax
    assert not ax.texts


def test_bubble_bars_bad_input(compare_df: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match="bubble_fraction"):
        plots.bubble_bars(compare_df.drop(columns=["bubble_fraction"]))
    with pytest.raises(ValueError, match=r"\(a, gpipe\)"):
        plots.bubble_bars(pd.concat([compare_df, compare_df.head(1)]))


# ---------------------------------------------------------------------------- pareto
def test_pareto_front_and_markers() -> None:
    points = [(8, 315, "OPTIMAL"), (5, 420, "OPTIMAL"), (7, 330, "FEASIBLE"),
              (4, None, "INFEASIBLE"), (11, 285, "OPTIMAL")]
    schedules = [("interleaved-1f1b", [11, 9, 7, 5], 285), ("gpipe", 16, 330)]
    ax = plots.pareto(points, schedules=schedules)
    gids = [line.get_gid() for line in ax.lines]
    assert gids == ["front", "optimal", "unproven", "schedule:interleaved-1f1b",
                    "schedule:gpipe", "infeasible"]
    front, opt, unp = ax.lines[:3]
    assert front.get_drawstyle() == "steps-post"
    assert list(front.get_xdata())[:4] == [5, 7, 8, 11]  # sorted by limit
    assert list(front.get_ydata())[:4] == [420, 330, 315, 285]
    assert list(opt.get_xdata()) == [5, 8, 11] and list(unp.get_xdata()) == [7]
    assert unp.get_markerfacecolor() == "white" and opt.get_markerfacecolor() != "white"
    assert list(ax.lines[3].get_xdata()) == [11]  # max of the per-device peaks
    assert {t.get_text() for t in ax.texts} == {"interleaved-1f1b", "gpipe"}


def test_pareto_given_axes_without_schedules() -> None:
    fig, ax = plt.subplots()
    assert plots.pareto([(6, 360, "OPTIMAL"), (8, 330, "OPTIMAL")], ax=ax) is ax
    assert len(ax.lines) == 3 and not ax.texts


# ------------------------------------------------------------------------------ files
def test_save_figure_from_axes_and_figure(article_sched: Schedule, tmp_path: Path) -> None:
    ax = plots.gantt(article_sched)
    out = plots.save_figure(ax, tmp_path / "sub" / "g.png", dpi=40)
    assert out.is_file() and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out2 = plots.save_figure(ax.get_figure(), tmp_path / "g.svg", close=True)
    assert out2.read_text().lstrip().startswith("<?xml")
    assert not plt.get_fignums()


def test_gantt_and_memory_png(overlap_schedule: Schedule, tmp_path: Path) -> None:
    out = plots.gantt_and_memory(overlap_schedule, tmp_path / "overlap.png", dpi=40)
    assert out == tmp_path / "overlap.png"
    img = plt.imread(out)
    assert img.shape[0] > 100 and img.shape[1] > img.shape[0]
    assert not plt.get_fignums()  # built outside pyplot


@pytest.mark.parametrize(("schedule", "p", "m", "v", "costs"), [
    ("1f1b", 4, 8, 1, {"forward": 5, "backward": 10}),  # wide blocks: all numbered
    ("interleaved-1f1b", 8, 64, 2, {"forward": 5, "backward": 10}),  # some numbered
    ("gpipe", 16, 64, 2, {"forward": 1, "backward": 1}),  # too narrow for any number
])
def test_label_count_estimates_the_numbers_drawn(schedule: str, p: int, m: int, v: int,
                                                 costs: dict[str, float]) -> None:
    """The estimate behind the PNG's time (cli.output.plot_seconds) against the drawing."""
    from cpsched.plots.gantt_chart import label_count
    from cpsched.plots.io import gantt_and_memory_figure

    sched = run_schedule(schedule, make_instance("labels", p, m, v=v, **costs))
    fig = gantt_and_memory_figure(sched)
    drawn = len(fig.axes[0].texts)
    estimate = label_count(sched)
    n = len(sched.actions)
    assert abs(estimate - drawn) <= 0.05 * n
    if drawn in (0, n):
        assert estimate == drawn
    assert label_count(Schedule(sched.instance, [], method="empty")) == 0


# ------------------------------------------------------------------ image comparison
def _check_image(fig, name: str, tmp_path: Path, tol: float = 3.0) -> None:
    actual = tmp_path / name
    fig.savefig(actual, dpi=50)
    expected = BASELINES / name
    if UPDATE or not expected.exists():
        if not UPDATE:
            pytest.fail(f"missing baseline {expected}; run with CPSCHED_UPDATE_BASELINES=1")
        BASELINES.mkdir(exist_ok=True)
        expected.write_bytes(actual.read_bytes())
    result = compare_images(str(expected), str(actual), tol=tol)
    assert result is None, result


def test_image_gantt_overlap(overlap_schedule: Schedule, tmp_path: Path) -> None:
    with plt.style.context("default"):
        fig, ax = plt.subplots(figsize=(8, 2.5), layout="constrained")
        plots.gantt(overlap_schedule, ax=ax)
        _check_image(fig, "gantt_overlap.png", tmp_path)


def test_image_memory_with_limit(tmp_path: Path) -> None:
    inst = make_instance("lim", 3, 4, forward=2, backward=4, limit=4)
    with plt.style.context("default"):
        fig, ax = plt.subplots(figsize=(6, 2.5), layout="constrained")
        plots.memory(run_schedule("1f1b", inst), ax=ax)
        _check_image(fig, "memory_limit.png", tmp_path)
