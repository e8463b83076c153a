"""``cpsched compare``: known schedules against the optimum over many instances.

Inputs are checked before any solve (worker and job counts, time limit, output directory and
stem, unique instance names); a large study is announced with its worst-case duration.
Ctrl-C keeps every finished instance: their rows are written and the command exits 130.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from cpsched.cli.inputs import (
    MAX_JOBS,
    MAX_WORKERS,
    check_count,
    check_time_limit,
)
from cpsched.cli.options import OutDir, Quiet, SetOpt, load, out_dir
from cpsched.cli.output import err_console, fail, say
from cpsched.instance import Instance, InstanceError
from cpsched.outputs import OutputError, check_stem

_TABLE_COLUMNS = ("instance", "schedule", "makespan", "bubble_fraction", "peak_memory", "valid",
                  "opt_makespan_same_memory", "improvement_same_memory_pct", "status")

#: Above this many instances the study is announced with its worst-case duration.
LARGE_STUDY = 200

#: Above this many instances the bubble-bar PNG is skipped (one bar group per instance).
MAX_PLOT_INSTANCES = 200


def _unique_names(insts: list[Instance]) -> None:
    """Exit 2 when two instances share a name (names key the table)."""
    seen: set[str] = set()
    for inst in insts:
        if inst.name in seen:
            raise fail(f"instance name {inst.name!r} appears twice: names key the table; "
                       "give each instance its own name (name = ... in the file, or --set "
                       "name=...)")
        seen.add(inst.name)


def _announce(n: int, time_limit: float, jobs: int | None) -> None:
    """Warn about a large study: how many solves it may take and for how long at most."""
    if n <= LARGE_STUDY:
        return
    procs = jobs or os.cpu_count() or 1
    hours = n * time_limit / procs / 3600
    err_console.print(f"warning: {n} instances: at least {n} solves of up to {time_limit:g} s "
                      f"on {procs} processes, up to {hours:.1f} h for the unlimited solves "
                      "alone (Ctrl-C keeps the finished ones)", markup=False)


def _write(df: Any, out: Path, stem: str) -> list[Path]:
    """CSV, Markdown and (up to :data:`MAX_PLOT_INSTANCES` instances) the bubble-bar PNG, as
    one set of files under ``out`` (:func:`cpsched.outputs.write_set`)."""
    from cpsched import plots
    from cpsched.outputs import write_set
    from cpsched.study.results import result_writers

    files = result_writers(df)
    n = df["instance"].nunique() if len(df) else 0
    if 0 < n <= MAX_PLOT_INSTANCES:
        def png(path: Path) -> None:
            plots.save_figure(plots.bubble_bars(df), path, close=True)

        files["-bubble.png"] = png
    elif n:
        err_console.print(f"note: bubble plot skipped: {n} instances (drawn up to "
                          f"{MAX_PLOT_INSTANCES})", markup=False)
    return write_set(out, stem, files)


def compare(
    instances: Annotated[list[Path] | None, typer.Argument(
        help="Instance TOML files.", show_default=False)] = None,
    grid: Annotated[Path | None, typer.Option(
        "--grid", "-g", help="Grid TOML: a base instance and a [grid] table of dotted keys "
        "to lists of values (their product is solved).")] = None,
    time_limit: Annotated[float, typer.Option("--time-limit", "-t",
                                              help="Per-solve CP-SAT limit, seconds.")] = 30.0,
    workers: Annotated[int, typer.Option(
        "--workers", "-w", help=f"CP-SAT workers per solve, 1 to {MAX_WORKERS}.")] = 1,
    jobs: Annotated[int | None, typer.Option(
        "--jobs", "-j", help=f"Parallel solver processes, 1 to {MAX_JOBS} (default: "
        "CPUs).")] = None,
    out: OutDir = Path("out"),
    stem: Annotated[str, typer.Option(
        "--stem", help="Output file stem: a plain file name; files go to OUT/STEM.csv, "
        ".md and -bubble.png (STEM-2... if taken).")] = "compare",
    sets: SetOpt = None,
    quiet: Quiet = False,
) -> None:
    """Known schedules vs the optimum (unlimited and at each schedule's own peak memory)
    over many instances: one table, written as CSV and Markdown, plus a bubble-bar PNG.
    Ctrl-C writes the instances finished so far and exits 130."""
    check_time_limit(time_limit)
    check_count(workers, "--workers", MAX_WORKERS)
    check_count(jobs, "--jobs", MAX_JOBS)
    try:
        check_stem(stem)
    except OutputError as exc:
        raise fail(str(exc)) from None
    insts = _instances(instances, grid, sets)
    _unique_names(insts)
    out = out_dir(out)
    _announce(len(insts), time_limit, jobs)
    from cpsched import study

    try:
        df = study.compare(insts, time_limit=time_limit, workers=workers, jobs=jobs,
                           progress=not quiet)
    except study.StudyInterrupted as exc:
        _save(exc.table, out, stem, quiet=True)
        say(f"interrupted: {exc.finished} of {exc.total} instances finished"
            + ("; their rows are written" if exc.finished else "; nothing written"))
        raise typer.Exit(130) from None
    except KeyboardInterrupt:
        say("interrupted before any solve finished; nothing written")
        raise typer.Exit(130) from None
    _save(df, out, stem, quiet)


def _instances(paths: list[Path] | None, grid: Path | None,
               sets: list[str] | None) -> list[Instance]:
    """The instance files, then the grid's instances; exit 2 if there are none."""
    from cpsched import study

    insts: list[Instance] = [load(p, sets) for p in paths or []]
    if grid is not None:
        try:
            insts += study.load_grid(grid)
        except InstanceError as exc:
            raise fail(f"grid: {exc}") from None
    if not insts:
        raise fail("compare needs instance files or --grid FILE")
    return insts


def _save(df: Any, out: Path, stem: str, quiet: bool) -> None:
    """Write the table (if it has rows) and print it unless ``quiet``."""
    if not len(df):
        return
    try:
        paths = _write(df, out, stem)
    except OutputError as exc:
        raise fail(str(exc)) from None
    if not quiet:
        cols = [c for c in _TABLE_COLUMNS if c in df.columns]
        say(df[cols].to_string(index=False))
    say("wrote " + ", ".join(str(p) for p in paths))

