"""Benchmark: the hard cases of docs/modelling.md §20 on this machine.

Prints, per case: the best warm start, status, makespan, lower bound, gap and seconds.
Usage: python benchmarks/hard_cases.py [--time-limit 60] [--workers 8]
"""

from __future__ import annotations

import argparse
import time

import pandas as pd

from cpsched.instance import Instance
from cpsched.schedules import run_all
from cpsched.solver import solve
from cpsched.validate import validate


def case(name: str, p: int, v: int, m: int, limit: float, split: bool) -> Instance:
    costs = ({"forward": 5, "backward_input": 5, "backward_weight": 5} if split
             else {"forward": 5, "backward": 10})
    return Instance.from_dict({
        "name": name,
        "pipeline": {"devices": p, "stages_per_device": v, "microbatches": m,
                     "split_backward": split},
        "costs": costs, "memory": {"limit": limit}})


CASES = [
    case("p8-v1-m32-split-lim8", 8, 1, 32, 8, True),
    case("p8-v2-m16-lim16", 8, 2, 16, 16, False),
    case("p8-v2-m32-lim16", 8, 2, 32, 16, False),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--workers", type=int, default=8)
    args = ap.parse_args()
    rows = []
    for inst in CASES:
        t0 = time.perf_counter()
        base = run_all(inst)
        t_heur = time.perf_counter() - t0
        valid = {k: s.makespan for k, s in base.items() if not validate(s)}
        res = solve(inst, candidates=base, time_limit=args.time_limit, workers=args.workers)
        rows.append({
            "instance": inst.name,
            "best heuristic": min(valid, key=valid.get) if valid else "-",
            "heuristic makespan": min(valid.values()) if valid else None,
            "warm start": res.warm_start,
            "status": res.status,
            "makespan": res.makespan,
            "bound": res.lower_bound,
            "gap %": round(100 * (res.gap or 0.0), 2),
            "heuristics s": round(t_heur, 2),
            "total s": round(time.perf_counter() - t0, 2),
        })
        print(rows[-1], flush=True)
    print()
    print(pd.DataFrame(rows).to_markdown(index=False) if _has_tabulate()
          else pd.DataFrame(rows).to_string(index=False))


def _has_tabulate() -> bool:
    try:
        import tabulate  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    main()
