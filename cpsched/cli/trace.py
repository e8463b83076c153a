"""``cpsched import-trace``: a measured training step against the optimum (docs/trace.md).

Reads PyTorch profiler Chrome traces or Megatron-LM timer files, prints the per-stage costs,
the clock alignment and skew, and measured step time vs the measured order simulated on the
measured costs vs the optimum; writes the derived instance (``NAME.toml``), the measured
schedule (``NAME.json``, ``NAME.png``) and the optimum (``NAME-optimum.json``) under ``--out``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from cpsched.cli.inputs import MAX_WORKERS, check_count, check_time_limit, command_start
from cpsched.cli.options import NoPlot, OutDir, Quiet, SetOpt, out_dir
from cpsched.cli.output import (
    ProgressPrinter,
    err_console,
    fail,
    out_console,
    print_table,
    print_wrote,
    report_violations,
    say,
    schedule_row,
)
from cpsched.instance import Instance, InstanceError, parse_override
from cpsched.model import Schedule
from cpsched.outputs import OutputError, check_stem


def _overrides(sets: list[str] | None, memory_limit: float | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if memory_limit is not None:
        out["memory.limit"] = memory_limit
    try:
        for text in sets or []:
            key, value = parse_override(text)
            out[key] = value
    except InstanceError as exc:
        raise fail(f"--set: {exc}") from None
    return out


def _check_numbers(step: int | None, resolution: float, unit_ms: float | None) -> None:
    if step is not None and step < 1:
        raise fail(f"--step = {step}: a step number >= 1 (1 = the first profiled step)")
    if not (math.isfinite(resolution) and 1e-6 <= resolution <= 1e3):
        raise fail(f"--resolution = {resolution}: ms from 1e-06 to 1000")
    if unit_ms is not None and not (math.isfinite(unit_ms) and unit_ms > 0):
        raise fail(f"--unit-ms = {unit_ms}: a number of ms > 0")


def _default_name(paths: list[Path]) -> str:
    first = paths[0].resolve()
    stem = first.name if first.is_dir() else first.parent.name
    try:
        return check_stem(stem or "measured")
    except OutputError:
        return "measured"


def _stats_table(run: Any) -> Table:
    t = Table(title="durations (ms); the instance takes the median", title_justify="left")
    for col in ("stage", "kind", "n", "median", "min", "max", "spread"):
        t.add_column(col, justify="left" if col == "kind" else "right")
    for st in run.stats:
        spread = (st.high - st.low) / st.median if st.median > 0 else 0.0
        t.add_row(str(st.stage), st.kind, str(st.n), f"{st.median:.3f}", f"{st.low:.3f}",
                  f"{st.high:.3f}", f"{100 * spread:.0f}%")
    return t


def _devices_table(run: Any) -> Table:
    from cpsched.trace.report import device_times

    t = Table(title="where each device's step went (ms)", title_justify="left")
    for col in ("device", "compute", "other PP ranges", "waiting for input", "idle"):
        t.add_column(col, justify="right")
    for d in device_times(run):
        t.add_row(str(d.device), f"{d.compute:.3f}",
                  "-" if d.other_ranges is None else f"{d.other_ranges:.3f}",
                  f"{d.waiting:.3f}", f"{d.idle:.3f}")
    return t


def _optimum(inst: Instance, known: dict[str, Schedule], time_limit: float, workers: int,
             quiet: bool) -> Schedule:
    from cpsched.solver import solve as cp_solve

    with ProgressPrinter(not quiet) as progress:
        res = cp_solve(inst, time_limit=time_limit, workers=workers, candidates=known,
                       on_progress=progress, started=command_start())
    return res.schedule


def _writers(run: Any, optimum: Schedule | None, plot: bool) -> dict[str, Any]:
    files: dict[str, Any] = {
        ".toml": lambda p: p.write_text(run.instance.to_toml(), encoding="utf-8"),
        ".json": lambda p: p.write_text(run.measured.to_json() + "\n", encoding="utf-8")}
    if plot:
        from cpsched import plots

        files[".png"] = lambda p: plots.gantt_and_memory(run.measured, p)
    if optimum is not None:
        files["-optimum.json"] = lambda p: p.write_text(optimum.to_json() + "\n",
                                                        encoding="utf-8")
    return files


def _print_report(run: Any, known: dict[str, Schedule], optimum: Schedule | None) -> None:
    from cpsched.schedules.registry import validated
    from cpsched.trace.report import compare, summary_lines
    from cpsched.validate import validate

    out_console.print(_stats_table(run))
    out_console.print(_devices_table(run))
    lb = None if optimum is None else optimum.lower_bound
    rows = [schedule_row(run.measured, run.violations)]
    run.replay.lower_bound = lb
    rows.append(schedule_row(run.replay, validate(run.replay)))
    for sch in known.values():
        sch.lower_bound = lb
        rows.append(schedule_row(sch, validated(sch)))
    if optimum is not None:
        rows.append(schedule_row(optimum, None))
    print_table(run.instance, rows, lb)
    for line in summary_lines(run, compare(run, optimum)):
        say(line)
    for note in run.notes:
        say(f"note: {note}")


def import_trace(
    traces: Annotated[list[Path], typer.Argument(
        metavar="TRACE...", help="Trace files or directories: PyTorch profiler Chrome traces "
        "(one per rank, e.g. examples/run_torch.py --trace-dir) or Megatron-LM "
        "event_times_PP*_VPP*_*.json files.", show_default=False)],
    fmt_: Annotated[str, typer.Option("--format", "-f", help="auto | pytorch | megatron."
                                      )] = "auto",
    step: Annotated[int | None, typer.Option(
        "--step", help="Which profiled training step (1 = first; default: the last).",
        show_default=False)] = None,
    align_mode: Annotated[str, typer.Option(
        "--align", help="auto (keep the clocks of traces taken on one host, else deps) | "
        "none | deps (offsets from the dependencies between ranks).")] = "auto",
    name: Annotated[str | None, typer.Option(
        "--name", help="Name of the derived instance and stem of the output files (default: "
        "the trace directory's name).", show_default=False)] = None,
    time_limit: Annotated[float, typer.Option(
        "--time-limit", "-t", help="Seconds for the optimum on the measured costs.")] = 10.0,
    workers: Annotated[int, typer.Option("--workers", "-w", help="CP-SAT workers.")] = 1,
    no_solve: Annotated[bool, typer.Option("--no-solve", help="Skip the optimum.")] = False,
    memory_limit: Annotated[float | None, typer.Option(
        "--memory-limit", help="Memory limit per device for the derived instance "
        "(activation units; a trace has no memory).", show_default=False)] = None,
    resolution: Annotated[float, typer.Option(
        "--resolution", help="ms the derived costs are rounded to.")] = 0.001,
    unit_ms: Annotated[float | None, typer.Option(
        "--unit-ms", help="ms per time unit of the files (default: µs for PyTorch traces, "
        "ms for Megatron files).", show_default=False)] = None,
    out: OutDir = Path("out"),
    sets: SetOpt = None,
    quiet: Quiet = False,
    no_plot: NoPlot = False,
) -> None:
    """A measured training step: its schedule, its costs, and how far it is from the optimum.

    Prints the per-stage durations (median, spread), the clock alignment (and any skew), and
    the measured step time vs the same order simulated with the measured costs vs the optimum.
    Writes OUT/NAME.toml (instance with the measured costs: `cpsched solve` it), OUT/NAME.json
    and .png (the measured schedule) and OUT/NAME-optimum.json. Exit 1 when the measured
    schedule breaks a rule other than a dependency explained by clock skew.
    """
    check_time_limit(time_limit)
    check_count(workers, "--workers", MAX_WORKERS)
    _check_numbers(step, resolution, unit_ms)
    overrides = _overrides(sets, memory_limit)
    stem = name or _default_name(traces)
    try:
        check_stem(stem, "--name")
    except OutputError as exc:
        raise fail(str(exc)) from None
    out = out_dir(out)
    from cpsched.schedules import run_all
    from cpsched.trace import TraceError, analyse, read_trace

    try:
        raw = read_trace(traces, fmt_, None if step is None else step - 1, unit_ms)
        run = analyse(raw, align_mode=align_mode, name=stem, overrides=overrides,
                      resolution=resolution)
    except InstanceError as exc:
        raise fail(f"instance: {exc}") from None
    except (TraceError, ValueError) as exc:
        raise fail(str(exc)) from None
    known = run_all(run.instance, command_start() + time_limit / 3)
    optimum = None if no_solve else _optimum(run.instance, known, time_limit, workers, quiet)
    if optimum is not None:
        run.measured.lower_bound = optimum.lower_bound
    try:
        paths = _write(run, optimum, out, stem, not no_plot)
    except OutputError as exc:
        raise fail(str(exc)) from None
    if not quiet:
        _print_report(run, known, optimum)
        print_wrote(paths)
    if run.aligned.skew and quiet:
        err_console.print(f"warning: clock skew on {len(run.aligned.skew)} dependencies",
                          markup=False)
    report_violations(run.violations)


def _write(run: Any, optimum: Schedule | None, out: Path, stem: str, plot: bool) -> list[Path]:
    from cpsched.cli.output import plot_skipped
    from cpsched.outputs import write_set

    reason = plot_skipped(len(run.measured.actions)) if plot else None
    paths = write_set(out, stem, _writers(run, optimum, plot and reason is None))
    if reason:
        err_console.print(f"note: {reason}", markup=False)
    return paths


__all__ = ["import_trace"]
