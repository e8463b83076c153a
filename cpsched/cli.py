"""The ``cpsched`` command line (SPEC §4).

Exit codes: 0 success; 1 invalid schedule / infeasible instance; 2 bad input.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from cpsched.instance import Instance, InstanceError, load_instance
from cpsched.model import Schedule, ScheduleFileError

app = typer.Typer(
    name="cpsched",
    help="Provably optimal pipeline-parallel training schedules (OR-Tools CP-SAT), and every "
    "well-known schedule (GPipe, 1F1B, interleaved, Zero Bubble, DualPipe) measured against "
    "them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
out_console = Console(highlight=False)
if not out_console.is_terminal:  # pipes and CI logs: wide tables rather than folded cells
    out_console = Console(highlight=False, width=160)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def _fail(msg: str, code: int = 2) -> typer.Exit:
    err_console.print(f"error: {msg}", markup=False)
    return typer.Exit(code)


# ------------------------------------------------------------ instance flags
InstanceArg = Annotated[Path | None, typer.Argument(
    help="Instance TOML file (SPEC §2). Omit it to build the instance from flags alone.",
    show_default=False)]
SetOpt = Annotated[list[str] | None, typer.Option(
    "--set", help="Override a field: KEY=VALUE, e.g. --set pipeline.microbatches=16 "
    "(repeatable; VALUE is read as TOML).", show_default=False)]

_FLAG_FIELDS = {
    "name": "name", "devices": "pipeline.devices", "chunks": "pipeline.stages_per_device",
    "microbatches": "pipeline.microbatches", "placement": "pipeline.placement",
    "split_backward": "pipeline.split_backward", "forward": "costs.forward",
    "backward": "costs.backward", "backward_input": "costs.backward_input",
    "backward_weight": "costs.backward_weight",
    "overlap_forward_backward": "costs.overlap_forward_backward",
    "p2p_latency": "costs.p2p_latency", "activation": "memory.activation",
    "released_by_input": "memory.released_by_input", "memory_limit": "memory.limit",
}


def _instance(path: Path | None, sets: list[str] | None, flags: dict[str, Any]) -> Instance:
    overrides: dict[str, Any] = {}
    for key, field in _FLAG_FIELDS.items():
        if flags.get(key) is not None:
            overrides[field] = flags[key]
    try:
        if path is None and not overrides and not sets:
            raise InstanceError("INSTANCE", None,
                                "give an instance file, or build one from flags "
                                "(--devices, --microbatches, --forward, --backward, ...)")
        from cpsched.instance import parse_override

        for text in sets or []:
            k, v = parse_override(text)
            overrides[k] = v
        return load_instance(path, overrides)
    except InstanceError as exc:
        raise _fail(f"instance: {exc}") from None


def _flags(params: dict[str, Any]) -> dict[str, Any]:
    """The instance flags among a command's parameters."""
    return {k: v for k, v in params.items() if k in _FLAG_FIELDS}


Devices = Annotated[int | None, typer.Option("--devices", "-p", help="Devices (pipeline ranks) p.",
                                             rich_help_panel="Instance from flags")]
Chunks = Annotated[int | None, typer.Option("--chunks", "-v", help="Stages (chunks) per device v.",
                                            rich_help_panel="Instance from flags")]
Micro = Annotated[int | None, typer.Option("--microbatches", "-m", help="Microbatches m.",
                                           rich_help_panel="Instance from flags")]
Placement = Annotated[str | None, typer.Option("--placement", help="loop | v | bidirectional.",
                                               rich_help_panel="Instance from flags")]
Split = Annotated[bool | None, typer.Option("--split-backward/--fused-backward",
                                            help="Split backward into I and W.",
                                            rich_help_panel="Instance from flags",
                                            show_default=False)]
Fwd = Annotated[float | None, typer.Option("--forward", help="F time per stage.",
                                           rich_help_panel="Instance from flags")]
