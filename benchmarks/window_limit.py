"""Benchmark: the window search's CP-SAT limit per sweep window and its presolve
(docs/modelling.md §17, §34, §44).

Solves each instance with ``solve(time_limit=T)`` (``auto``, the default workers) once per
limit in ``--limits`` (deterministic units per window; the wall limit per window scales with
it, as :data:`cpsched.solver.lns.WINDOW_SECONDS` is to
:data:`cpsched.solver.lns.WINDOW_DETERMINISTIC_TIME`: three seconds a unit), ``--runs``
times each with seeds 0, 1, ..., and prints per instance and limit the makespans, the
bound, and the window search's windows and shorter schedules.  Wall-clock limits: a run's
makespan varies by 0.5-1 % from run to run (docs/modelling.md §34), so compare several runs
or rows.  With ``--workers 1`` two benchmarks can share a 2-core machine, but one worker
per window does not predict two (§34: shorter windows won on one worker, not on two).
``--presolve off on`` runs each limit with CP-SAT's presolve off and on in the windows without
pairs (:data:`cpsched.solver.lns.WINDOW_PRESOLVE`; default: as it is, off since §44), and
``--pair-presolve off on`` the same in the windows with pairs
(:data:`cpsched.solver.lns.WINDOW_PRESOLVE_PAIRS`; default: as it is, on).

    python benchmarks/window_limit.py                          # shipped rows, 1.0 and 0.5
    python benchmarks/window_limit.py -t 60 --limits 1 0.5 0.25 --runs 2 FILE ...
    python benchmarks/window_limit.py FILE ... -t 60 --limits 1 --presolve off on
    python benchmarks/window_limit.py FILE ... -t 60 --limits 1 --pair-presolve off on
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

import cpsched.solver.lns as lns
from cpsched import load_instance, solve

ROOT = Path(__file__).resolve().parent.parent
#: shipped scale rows that end FEASIBLE at -t 120 and have no overlap cost
ROWS = ["p16-loop-v4-m128-profiled", "p32-v-m128-vhalf-profiled", "p16-loop-v2-m64-lim24",
        "p16-v-m128-vmin-profiled"]


def run(path: Path, limit: float, seconds: float, seed: int, workers: int | None,
        presolve: bool = lns.WINDOW_PRESOLVE,
        pair_presolve: bool = lns.WINDOW_PRESOLVE_PAIRS) -> dict[str, object]:
    """One solve of ``path`` with ``limit`` units per sweep window and ``presolve`` in the
    windows without pairs (``pair_presolve`` in those with pairs): a table row."""
    saved = (lns.WINDOW_DETERMINISTIC_TIME, lns.WINDOW_SECONDS, lns.WINDOW_PRESOLVE,
             lns.WINDOW_PRESOLVE_PAIRS)
    lns.WINDOW_DETERMINISTIC_TIME, lns.WINDOW_SECONDS = limit, saved[1] / saved[0] * limit
    lns.WINDOW_PRESOLVE, lns.WINDOW_PRESOLVE_PAIRS = presolve, pair_presolve
    try:
        inst = load_instance(path)
        res = solve(inst, time_limit=seconds, seed=seed, workers=workers)
    finally:
        (lns.WINDOW_DETERMINISTIC_TIME, lns.WINDOW_SECONDS, lns.WINDOW_PRESOLVE,
         lns.WINDOW_PRESOLVE_PAIRS) = saved
    ws = res.stats.get("window_search") or {}
    return {"instance": inst.name, "actions": inst.n_actions, "limit": limit,
            "presolve": "on" if presolve else "off",
            "pair presolve": "on" if pair_presolve else "off", "seed": seed,
            "makespan": res.makespan, "bound": res.lower_bound, "status": str(res.status),
            "windows": ws.get("windows"), "shorter": ws.get("improvements")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("-t", "--time-limit", type=float, default=120.0)
    ap.add_argument("--limits", type=float, nargs="+", default=[1.0, 0.5])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--presolve", nargs="+", choices=["on", "off"],
                    default=["on" if lns.WINDOW_PRESOLVE else "off"])
    ap.add_argument("--pair-presolve", nargs="+", choices=["on", "off"],
                    default=["on" if lns.WINDOW_PRESOLVE_PAIRS else "off"])
    args = ap.parse_args()
    files = args.files or [ROOT / "instances" / "scale" / f"{n}.toml" for n in ROWS]
    rows = []
    for path in files:
        for limit in args.limits:
            for presolve in args.presolve:
                for pairs in args.pair_presolve:
                    for seed in range(args.runs):
                        rows.append(run(path, limit, args.time_limit, seed, args.workers,
                                        presolve == "on", pairs == "on"))
                        print(rows[-1], flush=True)
    df = pd.DataFrame(rows)
    table = df.groupby(["instance", "limit", "presolve", "pair presolve"], sort=False).agg(
        makespans=("makespan", lambda s: " ".join(f"{x:g}" for x in s)),
        mean=("makespan", "mean"), bound=("bound", "max"), windows=("windows", "mean"),
        shorter=("shorter", "mean"))
    print(table.round(3).reset_index().to_markdown(index=False))


if __name__ == "__main__":
    main()
