"""``cpsched compare``: known schedules against the optimum over many instances."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cpsched.cli.options import OutDir, Quiet, SetOpt, load
from cpsched.cli.output import fail, say
from cpsched.instance import Instance, InstanceError

_TABLE_COLUMNS = ("instance", "schedule", "makespan", "bubble_fraction", "peak_memory", "valid",
                  "opt_makespan_same_memory", "improvement_same_memory_pct", "status")


def compare(
    instances: Annotated[list[Path] | None, typer.Argument(
        help="Instance TOML files.", show_default=False)] = None,
    grid: Annotated[Path | None, typer.Option(
        "--grid", "-g", help="Grid TOML: a base instance and a [grid] table of dotted keys "
        "to lists of values (their product is solved).")] = None,
    time_limit: Annotated[float, typer.Option("--time-limit", "-t",
                                              help="Per-solve CP-SAT limit, seconds.")] = 30.0,
    workers: Annotated[int, typer.Option("--workers", "-w",
                                         help="CP-SAT workers per solve.")] = 1,
    jobs: Annotated[int | None, typer.Option("--jobs", "-j",
                                             help="Parallel solver processes (default: "
                                             "CPUs).")] = None,
    out: OutDir = Path("out"),
    stem: Annotated[str, typer.Option("--stem", help="Output file stem.")] = "compare",
    sets: SetOpt = None,
    quiet: Quiet = False,
) -> None:
    """Known schedules vs the optimum (unlimited and at each schedule's own peak memory)
    over many instances: one table, written as CSV and Markdown, plus a bubble-bar PNG."""
    from cpsched import plots, study

    insts: list[Instance] = [load(p, sets) for p in instances or []]
    if grid is not None:
        try:
            insts += study.load_grid(grid)
        except InstanceError as exc:
            raise fail(f"grid: {exc}") from None
    if not insts:
        raise fail("compare needs instance files or --grid FILE")
    if time_limit <= 0:
        raise fail(f"--time-limit = {time_limit}: must be > 0 seconds")
    df = study.compare(insts, time_limit=time_limit, workers=workers, jobs=jobs,
                       progress=not quiet)
    csv_path, md_path = study.write_results(df, out, stem)
    png = out / f"{stem}-bubble.png"
    plots.save_figure(plots.bubble_bars(df), png, close=True)
    if not quiet:
        cols = [c for c in _TABLE_COLUMNS if c in df.columns]
        say(df[cols].to_string(index=False))
        say(f"wrote {csv_path}, {md_path}, {png}")
