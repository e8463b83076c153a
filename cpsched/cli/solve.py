"""``cpsched solve``: the optimum with CP-SAT beside every applicable known schedule.

``--time-limit`` bounds the whole command, from the process's start: the known schedules get
at most a third of it, the solve ends early enough to leave time for writing the result
(:func:`_reserve`), and a PNG that would not fit is skipped with a note.  Ctrl-C keeps the
best schedule found so far, writes it, says so and exits 130 (:mod:`~cpsched.cli.solving`).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from cpsched.cli.inputs import (
    MAX_TIME_LIMIT,
    MAX_WORKERS,
    check_count,
    check_seed,
    check_time_limit,
    command_start,
    cp_parameters,
)
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
    ProgressPrinter,
    err_console,
    fail,
    plot_seconds,
    plot_skipped,
    print_table,
    print_wrote,
    say,
    schedule_row,
    write_outputs,
)
from cpsched.cli.solving import run_interruptible
from cpsched.display import fmt
from cpsched.forked import usable_cores
from cpsched.instance import Instance
from cpsched.model import Schedule, Status
from cpsched.outputs import OutputError

ParamOpt = Annotated[list[str] | None, typer.Option(
    "--param", help="Any CP-SAT parameter, NAME=VALUE (repeatable), e.g. "
    "--param max_deterministic_time=5; the value must have the parameter's type (an enum by "
    "name, e.g. search_branching=FIXED_SEARCH). Not: num_workers, random_seed, "
    "max_time_in_seconds (use --workers, --seed, --time-limit).", show_default=False)]

__all__ = ["cp_parameters", "solve"]


def _known_schedules(inst: Instance, deadline: float, workers: int | None = None,
                     table: bool = True) -> tuple[dict[str, Schedule], float]:
    """Every applicable registered schedule started before ``deadline`` (a perf_counter
    value), timed and, for the ``table``, validated: the warm-start candidates and the rows
    of the table.  A generator whose orders cannot run (a bug in that generator) is reported
    as a warning and left out; the others stay candidates.  Validating here, before the
    search, keeps the table's verdicts (cached, :func:`~cpsched.schedules.registry.validated`)
    inside the time the search is given: 0.2-0.7 s per schedule at 24 576 actions; without
    a table (``--quiet``) only the warm start's choice validates, in its rank order.  The
    list-scheduling searches run side by side on up to ``workers`` cores (None: every core;
    :func:`~cpsched.schedules.registry.run_all`'s ``processes``).

    Returns:
        ``(schedules, slowdown)``: ``slowdown`` is how much slower than on an idle machine
        this process's own work ran (:func:`_slowdown`; the time it waited for its children
        not counted)."""
    from cpsched.schedules import run_all
    from cpsched.schedules.registry import validated

    wall, cpu = time.perf_counter(), time.process_time()
    failed: dict[str, str] = {}
    timing: dict[str, float] = {}
    known = run_all(inst, deadline, failed=failed, timing=timing,
                    processes=usable_cores(workers))
    for name, message in failed.items():
        err_console.print(f"warning: known schedule {name} failed and is left out: {message}",
                          markup=False)
    if table:
        for sch in known.values():
            validated(sch)
    return known, _slowdown(time.perf_counter() - wall - timing.get("waited", 0.0),
                            time.process_time() - cpu)


#: the most that a measured slowdown scales the time kept for after the search
MAX_SLOWDOWN = 3.0


def _slowdown(wall: float, cpu: float) -> float:
    """Wall over CPU seconds of single-threaded work: 1 on an idle machine, about 1.5 on 2
    cores beside two busy processes (the share of a core this process got), clipped to
    ``[1, MAX_SLOWDOWN]``; 1 when the work was too short to tell (under 0.2 s)."""
    if wall < 0.2 or cpu <= 0:
        return 1.0
    return min(MAX_SLOWDOWN, max(1.0, wall / cpu))


#: Seconds per action for what follows the search — writing the JSON, the table — and a
#: fixed part, mostly the interpreter's exit (about 0.3 s after a large solve).  Measured on
#: 2 cores from the end of ``solve`` (which checks its own solution within its limit) to the
#: process's: 0.45 s at 24 576 actions (window search), 0.54 s there with the full model's
#: solution, 0.6-1.0 s at 65 536; session 6's 1.9 s at 12 288 and 3.6 s at 49 152 (8e-5 s an
#: action until session 54) included checking the solution.  Three times the measured need
#: or more, for a slower machine; a loaded one scales it by the slowdown.
AFTER_SEARCH_PER_ACTION, AFTER_SEARCH_FIXED = 3e-5, 1.0


def _reserve(inst: Instance, plot: bool, slowdown: float = 1.0,
             labels: int | None = None) -> float:
    """Seconds kept from ``--time-limit`` for what follows the search: the solution's check,
    the JSON, the PNG when one is drawn (``labels`` of its blocks numbered, as for
    :func:`plot_seconds`), the table (its rows were validated before the search) and the
    exit; times ``slowdown`` (:func:`_slowdown`), since on a machine loaded by other
    processes all of it runs that much slower."""
    return slowdown * (AFTER_SEARCH_FIXED + AFTER_SEARCH_PER_ACTION * inst.n_actions
                       + (plot_seconds(inst.n_actions, labels) if plot else 0.0))


def _count_work(cb: dict[str, Any]) -> str:
    """``"N LPs[ (K beside the search)][, P integer programs][ beside the search (S s)]"``:
    the counting bound's LPs and programs, and what its child did beside the search
    (docs/modelling.md §57, §61)."""
    beside = cb.get("beside") or {}
    words = f"{cb['lps']} LPs" + (f" ({beside['lps']} beside the search)"
                                  if beside.get("lps") else "")
    if cb.get("programs"):
        words += f", {cb['programs']} integer program{'s' * (cb['programs'] > 1)}"
    if beside:
        words += f" beside the search ({beside['seconds']:g} s)" if cb.get("programs") else (
            f"; {beside['seconds']:g} s beside the search")
    return words


def _labels(known: dict[str, Schedule]) -> int | None:
    """About how many blocks the PNG will number, from the shortest known schedule: the
    result is drawn at about its scale, and a shorter schedule (one over the memory limit)
    has wider blocks and more numbers, so this errs on the generous side; None (every
    block) when no schedule is known."""
    if not known:
        return None
    from cpsched.plots.gantt_chart import label_count

    return label_count(min(known.values(), key=lambda s: s.makespan))


def _best_valid(known: dict[str, Schedule]) -> Schedule | None:
    """The shortest known schedule the validator accepts (validating in makespan order)."""
    from cpsched.schedules.registry import validated

    for sch in sorted(known.values(), key=lambda s: s.makespan):
        if not validated(sch):
            return sch
    return None


def _interrupted(inst: Instance, result: Any, known: dict[str, Schedule], out: Path,
                 finished: bool) -> None:
    """After Ctrl-C: write the best schedule at hand (the solver's, else the best valid known
    one; no PNG, to exit at once), say so, exit 130."""
    best = result.schedule if result is not None else None
    if best is None:
        best = _best_valid(known)
    if best is None:
        say("interrupted before any schedule was found; nothing written")
    else:
        try:
            paths = write_outputs(best, out, inst.name, plot=False)
        except (OutputError, OSError) as exc:
            raise fail(f"interrupted, and the result could not be written: {exc}") from None
        bound = "-" if best.lower_bound is None else fmt(best.lower_bound)
        say(f"interrupted: kept the best schedule so far ({best.method}, {best.status}, "
            f"makespan {fmt(best.makespan)}, lower bound {bound}); no PNG")
        print_wrote(paths)
    if not finished:  # the solver thread did not stop in time: do not wait for it
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
    raise typer.Exit(130)


@instance_options
def solve(
    instance: InstanceArg = None,
    time_limit: Annotated[float, typer.Option(
        "--time-limit", "-t", help="Wall-clock seconds for the whole command (known "
        f"schedules, solve, writing), > 0 and <= {MAX_TIME_LIMIT:g}.")] = 60.0,
    workers: Annotated[int | None, typer.Option(
        "--workers", "-w", help=f"CP-SAT workers (num_workers), 1 to {MAX_WORKERS} "
        "(default: 8, or 4 above 20000 actions to keep memory under 4 GB).",
        show_default=False)] = None,
    seed: Annotated[int, typer.Option("--seed", help="CP-SAT random seed (32-bit).")] = 0,
    out: OutDir = Path("out"),
    sets: SetOpt = None,
    quiet: Quiet = False,
    no_plot: NoPlot = False,
    param: ParamOpt = None,
    method: Annotated[str, typer.Option(
        "--method", help="auto: the window search on models of 1500 or more actions (300 "
        "with an overlap cost, 500 under a memory limit), then the full CP-SAT model (below that "
        "the model alone; from 1500 actions the search keeps the time until it stops "
        "finding anything, and the model gets what is left); model: the full model only; "
        "search: the window search with all of the time and no full model (the bound is "
        "then the combinatorial one). docs/modelling.md §17, §32, §33.")] = "auto",
    *,
    options: InstanceOptions,
) -> None:
    """Optimal schedule with CP-SAT, warm-started from the best known schedule.

    Prints every applicable known schedule beside the optimum (makespan, bubble, peak memory,
    status, gap) and writes OUT/NAME.json (docs/spec.md §3) and OUT/NAME.png (Gantt + memory;
    skipped for huge schedules or when drawing it would not fit in --time-limit). OPTIMAL
    means proven: the makespan equals a lower bound. Ctrl-C keeps the best schedule so far,
    writes its JSON and exits 130.
    """
    started = command_start()
    check_time_limit(time_limit)
    if workers is not None:
        check_count(workers, "--workers", MAX_WORKERS)
    check_seed(seed)
    _check_method(method)
    params = cp_parameters(param)
    params["catch_sigint_signal"] = False  # Ctrl-C is ours: see cpsched.cli.solving
    inst = load(instance, sets, options)
    out = out_dir(out)
    try:
        known, slowdown = _known_schedules(inst, started + time_limit / 3, workers,
                                           table=not quiet)
    except KeyboardInterrupt:
        say("interrupted before the search; nothing written")
        raise typer.Exit(130) from None
    # the numbered blocks are counted (matplotlib imported) only for a PNG that may be drawn
    drawable = not no_plot and plot_skipped(inst.n_actions) is None
    labels = _labels(known) if drawable else None
    plot = drawable and plot_skipped(inst.n_actions, time_limit / 2, labels) is None
    reserve = _reserve(inst, plot, slowdown, labels)
    res = _search(inst, known, out, started, time_limit=max(0.01, time_limit - reserve),
                  workers=workers, seed=seed, params=params, quiet=quiet, method=method)
    best = res.schedule
    assert best is not None
    try:
        paths = write_outputs(best, out, inst.name, not no_plot, budget=time_limit / 2,
                              deadline=started + time_limit - _reserve(inst, False, slowdown))
    except OutputError as exc:
        raise fail(str(exc)) from None
    except KeyboardInterrupt:  # while drawing: keep the schedule, without the PNG
        _interrupted(inst, res, known, out, True)
    if not quiet:
        _report(inst, res, known)
        print_wrote(paths)


def _check_method(method: str) -> None:
    """Exit 2 unless ``method`` is a solve method
    (:func:`cpsched.solver.prelude.check_method`, the check ``solve`` itself makes)."""
    from cpsched.solver.prelude import check_method

    try:
        check_method(method)
    except ValueError as exc:  # "method = ...": name the option
        raise fail(f"--{exc}") from None


def _search(inst: Instance, known: dict[str, Schedule], out: Path, started: float,
            **kw: Any) -> Any:
    """CP-SAT on ``inst`` (interruptible), its time limit (``kw["time_limit"]``, the
    command's minus :func:`_reserve`) counted from ``started``; exits
    2 on a parameter CP-SAT rejects and 130 on Ctrl-C (after writing the best schedule)."""
    from cpsched.solver import solve as cp_solve

    with ProgressPrinter(not kw["quiet"]) as progress:
        run = run_interruptible(lambda on_solver: cp_solve(
            inst, time_limit=kw["time_limit"], workers=kw["workers"], seed=kw["seed"],
            candidates=known, parameters=kw["params"], on_progress=progress,
            started=started, on_solver=on_solver, method=kw["method"]))
    if run.interrupted:
        _interrupted(inst, run.result, known, out, run.finished)
    if isinstance(run.error, ValueError):
        raise fail(str(run.error)) from None
    if run.error is not None:
        raise run.error
    return run.result


def _report(inst: Instance, res: Any, known: dict[str, Schedule]) -> None:
    """The table of known schedules (validated) and the optimum, and the solver's line."""
    from cpsched.schedules.registry import validated

    best = res.schedule
    rows = []
    for sch in known.values():
        sch.lower_bound = res.lower_bound  # the instance's bound: each row's gap is against it
        rows.append(schedule_row(sch, validated(sch)))
    rows.append(schedule_row(best, None))
    if best.method != "cpsat":
        rows[-1][0] = f"best: {best.method}"
    print_table(inst, rows, res.lower_bound)
    note = (" (gap not closed: the search stopped at the time limit or at a --param limit)"
            if res.status == Status.FEASIBLE else "")
    say(f"cpsat: {res.status}{note}, makespan {fmt(res.makespan)}, lower bound "
        f"{fmt(res.lower_bound)}, warm start {res.warm_start}, {res.solve_seconds:.2f} s")
    mp = res.stats.get("modulo")
    if mp is not None:  # docs/modelling.md §22
        asked = mp.get("exact_periods") or 0  # shorter periods asked of CP-SAT (§41)
        say(f"modulo pattern: period {fmt(mp['period'])} (at least {fmt(mp['min_period'])}"
            + (f"; CP-SAT asked {asked} shorter period{'s' if asked > 1 else ''}" if asked
               else "") + f"), {fmt(mp['makespan'])} in {mp['seconds']:g} s"
            + (", the warm start" if mp["warm_start"] else ", not shorter than the warm start"))
    tg = res.stats.get("target")
    if tg is not None:  # docs/modelling.md §48
        say(f"DualPipe's family with its tight middle, asked for at most {fmt(tg['cap'])} "
            f"(within 1 % of the bound): "
            + ("none" if tg["makespan"] is None else fmt(tg["makespan"]))
            + f" in {tg['seconds']:g} s")
    fam = res.stats.get("dualpipe_family")
    if fam is not None and fam["makespan"] is not None:  # docs/modelling.md §40
        tight = fam.get("tight")  # docs/modelling.md §47
        say(f"DualPipe's family (mirror-symmetric, DualPipe's pairs): {fmt(fam['makespan'])} "
            f"in {fam['seconds']:g} s"
            + (f" (its tight middle first: {fmt(tight)})" if tight is not None else ""))
    tb = res.stats.get("tent")
    if tb is not None and tb["bound"] > tb["before"]:  # docs/modelling.md §24
        say(f"tent bound: {fmt(tb['before'])} -> {fmt(tb['bound'])} in {tb['seconds']:g} s "
            f"(memory around each microbatch's turn, devices "
            f"{', '.join(map(str, tb['devices']))})")
    sb = res.stats.get("span")
    if sb is not None and sb["bound"] > sb["before"]:  # docs/modelling.md §53
        say(f"span bound: {fmt(sb['before'])} -> {fmt(sb['bound'])} in {sb['seconds']:g} s "
            f"(turns of {len(sb['spans']) + 1} microbatches at F({sb['stage']}))")
    cb = res.stats.get("count")
    if cb is not None and cb["bound"] > cb["before"]:  # docs/modelling.md §55
        say(f"counting bound: {fmt(cb['before'])} -> {fmt(cb['bound'])} in {cb['seconds']:g} s "
            f"(device {cb['device']}'s counts on a grid of {fmt(cb['grid'])}, "
            f"{_count_work(cb)})")
    pw = res.stats.get("pair_windows")
    if pw is not None and pw["bound"] > pw["before"]:  # docs/modelling.md §28
        say(f"pair window bound: {fmt(pw['before'])} -> {fmt(pw['bound'])} in "
            f"{pw['seconds']:g} s (F&B pairs only where both halves can run)")
    pr = res.stats.get("pair_relaxation")
    if pr is not None and pr["bound"] > pr["before"]:  # docs/modelling.md §29
        say(f"one-device relaxation with pairs: {fmt(pr['before'])} -> {fmt(pr['bound'])} in "
            f"{pr['seconds']:g} s (devices {', '.join(str(d) for d, _, _ in pr['devices'])})")
    relaxed = res.stats.get("relaxed_devices")
    if relaxed:  # docs/modelling.md §21, §31: after the search, devices alone or in groups
        say("relaxation: " + ", ".join(
            f"{'devices ' + '+'.join(map(str, d)) if isinstance(d, tuple) else f'device {d}'}"
            f" {fmt(b)}{' (solved)' if solved else ''}" for d, b, solved in relaxed))
    fitted = res.stats.get("dualpipe_fitted")
    if fitted is not None:  # docs/modelling.md §62
        say(f"window search started from dualpipe fitted to the memory limit (pairs over it "
            f"run backward, then forward): {fmt(fitted['makespan'])}"
            + ("" if fitted["shorter"] else "; not shorter than the warm start, kept"))
    ws = res.stats.get("window_search")
    if ws is not None:  # docs/modelling.md §17; from the warm start or the target's (§48)
        moves = ws.get("plateau_moves", 0)
        say(f"window search: {ws['windows']} windows in {ws['seconds']:g} s, "
            f"{fmt(ws['from'])} -> {fmt(ws['makespan'])}"
            + (f" ({moves} plateau moves)" if moves else ""))
    if res.message:
        say(f"note: {res.message}")
