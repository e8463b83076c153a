"""``cpsched export`` and ``cpsched import-torch``: PyTorch pipelining action CSVs (one row per
rank, docs/torch.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cpsched.cli.inspect import ScheduleFileArg, read_schedule
from cpsched.cli.options import NoPlot, OutDir, Quiet, SetOpt, load, out_dir
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
from cpsched.outputs import OutputError, check_stem


def export(
    schedule_file: ScheduleFileArg,
    fmt: Annotated[str, typer.Option(
        "--format", "-f", help="torch-csv: compute actions only (PyTorch "
        "_PipelineScheduleRuntime._load_csv); compute_comms: with send/recv actions.")
    ] = "torch-csv",
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="CSV file to write (default: stdout); its directory must "
        "exist; an existing file is refused unless --force.")] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Replace an existing --output file (atomically; a symlink is "
        "replaced, not followed).")] = False,
) -> None:
    """Export a schedule as a PyTorch pipelining action CSV (one row per rank). The schedule
    must be valid (a memory limit may be exceeded): exit 2 otherwise."""
    from cpsched.outputs import write_file
    from cpsched.torch_io import TorchCsvError, to_torch_csv
    from cpsched.validate import validate

    sch, _ = read_schedule(schedule_file)
    broken = [v for v in validate(sch) if "memory limit" not in v]
    if broken:  # a schedule over the memory limit still has orders; a broken one has none
        raise fail(f"schedule file {str(schedule_file)!r} is not a valid schedule: {broken[0]}"
                   " (see cpsched validate)")
    try:
        text = to_torch_csv(sch, fmt)
        if output is None:
            out_console.file.write(text)
        else:
            write_file(output, lambda p: p.write_text(text, encoding="utf-8"), force=force)
            err_console.print(f"wrote {output}", markup=False)
    except (TorchCsvError, OutputError) as exc:
        raise fail(str(exc)) from None


def _csv_text(path: Path) -> str:
    """The CSV file's text: UTF-8 (a BOM is dropped), no NUL bytes.

    Raises:
        typer.Exit: code 2 naming the file and what is wrong with it.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise fail(f"CSV file {str(path)!r}: cannot read it ({exc.strerror or exc})") from None
    if b"\0" in data:
        raise fail(f"CSV file {str(path)!r}: a binary file, not a CSV text file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise fail(f"CSV file {str(path)!r}: not UTF-8 text (byte {data[exc.start]:#04x} at "
                   f"offset {exc.start})") from None
    return text if text.endswith("\n") else text + "\n"  # text, never taken for a path


def import_torch(
    csv_file: Annotated[Path, typer.Argument(metavar="FILE.csv",
                                             help="PyTorch action CSV (one row per rank).")],
    instance: Annotated[Path, typer.Option("--instance", "-i", help="Instance TOML file.")],
    out: OutDir = Path("out"),
    sets: SetOpt = None,
    quiet: Quiet = False,
    no_plot: NoPlot = False,
) -> None:
    """Read a PyTorch action CSV, time it on the instance, validate it and compare it.

    Writes OUT/NAME-CSVSTEM.json and .png (NAME-CSVSTEM-2... if taken).
    """
    inst = load(instance, sets)
    out = out_dir(out)
    stem = f"{inst.name}-{csv_file.stem}"
    try:
        check_stem(stem, "FILE.csv")
    except OutputError as exc:
        raise fail(str(exc)) from None
    if not csv_file.is_file():
        raise fail(f"CSV file {str(csv_file)!r}: no such file")
    text = _csv_text(csv_file)
    from cpsched.graph import overlap_lower_bound
    from cpsched.schedules import run_all
    from cpsched.torch_io import TorchCsvError, read_torch_csv
    from cpsched.validate import validate as check

    try:
        sch = read_torch_csv(text, inst)
    except TorchCsvError as exc:
        raise fail(str(exc)) from None
    lb = inst.from_ticks(overlap_lower_bound(inst))  # holds with or without F&B overlap
    sch.lower_bound = lb
    violations = check(sch)
    try:
        paths = write_outputs(sch, out, stem, not no_plot)
    except OutputError as exc:
        raise fail(str(exc)) from None
    if not quiet:
        rows = [schedule_row(sch, violations)]
        for known in run_all(inst).values():
            known.lower_bound = lb  # each row's gap is against the instance's bound
            rows.append(schedule_row(known, check(known)))
        print_table(inst, rows, lb)
        print_wrote(paths)
    report_violations(violations)
