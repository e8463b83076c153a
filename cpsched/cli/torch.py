"""``cpsched export`` and ``cpsched import-torch``: PyTorch pipelining action CSVs (one row per
rank, docs/torch.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cpsched.cli.inspect import ScheduleFileArg
from cpsched.cli.options import NoPlot, OutDir, Quiet, SetOpt, load
from cpsched.cli.output import (
    err_console,
    fail,
    out_console,
    print_table,
    print_wrote,
    report_violations,
    schedule_row,
    write_outputs,
)
from cpsched.instance import InstanceError
from cpsched.model import Schedule, ScheduleFileError


def export(
    schedule_file: ScheduleFileArg,
    fmt: Annotated[str, typer.Option(
        "--format", "-f", help="torch-csv: compute actions only (PyTorch "
        "_PipelineScheduleRuntime._load_csv); compute_comms: with send/recv actions.")
    ] = "torch-csv",
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="CSV file to write (default: stdout).")] = None,
) -> None:
    """Export a schedule as a PyTorch pipelining action CSV (one row per rank)."""
    from cpsched.torch_io import TorchCsvError, to_torch_csv, write_torch_csv

    try:
        sch = Schedule.from_json(schedule_file)
        if output is None:
            out_console.file.write(to_torch_csv(sch, fmt))
        else:
            write_torch_csv(sch, output, fmt)
            err_console.print(f"wrote {output}", markup=False)
    except (ScheduleFileError, InstanceError, TorchCsvError) as exc:
        raise fail(str(exc)) from None


def import_torch(
    csv_file: Annotated[Path, typer.Argument(metavar="FILE.csv",
                                             help="PyTorch action CSV (one row per rank).")],
    instance: Annotated[Path, typer.Option("--instance", "-i", help="Instance TOML file.")],
    out: OutDir = Path("out"),
    sets: SetOpt = None,
    quiet: Quiet = False,
    no_plot: NoPlot = False,
) -> None:
    """Read a PyTorch action CSV, time it on the instance, validate it and compare it."""
    inst = load(instance, sets)
    from cpsched.graph import overlap_lower_bound
    from cpsched.schedules import run_all
    from cpsched.torch_io import TorchCsvError, read_torch_csv
    from cpsched.validate import validate as check

    try:
        sch = read_torch_csv(csv_file, inst)
    except (TorchCsvError, OSError) as exc:
        raise fail(str(exc)) from None
    lb = inst.from_ticks(overlap_lower_bound(inst))  # holds with or without F&B overlap
    sch.lower_bound = lb
    violations = check(sch)
    paths = write_outputs(sch, out, f"{inst.name}-{csv_file.stem}", not no_plot)
    if not quiet:
        rows = [schedule_row(sch, violations)]
        for known in run_all(inst).values():
            known.lower_bound = lb  # each row's gap is against the instance's bound
            rows.append(schedule_row(known, check(known)))
        print_table(inst, rows, lb)
        print_wrote(paths)
    report_violations(violations)
