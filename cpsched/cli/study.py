"""``cpsched compare``: known schedules against the optimum over many instances, as a study
directory (docs/studies.md) whose solves run on Dask — a local cluster by default,
``--scheduler tcp://HOST:PORT`` for any other.

Inputs are checked before any solve (worker counts, time limits, scheduler address, CP-SAT
parameters, output directory and study name, unique instance names); a large study is
announced with its worst-case duration.  Each finished solve is written to ``OUT/STEM/`` as
it arrives; rerunning the same command computes only what is missing.  Ctrl-C keeps every
finished solve on disk and exits 130.

Options renamed in issue 13: ``--workers/-w`` is now the number of local Dask worker
processes (it was CP-SAT threads per solve, now ``--threads``); ``--jobs/-j`` stays as a
hidden alias of ``--workers``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any

import typer

from cpsched.cli.inputs import (
    MAX_JOBS,
    MAX_WORKERS,
    check_count,
    check_seed,
    check_time_limit,
    cp_parameters,
)
from cpsched.cli.options import OutDir, Quiet, SetOpt, load, out_dir
from cpsched.cli.output import err_console, fail, say
from cpsched.instance import Instance, InstanceError
from cpsched.outputs import OutputError, check_stem

_TABLE_COLUMNS = ("instance", "schedule", "makespan", "bubble_fraction", "peak_memory", "valid",
                  "opt_makespan_same_memory", "improvement_same_memory_pct", "status")

#: Above this many instances the study is announced with its worst-case duration.
LARGE_STUDY = 200

#: Wall-clock seconds per solve when neither ``--time-limit`` nor ``--deterministic-time``
#: is given.
DEFAULT_TIME_LIMIT = 30.0

#: A Dask scheduler address.
_ADDRESS = re.compile(r"^(tcp|tls|ws|wss|ucx)://[^\s/]+:\d{1,5}$")

ParamOpt = Annotated[list[str] | None, typer.Option(
    "--param", help="Any CP-SAT parameter for every solve, NAME=VALUE (repeatable), e.g. "
    "--param max_deterministic_time=5. Not: num_workers, random_seed, max_time_in_seconds "
    "(use --threads, --seed, --time-limit).", show_default=False)]


def _unique_names(insts: list[Instance]) -> None:
    """Exit 2 when two instances share a name (names key the table)."""
    seen: set[str] = set()
    for inst in insts:
        if inst.name in seen:
            raise fail(f"instance name {inst.name!r} appears twice: names key the table; "
                       "give each instance its own name (name = ... in the file, or --set "
                       "name=...)")
        seen.add(inst.name)


def _announce(n: int, time_limit: float | None, procs: int | None) -> None:
    """Warn about a large study: how many solves it may take and for how long at most."""
    if n <= LARGE_STUDY or time_limit is None:
        return
    procs = procs or os.cpu_count() or 1
    hours = n * time_limit / procs / 3600
    err_console.print(f"warning: {n} instances: at least {n} solves of up to {time_limit:g} s "
                      f"on {procs} workers, up to {hours:.1f} h for the unlimited solves "
                      "alone (Ctrl-C keeps the finished ones; a rerun continues)",
                      markup=False)


def check_scheduler(address: str | None) -> str | None:
    """``address`` if it is None or a Dask address ``SCHEME://HOST:PORT``; else exit 2."""
    if address is not None and not _ADDRESS.match(address):
        raise fail(f"--scheduler = {address!r}: must be a Dask scheduler address "
                   "SCHEME://HOST:PORT (scheme tcp, tls, ws, wss or ucx), e.g. "
                   "tcp://10.0.0.5:8786")
    return address


def _solver_inputs(time_limit: float | None, det_time: float | None, threads: int,
                   seed: int, param: list[str] | None) -> tuple[float | None, dict[str, Any]]:
    """The per-solve wall-clock limit and CP-SAT parameters; exit 2 on a bad value."""
    if time_limit is not None:
        check_time_limit(time_limit)
    if det_time is not None:
        check_time_limit(det_time, "--deterministic-time")
    check_count(threads, "--threads", MAX_WORKERS)
    check_seed(seed)
    for text in param or []:
        if text.split("=", 1)[0].strip() in ("num_workers", "num_search_workers"):
            raise fail(f"--param {text!r}: CP-SAT threads per solve are set by --threads")
    params = cp_parameters(param)
    if det_time is not None:
        params["max_deterministic_time"] = det_time
    if time_limit is None and det_time is None and "max_deterministic_time" not in params:
        time_limit = DEFAULT_TIME_LIMIT
    return time_limit, params


