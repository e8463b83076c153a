"""Benchmark: DualPipe's shape at m = 2p — `solve`'s defaults against the model kept to
mirror-symmetric schedules with DualPipe's pairs (docs/modelling.md §40).

For each ``p``: the shipped ``p16-dualpipe-m32`` instance (F = I = W = 1, F&B pair 2.5) with
``p`` devices and ``2p`` microbatches; its combinatorial bound; DualPipe; ``solve`` with the
defaults and the time limit (``--no-solve`` leaves it out); and
:func:`cpsched.solver.prelude.family_model` (the model ``solve`` tries, hinted with
DualPipe), solved for the same time with the same workers — its schedule validated, its bound
over the family only.

    python benchmarks/dualpipe_family.py                       # p = 6, 8, 10, 12; 60 s each
    python benchmarks/dualpipe_family.py --p 16 -t 300 --no-solve
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd
from ortools.sat.python import cp_model

from cpsched import load_instance, solve, validate
from cpsched.schedules import run_schedule
from cpsched.solver.facade import combinatorial_bound
from cpsched.solver.prelude import family_model

ROW = Path(__file__).resolve().parent.parent / "instances" / "scale" / "p16-dualpipe-m32.toml"


class _Found(cp_model.CpSolverSolutionCallback):
    """When each shorter schedule was found (seconds since ``t0``)."""

    def __init__(self, t0: float) -> None:
        super().__init__()
        self.t0, self.at = t0, 0.0

    def on_solution_callback(self) -> None:
        self.at = time.perf_counter() - self.t0


def row(p: int, seconds: float, workers: int, with_solve: bool) -> dict[str, object]:
    """One table row for ``p`` devices and ``2p`` microbatches."""
    inst = load_instance(ROW, [f"pipeline.devices={p}", f"pipeline.microbatches={2 * p}"])
    dualpipe = run_schedule("dualpipe", inst)
    lb = combinatorial_bound(inst)
    out: dict[str, object] = {"p": p, "m": 2 * p, "bound": inst.from_ticks(lb),
                              "dualpipe": dualpipe.makespan}
    if with_solve:
        out["solve"] = solve(inst, time_limit=seconds, workers=workers).schedule.makespan
    t0 = time.perf_counter()
    model = family_model(inst, dualpipe, lb)  # as solve builds it (§40)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = workers
    solver.parameters.max_time_in_seconds = max(0.1, seconds - (time.perf_counter() - t0))
    found = _Found(t0)
    code = solver.solve(model.model, found)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return out | {"family": None, "found at s": None, "family bound": None}
    schedule = model.to_schedule(model.read(solver), "dualpipe-family")
    problems = validate(schedule)
    if problems:
        raise RuntimeError(f"p={p}: the family model's schedule is invalid: {problems[:3]}")
    return out | {"family": schedule.makespan, "found at s": round(found.at, 1),
                  "family bound": inst.from_ticks(int(solver.best_objective_bound))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--p", type=int, nargs="+", default=[6, 8, 10, 12],
                    help="devices (even; m = 2p)")
    ap.add_argument("-t", "--time-limit", type=float, default=60.0,
                    help="seconds for solve and for the family model, each")
    ap.add_argument("-w", "--workers", type=int, default=2, help="CP-SAT workers (default 2)")
    ap.add_argument("--no-solve", action="store_true", help="leave out solve's defaults")
    args = ap.parse_args()
    rows = [row(p, args.time_limit, args.workers, not args.no_solve) for p in args.p]
    with pd.option_context("display.width", 200, "display.max_columns", None):
        print(pd.DataFrame(rows).to_string(index=False))


if __name__ == "__main__":
    main()
