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
)
from cpsched.cli.output import (
    fail,
    fmt,
    out_console,
    print_table,
    print_wrote,
    report_violations,
    say,
    schedule_row,
    write_outputs,
)
from cpsched.instance import InstanceError
from cpsched.model import Schedule, ScheduleFileError

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

    Writes OUT/NAME-SCHEDULE.json and .png; exit 1 if it breaks a constraint (e.g. the
    memory limit), listing each violation.
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
    paths = write_outputs(sch, out, f"{inst.name}-{schedule}", not no_plot)
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


def _claimed(path: Path) -> dict[str, Any]:
    """The metrics a schedule file states about itself (``{}`` if it is not a JSON table)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _claim_mismatches(sch: Schedule, claimed: dict[str, Any]) -> list[str]:
    """Where the file's ``makespan``, ``bubble_fraction`` or ``peak_memory`` disagree with
    what its actions give (tolerance 1e-4 time units, 1e-6 memory units)."""
    found = []
    for key, actual in (("makespan", sch.makespan), ("bubble_fraction", sch.bubble_fraction)):
        if isinstance(claimed.get(key), int | float) and abs(claimed[key] - actual) > 1e-4 + 1e-6:
            found.append(f"{key} in the file is {claimed[key]}; the actions give "
                         f"{fmt(actual, 6)}")
    pm = claimed.get("peak_memory")
    if isinstance(pm, list) and (len(pm) != len(sch.peak_memory) or any(
            not isinstance(x, int | float) or abs(x - y) > 1e-6
            for x, y in zip(pm, sch.peak_memory, strict=False))):
        found.append(f"peak_memory in the file is {pm}; the actions give "
                     f"{[fmt(x) for x in sch.peak_memory]}")
    return found


def validate(
    instance: Annotated[Path, typer.Argument(help="Instance TOML file.")],
    schedule_file: ScheduleFileArg,
    sets: SetOpt = None,
) -> None:
    """Check a schedule file against an instance: exit 0 if valid, 1 listing each violation."""
    inst = load(instance, sets)
    from cpsched.validate import validate as check

    try:
        sch = Schedule.from_json(schedule_file, inst)
    except (ScheduleFileError, InstanceError) as exc:
        raise fail(str(exc)) from None
    violations = check(sch, inst) + _claim_mismatches(sch, _claimed(schedule_file))
    if violations:
        for v in violations:
            say(f"violation: {v}")
        say(f"INVALID: {len(violations)} violation(s)")
        raise typer.Exit(1)
    say(f"valid: {len(sch.actions)} actions, makespan {fmt(sch.makespan)}, "
        f"bubble {100 * sch.bubble_fraction:.1f}%, peak memory "
        f"{[fmt(x) for x in sch.peak_memory]}")
