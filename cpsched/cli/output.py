"""What the command line prints and writes: consoles, the schedule table, output files, the
solve progress line, and the one way a command fails with a message."""

from __future__ import annotations

import os
import time
from pathlib import Path

import typer
from rich.console import Console
from rich.status import Status
from rich.table import Table

from cpsched.display import fmt, verdict
from cpsched.instance import Instance
from cpsched.model import Schedule

out_console = Console(highlight=False)
if not out_console.is_terminal:  # pipes and CI logs: wide tables rather than folded cells
    out_console = Console(highlight=False, width=160)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def fail(msg: str, code: int = 2) -> typer.Exit:
    """Print ``error: MSG`` on stderr and return the exit to raise (``raise fail(...)``).

    Args:
        msg: one line naming the field, the value and what is allowed.
        code: exit code (docs/spec.md §4): 2 bad input (default), 1 invalid schedule.
    """
    err_console.print(f"error: {msg}", markup=False)
    return typer.Exit(code)


def say(text: str) -> None:
    """Print one plain line (no markup, never folded: paths stay whole) on stdout."""
    out_console.print(text, markup=False, soft_wrap=True)


def schedule_row(schedule: Schedule, violations: list[str] | None) -> list[str]:
    """One table row: method, makespan, bubble %, peak memory per device, status, gap %.

    The gap is :attr:`Schedule.gap` (against ``schedule.lower_bound``); the status reads
    ``OVER LIMIT`` / ``INVALID`` when the validator found ``violations``, and then no gap is
    shown (the bound is for schedules that keep the rules; one that breaks them can be below
    it).
    """
    status = verdict(schedule.status, violations)
    gap = None if violations else schedule.gap
    return [schedule.method, fmt(schedule.makespan), f"{100 * schedule.bubble_fraction:.1f}%",
            " ".join(fmt(x, 2) for x in schedule.peak_memory), status,
            "-" if gap is None else f"{100 * gap:.1f}%"]


def print_table(inst: Instance, rows: list[list[str]], lower_bound: float | None) -> None:
    """The schedule table (rows from :func:`schedule_row`) titled with the instance's shape,
    memory limit and ``lower_bound`` (time units, None: not shown)."""
    title = (f"{inst.name}: p={inst.p} v={inst.v} m={inst.m} {inst.placement}"
             f"{' split' if inst.split_backward else ''}"
             + ("" if inst.memory_limit is None else f", memory limit {fmt(inst.memory_limit)}")
             + ("" if lower_bound is None else f", lower bound {fmt(lower_bound)}"))
    t = Table(title=title, title_justify="left")
    for col, just in (("schedule", "left"), ("makespan", "right"), ("bubble", "right"),
                      ("peak memory per device", "left"), ("status", "left"),
                      ("gap", "right")):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in rows:
        t.add_row(*r)
    out_console.print(t)


#: Largest schedule drawn as a PNG (a bigger Gantt chart is unreadable and takes minutes).
MAX_PLOT_ACTIONS = 20_000


def plot_seconds(n_actions: int, labels: int | None = None) -> float:
    """A generous estimate of the time (s) to draw and write the Gantt PNG of a schedule of
    ``n_actions`` actions of which ``labels`` carry their microbatch's number
    (:func:`cpsched.plots.gantt_chart.label_count`; None: every one): 1.5 s + 0.4 ms per
    action + 1.2 ms per number, about 1.6 times what was measured on a 2-core machine in a
    fresh process (session 57, docs/modelling.md §61: 12 288 actions without numbers 3.65 s,
    16 384 4.8 s, 4096 with 2048 numbers 3.54 s, 1208 all numbered 2.3 s).  Until session 56
    it was 2 s + 1 ms per action, for drawings twice as slow, whatever their numbers; a
    drawing that runs late is killed at the deadline instead (:func:`draw_png`)."""
    numbered = n_actions if labels is None else min(labels, n_actions)
    return 1.5 + 0.0004 * n_actions + 0.0012 * numbered


def plot_skipped(n_actions: int, budget: float | None = None,
                 labels: int | None = None) -> str | None:
    """Why the PNG of a schedule of ``n_actions`` actions (``labels`` of them numbered, as
    for :func:`plot_seconds`) is not drawn, or None: more than :data:`MAX_PLOT_ACTIONS`
    actions, or (with a ``budget`` in seconds, e.g. half of ``--time-limit``) a drawing
    estimated to take longer than that."""
    if n_actions > MAX_PLOT_ACTIONS:
        return (f"plot skipped: {n_actions} actions (a Gantt chart is drawn up to "
                f"{MAX_PLOT_ACTIONS})")
    seconds = plot_seconds(n_actions, labels)
    if budget is not None and seconds > budget:
        return (f"plot skipped: drawing {n_actions} actions takes about "
                f"{seconds:.0f} s, more than half of --time-limit; raise "
                "--time-limit to get it")
    return None


