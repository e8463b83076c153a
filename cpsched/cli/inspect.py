"""``cpsched simulate``, ``cpsched schedules`` and ``cpsched validate``: known schedules and
schedule files, timed and checked without solving."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from cpsched.cli.options import (
    InstanceArg,
    InstanceOptions,
    NoPlot,
    OutDir,
    Quiet,
    SetOpt,
    instance_options,
    load,
    out_dir,
)
from cpsched.cli.output import (
    fail,
    out_console,
    print_table,
    print_wrote,
    report_violations,
    say,
    schedule_row,
    write_outputs,
)
from cpsched.display import fmt
from cpsched.instance import Instance, InstanceError
from cpsched.model import Schedule, ScheduleFileError
from cpsched.outputs import OutputError

ScheduleFileArg = Annotated[Path, typer.Argument(metavar="SCHEDULE.json",
                                                 help="Schedule file (docs/spec.md §3).")]


@instance_options
def simulate(
    instance: InstanceArg = None,
    schedule: Annotated[str, typer.Option("--schedule", "-s",
                                          help="Registered schedule name (see `cpsched "
                                          "schedules`).")] = "1f1b",
    out: OutDir = Path("out"),
    sets: SetOpt = None,
    quiet: Quiet = False,
    no_plot: NoPlot = False,
    *,
    options: InstanceOptions,
) -> None:
    """A named known schedule, timed on the instance and validated.

    Writes OUT/NAME-SCHEDULE.json and .png (NAME-SCHEDULE-2... if taken); exit 1 if it breaks
    a constraint (e.g. the memory limit), listing each violation.
    """
    inst = load(instance, sets, options)
    from cpsched.graph import overlap_lower_bound
    from cpsched.schedules import NotApplicable, run_schedule
    from cpsched.validate import validate as check

    try:
        sch = run_schedule(schedule, inst)
    except NotApplicable as exc:
        raise fail(f"schedule {exc}") from None
    except ValueError as exc:
        raise fail(str(exc)) from None
    sch.lower_bound = inst.from_ticks(overlap_lower_bound(inst))  # holds with F&B overlap too
    violations = check(sch)
    out = out_dir(out)
    try:
        paths = write_outputs(sch, out, f"{inst.name}-{schedule}", not no_plot)
    except OutputError as exc:
        raise fail(str(exc)) from None
    if not quiet:
        print_table(inst, [schedule_row(sch, violations)], sch.lower_bound)
        print_wrote(paths)
    report_violations(violations)


def schedules() -> None:
    """List the registered known schedules with their preconditions and sources."""
    from cpsched.schedules import REGISTRY

    t = Table(title="registered schedules", title_justify="left", show_lines=False)
    for col in ("name", "what", "preconditions", "source"):
        t.add_column(col, overflow="fold")
    for spec in REGISTRY.values():
        t.add_row(spec.name, spec.summary, spec.preconditions, spec.source)
    out_console.print(t)


def read_schedule(path: Path, inst: Instance | None = None) -> tuple[Schedule, dict[str, Any]]:
    """A schedule file read (docs/spec.md §3), checked against ``inst`` when given, and its
    JSON document (for the claims it makes about itself).

    Raises:
        typer.Exit: code 2 with one message: no such file, unreadable, not UTF-8 JSON (also:
            nested too deeply, a number too long), or wrong fields.
    """
    where = f"schedule file {str(path)!r}"
    if not path.is_file():
        raise fail(f"{where}: no such file")
    try:
        data = json.loads(path.read_bytes().decode("utf-8-sig"))
    except OSError as exc:
        raise fail(f"{where}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise fail(f"{where}: not UTF-8 text") from None
    except RecursionError:
        raise fail(f"{where}: not JSON (nested too deeply)") from None
    except ValueError as exc:  # JSONDecodeError, or an integer with thousands of digits
        raise fail(f"{where}: not JSON ({exc})") from None
    try:
        return Schedule.from_dict(data, inst), data
    except (ScheduleFileError, InstanceError) as exc:
        raise fail(f"{where}: {exc}") from None
    except RecursionError:
        raise fail(f"{where}: nested too deeply") from None


def validate(
    instance: Annotated[Path, typer.Argument(help="Instance TOML file.")],
    schedule_file: ScheduleFileArg,
    sets: SetOpt = None,
    durations: Annotated[str, typer.Option(
        "--durations", help="instance: every action lasts the instance's duration (default); "
        "as-given: durations as in the file, e.g. a measured run from cpsched import-trace "
        "(every other rule is checked).")] = "instance",
) -> None:
    """Check a schedule file against an instance: exit 0 if valid, 1 listing each violation.

    Every action must satisfy the rules (docs/spec.md §3.3), and every claim of the file must
    hold: makespan, lower_bound <= makespan, status OPTIMAL only with lower_bound ==
    makespan, gap, bubble_fraction and peak_memory as the actions give them.
    """
    from cpsched.validate import DURATIONS, validate_claims
    from cpsched.validate import validate as check

    if durations not in DURATIONS:
        raise fail(f"--durations = {durations!r}: 'instance' or 'as-given'")
    inst = load(instance, sets)
    sch, data = read_schedule(schedule_file, inst)
    claims = {k: data[k] for k in ("makespan", "gap", "bubble_fraction", "peak_memory")
              if k in data}
    violations = check(sch, inst, durations=durations) or validate_claims(sch, claims)
    if violations:
        for v in violations:
            say(f"violation: {v}")
        say(f"INVALID: {len(violations)} violation(s)")
        raise typer.Exit(1)
    say(f"valid: {len(sch.actions)} actions, makespan {fmt(sch.makespan)}, "
        f"bubble {100 * sch.bubble_fraction:.1f}%, peak memory "
        f"{[fmt(x) for x in sch.peak_memory]}, status {sch.status}")
