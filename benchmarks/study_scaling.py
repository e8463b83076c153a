"""Benchmark: a comparison study of >= 100 instances on 1 and 2 local Dask workers.

Runs ``cpsched.study.compare`` on a grid (default instances/grids/scaling-grid.toml, 108
instances), each time into a fresh study directory: on a local Dask cluster of 1 worker,
of 2 workers, and with ``--in-process`` also in this process without Dask (wall times
include starting and stopping the cluster).  Every solve is deterministic (CP-SAT one
thread, ``max_deterministic_time``, no wall-clock limit), so the tables must be equal (wall
times aside); the script checks it.  It prints the wall times, the number of
solves, the speed-up of 2 workers over 1, and the load average before and after (the
machine may be shared: a speed-up below 2 on 2 cores often means other work ran).

    python benchmarks/study_scaling.py                       # the 108-instance grid
    python benchmarks/study_scaling.py --deterministic-time 0.1 --grid GRID.toml --in-process
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
GRID = ROOT / "instances" / "grids" / "scaling-grid.toml"


def run(grid: Path, det: float, jobs: int | None, dask: bool) -> tuple[pd.DataFrame, float,
                                                                        int]:
    """One study in a fresh directory: its table, wall seconds and number of solves."""
    from cpsched.study import compare, load_grid
    from cpsched.study.dask_run import dask_client

    insts = load_grid(grid)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        kw = {"time_limit": None, "workers": 1, "progress": False,
              "parameters": {"max_deterministic_time": det}, "study": Path(tmp) / "s"}
        if dask:
            with dask_client(None, jobs) as client:  # cluster start-up and shut-down count
                table = compare(insts, scheduler=client, **kw)
        else:
            table = compare(insts, jobs=1, **kw)
        wall = time.perf_counter() - t0
        solves = len(list((Path(tmp) / "s" / "results").iterdir()))
    return table, wall, solves


def main() -> None:
    """Run the three studies and print the table of wall times."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", type=Path, default=GRID)
    ap.add_argument("--deterministic-time", type=float, default=0.25,
                    help="CP-SAT max_deterministic_time per solve (default 0.25)")
    ap.add_argument("--in-process", action="store_true",
                    help="also run without Dask, in this process")
    args = ap.parse_args()
    load0 = os.getloadavg()
    rows, tables = [], []
    runs = [("Dask, 1 local worker", 1, True), ("Dask, 2 local workers", 2, True)]
    for label, jobs, dask in runs + ([("in-process (no Dask)", 1, False)]
                                     if args.in_process else []):
        table, wall, solves = run(args.grid, args.deterministic_time, jobs, dask)
        tables.append(table.drop(columns=["solve_seconds"]))
        rows.append({"run": label, "instances": table["instance"].nunique(),
                     "solves": solves, "wall_s": round(wall, 1),
                     "load_avg_1min_after": round(os.getloadavg()[0], 2)})
        print(rows[-1], flush=True)
    same = all(t.equals(tables[0]) for t in tables[1:])
    df = pd.DataFrame(rows)
    one, two = df["wall_s"].iloc[0], df["wall_s"].iloc[1]
    print(f"\ngrid {args.grid.name}, max_deterministic_time {args.deterministic_time:g} s, "
          f"{os.cpu_count()} CPUs, load average before {load0[0]:.2f} {load0[1]:.2f} "
          f"{load0[2]:.2f}")
    print(df.to_string(index=False))
    alone = (f"; vs in-process: {df['wall_s'].iloc[2] / two:.2f}x" if args.in_process
             else "")
    print(f"speed-up 2 workers vs 1: {one / two:.2f}x{alone}; tables identical: {same}")


if __name__ == "__main__":
    main()
