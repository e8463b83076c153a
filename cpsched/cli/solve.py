"""``cpsched solve``: the optimum with CP-SAT beside every applicable known schedule."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

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
    ProgressPrinter,
    err_console,
    fail,
    fmt,
    print_table,
    print_wrote,
    say,
    schedule_row,
    write_outputs,
)
from cpsched.instance import Instance, InstanceError, parse_override
from cpsched.model import Schedule

ParamOpt = Annotated[list[str] | None, typer.Option(
    "--param", help="Any CP-SAT parameter, NAME=VALUE (repeatable), e.g. "
    "--param max_deterministic_time=5.", show_default=False)]


def cp_parameters(items: list[str] | None) -> dict[str, Any]:
    """``--param NAME=VALUE`` items as CP-SAT parameters ``{name: value}``; each VALUE is read
    as TOML (``5``, ``true``, ``"x"``), else kept as a bare string.

    Raises:
        typer.Exit: code 2 when an item is not NAME=VALUE or NAME is not a field of
            ``SatParameters``.
    """
    from ortools.sat import sat_parameters_pb2

    known = sat_parameters_pb2.SatParameters.DESCRIPTOR.fields_by_name
    params: dict[str, Any] = {}
    for text in items or []:
        try:
            name, value = parse_override(text)
        except InstanceError:
            raise fail(f"--param {text!r}: expected NAME=VALUE") from None
        if name not in known:
            raise fail(f"--param {name}: not a CP-SAT parameter (see sat_parameters.proto)")
        if value is None:
            raise fail(f"--param {text!r}: expected NAME=VALUE with a value")
        params[name] = value
    return params


def _known_schedules(inst: Instance) -> dict[str, Schedule]:
    """Every applicable registered schedule, timed (the warm-start candidates); a generator
    bug is reported as a warning and leaves no candidates rather than stopping the solve."""
    from cpsched.schedules import run_all
    from cpsched.simulate import OrderError

    try:
        return run_all(inst)
    except OrderError as exc:
        err_console.print(f"warning: a known schedule failed: {exc}", markup=False)
        return {}


@instance_options
def solve(
    instance: InstanceArg = None,
    time_limit: Annotated[float, typer.Option("--time-limit", "-t",
                                              help="CP-SAT wall-clock limit, seconds.")] = 60.0,
    workers: Annotated[int, typer.Option("--workers", "-w",
                                         help="CP-SAT workers (num_workers).")] = 8,
    seed: Annotated[int, typer.Option("--seed", help="CP-SAT random seed.")] = 0,
    out: OutDir = Path("out"),
    sets: SetOpt = None,
    quiet: Quiet = False,
    no_plot: NoPlot = False,
    param: ParamOpt = None,
    *,
    options: InstanceOptions,
) -> None:
    """Optimal schedule with CP-SAT, warm-started from the best known schedule.

    Prints every applicable known schedule beside the optimum (makespan, bubble, peak memory,
    status, gap) and writes OUT/NAME.json (docs/spec.md §3) and OUT/NAME.png (Gantt + memory).
    """
    inst = load(instance, sets, options)
    if time_limit <= 0:
        raise fail(f"--time-limit = {time_limit}: must be > 0 seconds")
    if workers < 1:
        raise fail(f"--workers = {workers}: must be >= 1")
    params = cp_parameters(param)
    from cpsched.solver import solve as cp_solve
    from cpsched.validate import validate

    known = _known_schedules(inst)
    with ProgressPrinter(not quiet) as progress:
        try:
            res = cp_solve(inst, time_limit=time_limit, workers=workers, seed=seed,
                           candidates=known, parameters=params, on_progress=progress)
        except ValueError as exc:
            raise fail(str(exc)) from None
    best = res.schedule
    assert best is not None
    paths = write_outputs(best, out, inst.name, not no_plot)
    if quiet:
        return
    rows = []
    for sch in known.values():
        sch.lower_bound = res.lower_bound  # the instance's bound: each row's gap is against it
        rows.append(schedule_row(sch, validate(sch)))
    rows.append(schedule_row(best, None))
    if best.method != "cpsat":
        rows[-1][0] = f"best: {best.method}"
    print_table(inst, rows, res.lower_bound)
    note = " (time limit reached; gap shown)" if res.solver_status == "FEASIBLE" else ""
    say(f"cpsat: {res.status}{note}, makespan {fmt(res.makespan)}, lower bound "
        f"{fmt(res.lower_bound)}, warm start {res.hint_method}, {res.solve_seconds:.2f} s")
    if res.message:
        say(f"note: {res.message}")
    print_wrote(paths)
