"""Benchmark: the pair window bound (docs/modelling.md §28) against the relaxed pair bound
(§4.3) and the pair fill/drain bound (§16.1), on instances with overlapped F&B pairs.

Prints, per instance with an overlap cost: the three bounds (time units), the gain of §28
over the larger of the other two, and the seconds §28 took (no time limit, no upper end:
the bisection runs up to the sum of all durations).  With no files: the shipped scale set
(``instances/scale``); ``--random SEED N`` adds N random instances of
``benchmarks/make_scale_instances.py --random`` (written to a temporary directory; about a
quarter of them have pairs).

Usage: python benchmarks/pair_window_bound.py [FILE ...] [--random SEED N]
"""

from __future__ import annotations

import sys
import time

import pandas as pd
from make_scale_instances import benchmark_files

from cpsched import load_instance
from cpsched.bounds import pair_fill_drain_bound
from cpsched.graph import overlap_heads_tails, overlap_lower_bound, task_graph
from cpsched.pair_window_bound import pair_window_bound


def main() -> None:
    files = benchmark_files(__doc__.splitlines()[0], "cpsched-pairs-")
    rows = []
    for f in files:
        inst = load_instance(f)
        if inst.overlap_forward_backward is None:
            continue
        g = task_graph(inst)
        relaxed = overlap_heads_tails(inst, g)
        relaxed_bound = overlap_lower_bound(inst, g, relaxed=relaxed)
        fill_drain = pair_fill_drain_bound(inst, g, relaxed=relaxed)
        t0 = time.perf_counter()
        windows = pair_window_bound(inst, g, relaxed=relaxed)
        seconds = time.perf_counter() - t0
        before = max(relaxed_bound, fill_drain)
        rows.append({"instance": inst.name, "actions": inst.n_actions,
                     "limit": inst.memory_limit, "§4.3": inst.from_ticks(relaxed_bound),
                     "§16.1": inst.from_ticks(fill_drain), "§28": inst.from_ticks(windows),
                     "gain": inst.from_ticks(max(0, windows - before)),
                     "seconds": round(seconds, 2)})
        print(rows[-1], flush=True, file=sys.stderr)
    df = pd.DataFrame(rows)
    print(df.to_string(index=False) if len(df) else "no instance with an overlap cost")


if __name__ == "__main__":
    main()