Bwd = Annotated[float | None, typer.Option("--backward", help="B time per stage.",
                                           rich_help_panel="Instance from flags")]
BwdI = Annotated[float | None, typer.Option("--backward-input", help="I time per stage.",
                                            rich_help_panel="Instance from flags")]
BwdW = Annotated[float | None, typer.Option("--backward-weight", help="W time per stage.",
                                            rich_help_panel="Instance from flags")]
Ovl = Annotated[float | None, typer.Option("--overlap", help="Overlapped F&B pair duration.",
                                           rich_help_panel="Instance from flags")]
Lat = Annotated[float | None, typer.Option("--p2p-latency", help="Latency between devices.",
                                           rich_help_panel="Instance from flags")]
Act = Annotated[float | None, typer.Option("--activation",
                                           help="Activation memory per stage per microbatch.",
                                           rich_help_panel="Instance from flags")]
Rel = Annotated[float | None, typer.Option("--released-by-input",
                                           help="Fraction of activation freed at the end of I.",
                                           rich_help_panel="Instance from flags")]
MemLimit = Annotated[float | None, typer.Option("--memory-limit",
                                                help="Memory limit per device (overrides "
                                                "memory.limit).")]
Name = Annotated[str | None, typer.Option("--name", help="Instance name (output file stem).",
                                          rich_help_panel="Instance from flags")]
