"""Benchmark: production-size instances (instances/scale/) with default settings.

For each instance: the best known schedule that fits the memory limit (every known schedule,
without a time limit, computed after the timed call), what ``cpsched solve`` returns with its
default method choice, the certified lower bound, the gap, the wall time of the whole call
(the known schedules as ``solve`` computes them — expensive searches stop after a third of
the time limit — then bounds, window search, model, search and the relaxation bound), the
warm start, what the window search made of it (docs/modelling.md §17), and the peak resident
memory (each instance runs in a fresh interpreter; the search's child process included). A
result longer than the best known schedule that fits is flagged in the status column ("WORSE
than known") and the sweep goes on. Then the simulator against the visualizer's execution
model (benchmarks/simulator.py).

    python benchmarks/scale.py                    # 120 s per instance, every instance
    python benchmarks/scale.py -t 30 p16-v-m64-vhalf
    python benchmarks/scale.py --dir /tmp/unseen   # any directory of instance files
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:
    from cpsched.instance import Instance
    from cpsched.model import Schedule

ROOT = Path(__file__).resolve().parents[1]
SCALE = ROOT / "instances" / "scale"


def best_fitting(inst: Instance) -> tuple[str, Schedule] | None:
    """The shortest known schedule that fits ``inst``'s memory limit, computed without a
    deadline: ``(name, schedule)``, or None when none fits."""
    from cpsched import run_all, validate

    fitting = {n: s for n, s in run_all(inst).items() if not validate(s, inst)}
    if not fitting:
        return None
    name = min(fitting, key=lambda n: fitting[n].makespan)
    return name, fitting[name]


def best_known(inst: Instance) -> tuple[str, float | None]:
    """:func:`best_fitting`'s ``(name, makespan)``, or ``("-", None)`` when none fits."""
    found = best_fitting(inst)
    return ("-", None) if found is None else (found[0], found[1].makespan)


def run(path: Path, time_limit: float, workers: int | None) -> dict[str, object]:
    """Solve one instance with defaults, as ``cpsched solve`` does; one table row.

    ``solve`` computes its own known schedules within the timed call, as for the command
    (expensive searches stop after a third of the time limit).  The column "best known that
    fits" is then taken from every known schedule computed without a deadline, after the
    timed call (before it, it would eat into ``solve``'s third)."""
    from cpsched import load_instance, solve, validate

    inst = load_instance(path)
    t0 = time.perf_counter()
    res = solve(inst, time_limit=time_limit, workers=workers, started=t0)
    wall = time.perf_counter() - t0
    peak = max(resource.getrusage(who).ru_maxrss
               for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)) / 1024
    assert res.schedule is not None and validate(res.schedule) == []
    best_name, best = best_known(inst)
    worse = best is not None and res.makespan > best + 1e-9
    ws = res.stats.get("window_search")
    window = "-" if ws is None else (
        f"{ws['from']:g} -> {ws['makespan']:g} "
        f"({ws['windows']} windows, {ws['seconds']:g} s)")
    return {
        "instance": inst.name, "actions": inst.n_actions,
        "best known that fits": f"{best_name} {best:g}" if best is not None else "-",
        "cpsched": res.makespan, "bound": res.lower_bound,
        "gap %": round(100 * (res.gap or 0.0), 2),
        "status": f"{res.status} WORSE than known" if worse else str(res.status),
        "warm start": res.warm_start, "window search": window,
        "seconds": round(wall, 1), "peak MiB": round(peak),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="instance names (default: all in --dir)")
    ap.add_argument("-t", "--time-limit", type=float, default=120.0)
    ap.add_argument("-w", "--workers", type=int, default=None,
                    help="CP-SAT workers (default: cpsched's own choice by size)")
    ap.add_argument("--no-simulator", action="store_true", help="skip the simulator table")
    ap.add_argument("--dir", type=Path, default=SCALE,
                    help="directory of instance files (default: instances/scale)")
    args = ap.parse_args()
    paths = sorted(args.dir.glob("*.toml"))
    if args.names:
        paths = [p for p in paths if p.stem in args.names]
    rows = []
    # each instance in a fresh interpreter: its own peak memory (the search child included)
    ctx = multiprocessing.get_context("spawn")
    for p in paths:
        with ProcessPoolExecutor(1, mp_context=ctx) as pool:
            rows.append(pool.submit(run, p, args.time_limit, args.workers).result())
        print(pd.DataFrame(rows[-1:]).to_string(index=False, header=len(rows) == 1),
              flush=True)
    print()
    print(pd.DataFrame(rows).to_markdown(index=False))
    if not args.no_simulator:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        import simulator  # benchmarks/simulator.py

        simulator.main([])


if __name__ == "__main__":
    main()