def write_outputs(schedule: Schedule, out: Path, stem: str, plot: bool,
                  budget: float | None = None, deadline: float | None = None) -> list[Path]:
    """Write ``OUT/STEM.json`` (docs/spec.md §3) and, if ``plot``, ``OUT/STEM.png`` (Gantt and
    memory over time) as one set (:func:`cpsched.outputs.write_set`): atomically, never over
    an existing result (the set becomes ``STEM-2``, ``STEM-3``, ... instead) and never mixed
    with another run's.  A huge schedule's PNG is skipped with a note (:func:`plot_skipped`,
    ``budget`` in seconds), and so is one not drawn by ``deadline`` (a
    ``time.perf_counter()`` value; None: no deadline), see :func:`draw_png`.

    Returns:
        The paths written.
    """
    from cpsched.outputs import write_set

    def json_writer(path: Path) -> None:
        path.write_text(schedule.to_json() + "\n", encoding="utf-8")

    files = {".json": json_writer}
    reason = None
    if plot:
        from cpsched.plots.gantt_chart import label_count

        reason = plot_skipped(len(schedule.actions), budget,
                              None if budget is None else label_count(schedule))
    drawn: Path | None = None
    try:
        if plot and reason is None:
            drawn, reason = draw_png(schedule, out, stem, deadline)
            if drawn is not None:
                png = drawn
                files[".png"] = lambda path: os.replace(png, path)
        paths = write_set(out, stem, files)
    finally:
        if drawn is not None and drawn.exists():
            drawn.unlink()
    if reason:
        err_console.print(f"note: {reason}", markup=False)
    return paths


def draw_png(schedule: Schedule, out: Path, stem: str,
             deadline: float | None = None) -> tuple[Path | None, str | None]:
    """Draw the Gantt-and-memory PNG (:func:`cpsched.plots.gantt_and_memory`) into a new
    hidden temporary file in ``out``: its path and None, or None and why there is none —
    not done by ``deadline`` (a ``time.perf_counter()`` value; None: wait for it), or the
    drawing's process ended without it.

    With a deadline the drawing runs in a forked child (:class:`cpsched.forked.ForkedCall`)
    that is killed at the deadline, so a drawing slower than :func:`plot_seconds` estimated
    cannot take a command past its ``--time-limit`` (docs/guarantees.md §7.4); where no child
    can be forked it is drawn here.  A deadline already past draws nothing.

    Raises:
        OSError: the file cannot be written.
    """
    from cpsched import plots
    from cpsched.forked import ForkedCall, can_fork
    from cpsched.outputs import temp_file

    late = "plot skipped: no time was left to draw it within --time-limit; raise it to get one"
    if deadline is not None and time.perf_counter() >= deadline:
        return None, late
    path = temp_file(out, stem, ".png")
    kept = False
    try:
        if deadline is None or not can_fork():
            plots.gantt_and_memory(schedule, path)
        else:
            call = ForkedCall(plots.gantt_and_memory, schedule, path)
            try:
                if not call.ready(deadline - time.perf_counter()):
                    return None, late
                call.result()
            except RuntimeError as exc:  # the child ended without an answer (out of memory)
                return None, f"plot skipped: {exc}"
            finally:
                call.cancel()
        kept = True
        return path, None
    finally:
        if not kept:  # late, failed or raised: no half-drawn file left behind
            path.unlink(missing_ok=True)


def print_wrote(paths: list[Path]) -> None:
    """``wrote A, B`` on stdout."""
    say("wrote " + ", ".join(str(p) for p in paths))


def report_violations(violations: list[str]) -> None:
    """Each violation on stderr, then exit 1 if there is any."""
    for v in violations:
        err_console.print(f"violation: {v}", markup=False)
    if violations:
        raise typer.Exit(1)


class ProgressPrinter:
    """Incumbent / bound / elapsed while solving: a live status line on a terminal, else one
    line per improvement (at most one per second).  A context manager, and the
    ``on_progress(elapsed s, incumbent, bound)`` callback of :func:`cpsched.solver.solve`."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.status: Status | None = None
        self.last = 0.0
        self.live = enabled and err_console.is_terminal

    def __enter__(self) -> ProgressPrinter:
        if self.live:
            self.status = err_console.status("solving with CP-SAT ...")
            self.status.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.status is not None:
            self.status.__exit__(None, None, None)

    def __call__(self, elapsed: float, incumbent: float | None, bound: float | None) -> None:
        if not self.enabled:
            return
        msg = (f"solving: incumbent {fmt(incumbent)}  bound {fmt(bound)}  "
               f"elapsed {elapsed:.1f}s")
        if self.status is not None:
            self.status.update(msg)
        elif elapsed - self.last >= 1.0 or self.last == 0.0:
            self.last = max(elapsed, 1e-9)
            err_console.print(msg, markup=False)