def _workers(workers: int | None, jobs: int | None) -> int | None:
    """``--workers`` or its old name ``--jobs`` (exit 2 when both differ)."""
    check_count(workers, "--workers", MAX_JOBS)
    check_count(jobs, "--jobs", MAX_JOBS)
    if workers is not None and jobs is not None and workers != jobs:
        raise fail(f"--jobs = {jobs}: an old name of --workers (= {workers}); give one of them")
    return workers if workers is not None else jobs


def compare(
    instances: Annotated[list[Path] | None, typer.Argument(
        help="Instance TOML files.", show_default=False)] = None,
    grid: Annotated[Path | None, typer.Option(
        "--grid", "-g", help="Grid TOML: a base instance and a [grid] table of dotted keys "
        "to lists of values (their product is solved).")] = None,
    time_limit: Annotated[float | None, typer.Option(
        "--time-limit", "-t", help="Wall-clock seconds per solve (default 30, or none with "
        "--deterministic-time).", show_default=False)] = None,
    det_time: Annotated[float | None, typer.Option(
        "--deterministic-time", help="CP-SAT max_deterministic_time per solve: with "
        "--threads 1 and no --time-limit every solve is reproducible on any machine.",
        show_default=False)] = None,
    threads: Annotated[int, typer.Option(
        "--threads", help=f"CP-SAT workers (threads) per solve, 1 to {MAX_WORKERS}.")] = 1,
    workers: Annotated[int | None, typer.Option(
        "--workers", "-w", help=f"Local Dask worker processes, 1 to {MAX_JOBS} (default: "
        "CPUs; 1: solve in this process).", show_default=False)] = None,
    jobs: Annotated[int | None, typer.Option("--jobs", "-j", hidden=True)] = None,
    scheduler: Annotated[str | None, typer.Option(
        "--scheduler", help="Run the solves on this Dask cluster, e.g. tcp://10.0.0.5:8786 "
        "(default: a local cluster).", show_default=False)] = None,
    seed: Annotated[int, typer.Option("--seed", help="CP-SAT random seed (32-bit).")] = 0,
    param: ParamOpt = None,
    out: OutDir = Path("out"),
    stem: Annotated[str, typer.Option(
        "--stem", help="Study name: the study directory is OUT/STEM (rerun the same command "
        "to continue it); the report is OUT/STEM.csv, .md, -bubble.png (STEM-2... if "
        "taken).")] = "compare",
    sets: SetOpt = None,
    quiet: Quiet = False,
) -> None:
    """Known schedules vs the optimum (unlimited and at each schedule's own peak memory)
    over many instances, solved on Dask into the study directory OUT/STEM; then its report
    OUT/STEM.csv, .md and -bubble.png.  Rerunning computes only what is missing; Ctrl-C
    keeps every finished solve, writes the finished instances' rows and exits 130."""
    limit, params = _solver_inputs(time_limit, det_time, threads, seed, param)
    n_workers = _workers(workers, jobs)
    check_scheduler(scheduler)
    try:
        check_stem(stem)
    except OutputError as exc:
        raise fail(str(exc)) from None
    insts, sources = _instances(instances, grid, sets)
    _unique_names(insts)
    out = out_dir(out)
    _announce(len(insts), limit, n_workers)
    _run(insts, sources, out, stem, quiet=quiet,
         kw={"time_limit": limit, "workers": threads, "seed": seed, "parameters": params,
             "jobs": n_workers, "scheduler": scheduler})