OutDir = Annotated[Path, typer.Option("--out", "-o", help="Output directory.")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress and no table.")]
NoPlot = Annotated[bool, typer.Option("--no-plot", help="Do not write the Gantt PNG.")]


# ------------------------------------------------------------------ output
def _fmt(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "-"
    if float(x).is_integer():
        return str(int(x))
    return f"{x:.{digits}f}".rstrip("0").rstrip(".")


def _row(sch: Schedule, lb: float | None, violations: list[str] | None) -> list[str]:
    gap = None if lb is None or sch.makespan <= 0 else max(0.0, (sch.makespan - lb) / sch.makespan)
    status = sch.status
    if violations:
        status = "OVER LIMIT" if any("memory limit" in v for v in violations) else "INVALID"
    return [sch.method, _fmt(sch.makespan), f"{100 * sch.bubble_fraction:.1f}%",
            " ".join(_fmt(x, 2) for x in sch.peak_memory), status,
            "-" if gap is None else f"{100 * gap:.1f}%"]


def _print_table(inst: Instance, rows: list[list[str]], lb: float | None) -> None:
    title = (f"{inst.name}: p={inst.p} v={inst.v} m={inst.m} {inst.placement}"
             f"{' split' if inst.split_backward else ''}"
             + ("" if inst.memory_limit is None else f", memory limit {_fmt(inst.memory_limit)}")
             + ("" if lb is None else f", lower bound {_fmt(lb)}"))
    t = Table(title=title, title_justify="left")
    for col, just in (("schedule", "left"), ("makespan", "right"), ("bubble", "right"),
                      ("peak memory per device", "left"), ("status", "left"),
                      ("gap", "right")):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in rows:
        t.add_row(*r)
    out_console.print(t)


def _write_outputs(sch: Schedule, out: Path, stem: str, plot: bool) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{stem}.json"]
    sch.to_json(paths[0])
    if plot:
        from cpsched import plots

        png = out / f"{stem}.png"
        plots.gantt_and_memory(sch, png)
        paths.append(png)
    return paths


def _baselines(inst: Instance) -> dict[str, Schedule]:
    from cpsched.schedules import applicable_schedules
    from cpsched.simulate import OrderError, simulate

    out = {}
    for spec in applicable_schedules(inst):
        try:
            out[spec.name] = simulate(inst, spec.generate(inst), method=spec.name)
        except OrderError as exc:  # a generator bug must not hide the rest
            err_console.print(f"warning: schedule {spec.name} failed: {exc}", markup=False)
    return out


class _ProgressPrinter:
    """Incumbent / bound / elapsed while solving: a live status line on a terminal, else one
    line per improvement (at most one per second)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.status = None
        self.last = 0.0
        self.live = enabled and err_console.is_terminal

    def __enter__(self) -> _ProgressPrinter:
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
        msg = (f"solving: incumbent {_fmt(incumbent)}  bound {_fmt(bound)}  "
               f"elapsed {elapsed:.1f}s")
        if self.status is not None:
            self.status.update(msg)
        elif elapsed - self.last >= 1.0 or self.last == 0.0:
            self.last = max(elapsed, 1e-9)
            err_console.print(msg, markup=False)


# ---------------------------------------------------------------- commands
@app.command()
def solve(
    instance: InstanceArg = None,
    time_limit: Annotated[float, typer.Option("--time-limit", "-t",
                                              help="CP-SAT wall-clock limit, seconds.")] = 60.0,
    workers: Annotated[int, typer.Option("--workers", "-w",
                                         help="CP-SAT workers (num_workers).")] = 8,
    seed: Annotated[int, typer.Option("--seed", help="CP-SAT random seed.")] = 0,
    memory_limit: MemLimit = None,
    out: OutDir = Path("out"),
    sets: SetOpt = None,
    quiet: Quiet = False,
    no_plot: NoPlot = False,
    param: Annotated[list[str] | None, typer.Option(
        "--param", help="Any CP-SAT parameter, NAME=VALUE (repeatable), e.g. "
        "--param max_deterministic_time=5.", show_default=False)] = None,
    name: Name = None, devices: Devices = None, chunks: Chunks = None, microbatches: Micro = None,
    placement: Placement = None, split_backward: Split = None, forward: Fwd = None,
    backward: Bwd = None, backward_input: BwdI = None, backward_weight: BwdW = None,
    overlap_forward_backward: Ovl = None, p2p_latency: Lat = None, activation: Act = None,
    released_by_input: Rel = None,
) -> None:
    """Optimal schedule with CP-SAT, warm-started from the best known schedule.

    Prints every applicable known schedule beside the optimum (makespan, bubble, peak memory,
    status, gap) and writes OUT/NAME.json (SPEC §3) and OUT/NAME.png (Gantt + memory).
    """
    inst = _instance(instance, sets, _flags(locals()))
    if time_limit <= 0:
        raise _fail(f"--time-limit = {time_limit}: must be > 0 seconds")
    if workers < 1:
        raise _fail(f"--workers = {workers}: must be >= 1")
    params = _parse_params(param)
    from cpsched.solver import solve as cp_solve
    from cpsched.validate import validate

    baselines = _baselines(inst)
    with _ProgressPrinter(not quiet) as progress:
        try:
            res = cp_solve(inst, time_limit=time_limit, workers=workers, seed=seed,
                           candidates=baselines, parameters=params, on_progress=progress)
        except ValueError as exc:
            raise _fail(str(exc)) from None
    assert res.schedule is not None
    paths = _write_outputs(res.schedule, out, inst.name, not no_plot)
    if not quiet:
        rows = [_row(s, res.lower_bound, validate(s)) for s in baselines.values()]
        best = _row(res.schedule, res.lower_bound, None)
        if res.schedule.method != "cpsat":
            best[0] = f"best: {res.schedule.method}"
        rows.append(best)
        _print_table(inst, rows, res.lower_bound)
        note = " (time limit reached; gap shown)" if res.solver_status == "FEASIBLE" else ""
        out_console.print(f"cpsat: {res.status}{note}, makespan {_fmt(res.makespan)}, "
                          f"lower bound {_fmt(res.lower_bound)}, warm start {res.hint_method}, "
                          f"{res.solve_seconds:.2f} s", markup=False)
        if res.message:
            out_console.print(f"note: {res.message}", markup=False)
        out_console.print("wrote " + ", ".join(str(p) for p in paths), markup=False)


def _parse_params(items: list[str] | None) -> dict[str, Any]:
    import tomllib

    params: dict[str, Any] = {}
    for text in items or []:
        if "=" not in text:
            raise _fail(f"--param {text!r}: expected NAME=VALUE")
        k, raw = text.split("=", 1)
        try:
            params[k.strip()] = tomllib.loads(f"x = {raw.strip()}")["x"]
        except tomllib.TOMLDecodeError:
            params[k.strip()] = raw.strip()
    from ortools.sat import sat_parameters_pb2

    fields = sat_parameters_pb2.SatParameters.DESCRIPTOR.fields_by_name
    for k in params:
        if k not in fields:
            raise _fail(f"--param {k}: not a CP-SAT parameter (see sat_parameters.proto)")
    return params


@app.command()
def simulate(
    instance: InstanceArg = None,
    schedule: Annotated[str, typer.Option("--schedule", "-s",
                                          help="Registered schedule name (see `cpsched "
                                          "schedules`).")] = "1f1b",
    memory_limit: MemLimit = None,
    out: OutDir = Path("out"),
    sets: SetOpt = None,
    quiet: Quiet = False,
    no_plot: NoPlot = False,
    name: Name = None, devices: Devices = None, chunks: Chunks = None, microbatches: Micro = None,
    placement: Placement = None, split_backward: Split = None, forward: Fwd = None,
    backward: Bwd = None, backward_input: BwdI = None, backward_weight: BwdW = None,
    overlap_forward_backward: Ovl = None, p2p_latency: Lat = None, activation: Act = None,
    released_by_input: Rel = None,
) -> None:
    """A named known schedule, timed on the instance and validated.

    Writes OUT/NAME-SCHEDULE.json and .png; exit 1 if it breaks a constraint (e.g. the
    memory limit), listing each violation.
    """
    inst = _instance(instance, sets, _flags(locals()))
    from cpsched.graph import overlap_lower_bound
    from cpsched.schedules import NotApplicable, run_schedule
    from cpsched.validate import validate

    try:
        sch = run_schedule(schedule, inst)
    except NotApplicable as exc:
        raise _fail(f"schedule {exc}") from None
    except ValueError as exc:
        raise _fail(str(exc)) from None
    lb = inst.from_ticks(overlap_lower_bound(inst))  # valid with or without F&B overlap
    sch.lower_bound = lb
    violations = validate(sch)
    paths = _write_outputs(sch, out, f"{inst.name}-{schedule}", not no_plot)
    if not quiet:
        _print_table(inst, [_row(sch, lb, violations)], lb)
        out_console.print("wrote " + ", ".join(str(p) for p in paths), markup=False)
    if violations:
        for v in violations:
            err_console.print(f"violation: {v}", markup=False)
        raise typer.Exit(1)


@app.command()
def schedules() -> None:
    """List the registered known schedules with their preconditions and sources."""
    from cpsched.schedules import REGISTRY

    t = Table(title="registered schedules", title_justify="left", show_lines=False)
    for col in ("name", "what", "preconditions", "source"):
        t.add_column(col, overflow="fold")
    for spec in REGISTRY.values():
        t.add_row(spec.name, spec.summary, spec.preconditions, spec.source)
    out_console.print(t)


@app.command()
def validate(
    instance: Annotated[Path, typer.Argument(help="Instance TOML file.")],
    schedule_file: Annotated[Path, typer.Argument(metavar="SCHEDULE.json",
                                                  help="Schedule file (SPEC §3).")],
    sets: SetOpt = None,
) -> None:
    """Check a schedule file against an instance: exit 0 if valid, 1 listing each violation."""
    inst = _instance(instance, sets, {})
    from cpsched.validate import validate as check

    try:
        sch = Schedule.from_json(schedule_file, inst)
    except (ScheduleFileError, InstanceError) as exc:
        raise _fail(str(exc)) from None
    violations = check(sch, inst)
    claimed = _claimed(schedule_file)
    tol = 1e-6
    for key, actual in (("makespan", sch.makespan), ("bubble_fraction", sch.bubble_fraction)):
        if isinstance(claimed.get(key), int | float) and abs(claimed[key] - actual) > 1e-4 + tol:
            violations.append(f"{key} in the file is {claimed[key]}; the actions give "
                              f"{_fmt(actual, 6)}")
    pm = claimed.get("peak_memory")
    if isinstance(pm, list) and (len(pm) != len(sch.peak_memory) or any(
            not isinstance(x, int | float) or abs(x - y) > 1e-6
            for x, y in zip(pm, sch.peak_memory, strict=False))):
        violations.append(f"peak_memory in the file is {pm}; the actions give "
                          f"{[_fmt(x) for x in sch.peak_memory]}")
    if violations:
        for v in violations:
            out_console.print(f"violation: {v}", markup=False)
        out_console.print(f"INVALID: {len(violations)} violation(s)", markup=False)
        raise typer.Exit(1)
    out_console.print(f"valid: {len(sch.actions)} actions, makespan {_fmt(sch.makespan)}, "
                      f"bubble {100 * sch.bubble_fraction:.1f}%, peak memory "
                      f"{[_fmt(x) for x in sch.peak_memory]}", markup=False)


@app.command()
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
    from cpsched import compare as cmp

    insts: list[Instance] = [_instance(p, sets, {}) for p in instances or []]
    if grid is not None:
        try:
            insts += cmp.load_grid(grid)
        except InstanceError as exc:
            raise _fail(f"grid: {exc}") from None
    if not insts:
        raise _fail("compare needs instance files or --grid FILE")
    if time_limit <= 0:
        raise _fail(f"--time-limit = {time_limit}: must be > 0 seconds")
    df = cmp.compare(insts, time_limit=time_limit, workers=workers, jobs=jobs,
                     progress=not quiet)
    csv_path, md_path = cmp.write_results(df, out, stem)
    from cpsched import plots

    png = out / f"{stem}-bubble.png"
    plots.save_figure(plots.bubble_bars(df), png, close=True)
    if not quiet:
        cols = [c for c in ("instance", "schedule", "makespan", "bubble_fraction",
                            "peak_memory", "valid", "opt_makespan_same_memory",
                            "improvement_same_memory_pct", "status") if c in df.columns]
        out_console.print(df[cols].to_string(index=False), markup=False)
        out_console.print(f"wrote {csv_path}, {md_path}, {png}", markup=False)


@app.command()
def export(
    schedule_file: Annotated[Path, typer.Argument(metavar="SCHEDULE.json",
                                                  help="Schedule file (SPEC §3).")],
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
        raise _fail(str(exc)) from None


@app.command("import-torch")
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
    inst = _instance(instance, sets, {})
    from cpsched.graph import overlap_lower_bound
    from cpsched.torch_io import TorchCsvError, read_torch_csv
    from cpsched.validate import validate as check

    try:
        sch = read_torch_csv(csv_file, inst)
    except (TorchCsvError, OSError) as exc:
        raise _fail(str(exc)) from None
    lb = inst.from_ticks(overlap_lower_bound(inst))  # valid with or without F&B overlap
    sch.lower_bound = lb
    violations = check(sch)
    paths = _write_outputs(sch, out, f"{inst.name}-{csv_file.stem}", not no_plot)
    if not quiet:
        rows = [_row(sch, lb, violations)]
        from cpsched.schedules import run_all

        rows += [_row(s, lb, check(s)) for s in run_all(inst).values()]
        _print_table(inst, rows, lb)
        out_console.print("wrote " + ", ".join(str(p) for p in paths), markup=False)
    if violations:
        for v in violations:
            err_console.print(f"violation: {v}", markup=False)
        raise typer.Exit(1)


def _claimed(path: Path) -> dict[str, Any]:
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def main() -> None:
    """Entry point: run the app; bad input never shows a traceback."""
    try:
        app()
    except (InstanceError, ScheduleFileError) as exc:
        err_console.print(f"error: {exc}", markup=False)
        sys.exit(2)



if __name__ == "__main__":
    main()
