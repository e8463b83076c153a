"""Benchmark: the one-device relaxation bound (docs/modelling.md §21) on memory-tight instances.

For each instance (F = 5, B = 10, activation 1; or split F = I = W = 5): the combinatorial
bound, then ``solve`` without the relaxation and with it, both deterministic (one CP-SAT
worker, ``--search`` deterministic units for the search, the relaxation within
``min(20, search)`` units), their status, makespan, bound and seconds.

    python benchmarks/relaxation.py                 # every case, 15 units per search
    python benchmarks/relaxation.py --search 5 --quick
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from bench_table import print_rows

import cpsched.solver.facade as facade
from cpsched import solve
from cpsched.instance import Instance

CASES = [  # (p, v, m, split, limit)
    (4, 2, 16, False, 4), (4, 2, 16, False, 6), (4, 2, 16, False, 8),
    (4, 2, 24, False, 6), (6, 2, 24, False, 6), (6, 2, 24, False, 9),
    (4, 1, 16, True, 3), (6, 1, 24, True, 4), (8, 2, 32, False, 12),
]
QUICK = CASES[:2] + CASES[4:5]


def instance(p: int, v: int, m: int, split: bool, limit: float) -> Instance:
    costs = ({"forward": 5, "backward_input": 5, "backward_weight": 5} if split
             else {"forward": 5, "backward": 10})
    return Instance.from_dict({
        "name": f"p{p}-v{v}-m{m}{'-split' if split else ''}-lim{limit:g}",
        "pipeline": {"devices": p, "stages_per_device": v, "microbatches": m,
                     "split_backward": split},
        "costs": costs, "memory": {"activation": 1, "limit": limit}})


def _solve(inst: Instance, units: float, relax: bool) -> tuple[Any, float]:
    original = facade.relaxation_bound
    if not relax:
        facade.relaxation_bound = lambda inst, g, ht, lb, up, **kw: (lb, [])  # type: ignore
    try:
        t0 = time.perf_counter()
        res = solve(inst, time_limit=None, workers=1,
                    parameters={"max_deterministic_time": units})
        return res, time.perf_counter() - t0
    finally:
        facade.relaxation_bound = original


def row(case: tuple[Any, ...], search: float) -> dict[str, Any]:
    """One table row: ``case``'s combinatorial bound, then ``solve`` without and with the
    relaxation (status, makespan / bound, seconds)."""
    inst = instance(*case)
    out: dict[str, Any] = {"instance": inst.name,
                           "combinatorial bound": facade.combinatorial_bound(inst)}
    for label, relax in (("without", False), ("with", True)):
        res, secs = _solve(inst, search, relax)
        out[f"{label}: status"] = str(res.status)
        out[f"{label}: makespan / bound"] = f"{res.makespan:g} / {res.lower_bound:g}"
        out[f"{label}: s"] = round(secs, 1)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--search", type=float, default=15.0,
                    help="CP-SAT deterministic units per search (default 15)")
    ap.add_argument("--quick", action="store_true", help="three cases only")
    args = ap.parse_args(argv)
    print_rows(QUICK if args.quick else CASES, lambda case: row(case, args.search))


if __name__ == "__main__":
    main()
