"""Benchmark: DualPipe's shape at m = 2p — `solve`'s defaults against the model kept to
mirror-symmetric schedules with DualPipe's pairs (docs/modelling.md §40).

For each ``p``: the shipped ``p16-dualpipe-m32`` instance (F = I = W = 1, F&B pair 2.5) with
``p`` devices and ``2p`` microbatches; its combinatorial bound; DualPipe; ``solve`` with the
defaults and the time limit (``--no-solve`` leaves it out); and
:func:`cpsched.solver.family.family_model` (the model ``solve`` tries, hinted with
DualPipe), solved for the same time with the same workers — its schedule validated, its bound
over the family only; and the same with the family's tight middle (``tight``,
:func:`cpsched.solver.mirror.add_tight_middle`, docs/modelling.md §47).  ``--instance`` takes
another shape (with per-stage costs only at its own ``p``: write analogs with
``benchmarks/analogs.py --write``); ``--target`` asks for a makespan at most that.

    python benchmarks/dualpipe_family.py                       # p = 6, 8, 10, 12; 60 s each
    python benchmarks/dualpipe_family.py --p 16 -t 300 --no-solve
    python benchmarks/dualpipe_family.py --p 16 -t 900 --no-solve --no-family --target 95.5 \
        --write DIR                                            # the row's 95.5 (§47)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd
from ortools.sat.python import cp_model

from cpsched import load_instance, solve, validate
from cpsched.instance import Instance, InstanceError
from cpsched.model import Schedule
from cpsched.outputs import OutputError, output_dir, write_file
from cpsched.schedules import run_schedule
from cpsched.solver.facade import combinatorial_bound
from cpsched.solver.family import family_model
from cpsched.solver.mirror import tight_middle_applies

ROW = Path(__file__).resolve().parent.parent / "instances" / "scale" / "p16-dualpipe-m32.toml"


class _Found(cp_model.CpSolverSolutionCallback):
    """When each shorter schedule was found (seconds since ``t0``)."""

    def __init__(self, t0: float) -> None:
        super().__init__()
        self.t0, self.at = t0, 0.0

    def on_solution_callback(self) -> None:
        self.at = time.perf_counter() - self.t0


def row(inst: Instance, seconds: float, workers: int, with_solve: bool,
        target: float | None = None, write: Path | None = None,
        family: bool = True) -> dict[str, object]:
    """One table row for ``inst`` (``target``: the family models' makespan at most that;
    ``write``: a directory for the tight model's schedule, ``tight-pP.json``; ``family``:
    also the whole family)."""
    dualpipe = run_schedule("dualpipe", inst)
    lb = combinatorial_bound(inst)
    out: dict[str, object] = {"p": inst.p, "m": inst.m, "bound": inst.from_ticks(lb),
                              "dualpipe": dualpipe.makespan}
    if with_solve:
        out["solve"] = solve(inst, time_limit=seconds, workers=workers).schedule.makespan
    if family:
        out |= _family(inst, dualpipe, lb, seconds, workers, False, "family", target)[0]
    if tight_middle_applies(inst):
        columns, schedule = _family(inst, dualpipe, lb, seconds, workers, True, "tight", target)
        out |= columns
        if write is not None and schedule is not None:
            write_file(write / f"tight-p{inst.p}.json", schedule.to_json, option="--write")
    return out


def _family(inst: Instance, dualpipe: Schedule, lb: int, seconds: float, workers: int,
            tight: bool, name: str, target: float | None,
            ) -> tuple[dict[str, object], Schedule | None]:
    """The family model (``tight``: with its tight middle; ``target``: makespan at most
    that) hinted with DualPipe, solved for ``seconds``: its makespan, when found and its own
    bound, as columns named ``name``; and the schedule (None if none was found)."""
    t0 = time.perf_counter()
    model = family_model(inst, dualpipe, lb, tight)  # as solve builds it (§40, §47)
    if target is not None:
        model.model.add(model.makespan <= inst.ticks(target))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = workers
    solver.parameters.max_time_in_seconds = max(0.1, seconds - (time.perf_counter() - t0))
    found = _Found(t0)
    code = solver.solve(model.model, found)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return {name: None, f"{name} at s": None, f"{name} bound": None}, None
    schedule = model.to_schedule(model.read(solver), f"dualpipe-{name}")
    problems = validate(schedule)
    if problems:
        raise RuntimeError(f"p={inst.p}: the {name} model's schedule is invalid: {problems[:3]}")
    return {name: schedule.makespan, f"{name} at s": round(found.at, 1),
            f"{name} bound": inst.from_ticks(int(solver.best_objective_bound))}, schedule


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--p", type=int, nargs="+", default=[6, 8, 10, 12],
                    help="devices (even; m = 2p)")
    ap.add_argument("-t", "--time-limit", type=float, default=60.0,
                    help="seconds for solve and for the family model, each")
    ap.add_argument("-w", "--workers", type=int, default=2, help="CP-SAT workers (default 2)")
    ap.add_argument("--no-solve", action="store_true", help="leave out solve's defaults")
    ap.add_argument("--instance", type=Path, default=ROW,
                    help="the shape (default the shipped p16-dualpipe-m32 row), with --p's "
                         "devices and 2p microbatches")
    ap.add_argument("--target", type=float, default=None,
                    help="the family models' makespan at most this (a feasibility question)")
    ap.add_argument("--write", type=Path, default=None,
                    help="write each tight schedule found as DIR/tight-pP.json")
    ap.add_argument("--no-family", action="store_true",
                    help="leave out the whole family (the tight middle only)")
    args = ap.parse_args()
    try:
        insts = [load_instance(args.instance, [f"pipeline.devices={p}",
                                               f"pipeline.microbatches={2 * p}"])
                 for p in args.p]
        if args.write is not None:
            output_dir(args.write, "--write")
            for inst in insts:
                if (args.write / f"tight-p{inst.p}.json").exists():
                    raise OutputError(f"--write {args.write}: tight-p{inst.p}.json exists")
    except (OSError, InstanceError, OutputError) as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    rows = [row(inst, args.time_limit, args.workers, not args.no_solve, args.target, args.write,
                not args.no_family) for inst in insts]
    with pd.option_context("display.width", 200, "display.max_columns", None):
        print(pd.DataFrame(rows).to_string(index=False))


if __name__ == "__main__":
    main()