def _run(insts: list[Instance], sources: list[str], out: Path, stem: str, *, quiet: bool,
         kw: dict[str, Any]) -> None:
    """Run the study ``OUT/STEM``, then write and show its report ``OUT/STEM.csv`` ...; exit
    2 on an unusable study directory or scheduler, 130 on Ctrl-C (after writing the rows of
    the instances that finished)."""
    from cpsched import study

    study_dir = out / stem
    ran: list[str] = []
    try:
        study.compare(insts, progress=not quiet, study=study_dir, sources=sources,
                      on_result=lambda task, *_: ran.append(task.task_id), **kw)
    except study.StudyInterrupted as exc:
        if len(exc.table):
            _write(exc.table, out, stem, "")
        say(f"interrupted: {exc.finished} of {exc.total} instances finished, {len(ran)} "
            f"solves in this run; every finished solve is kept in {study_dir}: rerun the "
            f"same command to continue, or see it with cpsched report {study_dir}")
        raise typer.Exit(130) from None
    except KeyboardInterrupt:
        say(f"interrupted before the solves started; rerun to continue ({study_dir})")
        raise typer.Exit(130) from None
    except OutputError as exc:
        raise fail(str(exc)) from None
    except OSError as exc:
        if kw["scheduler"] is None:
            raise
        raise fail(f"--scheduler = {kw['scheduler']!r}: cannot connect ({exc})") from None
    say(f"solved {len(ran)} tasks in this run")
    show_report(study_dir, out, stem, quiet)


def _instances(paths: list[Path] | None, grid: Path | None,
               sets: list[str] | None) -> tuple[list[Instance], list[str]]:
    """The instance files, then the grid's instances, and where they came from; exit 2 if
    there are none."""
    from cpsched import study

    insts: list[Instance] = [load(p, sets) for p in paths or []]
    sources = [str(p) for p in paths or []]
    if grid is not None:
        try:
            insts += study.load_grid(grid)
        except InstanceError as exc:
            raise fail(f"grid: {exc}") from None
        sources.append(f"grid {grid}: {grid.read_text(encoding='utf-8')}")
    if not insts:
        raise fail("compare needs instance files or --grid FILE")
    return insts, sources


def _write(table: Any, out: Path, stem: str, summary: str) -> None:
    """Write the report files ``OUT/STEM.csv``, ``.md``, ``-bubble.png`` and say so."""
    from cpsched.study import write_report

    try:
        paths, note = write_report(table, out, stem)
    except OutputError as exc:
        raise fail(str(exc)) from None
    if note:
        err_console.print(f"note: {note}", markup=False)
    say("wrote " + ", ".join(str(p) for p in paths) + (f" ({summary})" if summary else ""))


def show_report(study_dir: Path, out: Path, stem: str, quiet: bool) -> None:
    """Write the report of ``study_dir`` as ``OUT/STEM.csv``, ``.md`` and ``-bubble.png``
    (``STEM-2``, ... when taken) and print its table unless ``quiet``.

    Raises:
        typer.Exit: code 2 when ``study_dir`` is not a compare study directory.
    """
    from cpsched.study import read_report

    try:
        rep = read_report(study_dir)
    except OutputError as exc:
        raise fail(str(exc)) from None
    if not len(rep.table):
        say(f"{study_dir}: no instances yet")
        return
    if not quiet:
        cols = [c for c in _TABLE_COLUMNS if c in rep.table.columns]
        say(rep.table[cols].to_string(index=False))
    _write(rep.table, out, stem, rep.summary())


def report(
    study_dir: Annotated[Path, typer.Argument(
        help="A study directory written by cpsched compare (OUT/STEM).", show_default=False)],
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Where the report goes (default: the study directory's parent, "
        "beside it).", show_default=False)] = None,
    stem: Annotated[str | None, typer.Option(
        "--stem", help="Report file stem (default: the study directory's name; STEM-2... if "
        "taken).", show_default=False)] = None,
    quiet: Quiet = False,
) -> None:
    """The report of a study directory (docs/studies.md), from what it holds so far: the
    comparison table as CSV and Markdown plus the bubble-bar PNG, written beside it as
    STEM.csv, STEM.md, STEM-bubble.png (never over earlier files), and the table printed.
    Solves not finished yet are rows with status PENDING, failed ones rows with status
    ERROR and the reason in the message column."""
    if not study_dir.is_dir():
        raise fail(f"STUDY_DIR {study_dir}: not a directory (give the OUT/STEM directory "
                   "that cpsched compare wrote)")
    stem = stem if stem is not None else study_dir.resolve().name
    try:
        check_stem(stem)
    except OutputError as exc:
        raise fail(str(exc)) from None
    target = out_dir(out if out is not None else study_dir.resolve().parent)
    show_report(study_dir, target, stem, quiet)
