"""Benchmark: the list scheduler against its latency-free orders timed with the latency
(``list-retimed``, docs/modelling.md §27), as warm starts.

Prints, per instance with a p2p latency: both makespans, the change, whether both are valid,
and the seconds each took (no time limit).  With no files: the shipped scale set
(``instances/scale``); ``--random SEED N`` adds N random instances of
``benchmarks/make_scale_instances.py --random`` (written to a temporary directory).

Usage: python benchmarks/list_retimed.py [FILE ...] [--random SEED N]
"""

from __future__ import annotations

import sys
import time

import pandas as pd
from make_scale_instances import benchmark_files

from cpsched import load_instance, validate
from cpsched.instance import Instance
from cpsched.schedules import run_schedule


def _timed(name: str, inst: Instance) -> tuple[float, bool, float]:
    t0 = time.perf_counter()
    s = run_schedule(name, inst)
    return s.makespan, not validate(s), time.perf_counter() - t0


def main() -> None:
    files = benchmark_files(__doc__.splitlines()[0], "cpsched-retimed-")
    rows = []
    for f in files:
        inst = load_instance(f)
        if inst.p2p_latency == 0:
            continue
        a, a_ok, a_s = _timed("list", inst)
        b, b_ok, b_s = _timed("list-retimed", inst)
        rows.append({"instance": inst.name, "latency": inst.p2p_latency, "list": a,
                     "list-retimed": b, "change %": round(100 * (b - a) / a, 1),
                     "valid": a_ok and b_ok, "list s": round(a_s, 1),
                     "retimed s": round(b_s, 1)})
        print(rows[-1], flush=True, file=sys.stderr)
    df = pd.DataFrame(rows)
    print(df.to_markdown(index=False))
    if rows:
        shorter = int((df["change %"] < 0).sum())
        longer = int((df["change %"] > 0).sum())
        print(f"\n{len(rows)} instances: list-retimed shorter on {shorter}, longer on {longer}")


if __name__ == "__main__":
    main()
