"""Benchmark: the combinatorial bound with heads and tails that follow the implied orders.

For each instance: its actions, the critical path and per-device bound (docs/modelling.md
§4; §4.3 with an overlap cost) with the plain heads and tails and with those of §30 (FIFO
and the memory precedences added), the combinatorial bound ``solve`` starts from before and
after (§4, §11, §16, §26; §4.3 and §16.1 with pairs), and the seconds the ordered heads and
tails take.  Deterministic: no CP-SAT search runs.

    python benchmarks/ordered_bounds.py                      # the shipped scale set
    python benchmarks/ordered_bounds.py --random 16 14       # and 14 random instances
    python benchmarks/ordered_bounds.py FILE ...
"""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
from make_scale_instances import benchmark_files

from cpsched import load_instance
from cpsched.graph import (
    build_task_graph,
    heads_and_tails,
    lower_bound,
    overlap_heads_tails,
    overlap_lower_bound,
)
from cpsched.solver import facade
from cpsched.solver.constraints import ordered_heads_tails
from cpsched.solver.facade import combinatorial_bound


def row(path: Path) -> dict[str, object]:
    """One table row for the instance at ``path``."""
    inst = load_instance(path)
    g = build_task_graph(inst)
    t0 = time.perf_counter()
    if inst.overlap_forward_backward is not None:
        rel, ht = overlap_heads_tails(inst, g)
        ordered = ordered_heads_tails(inst, g, rel) if inst.memory_limit is not None else ht
        seconds = time.perf_counter() - t0
        cp = [overlap_lower_bound(inst, g, relaxed=(rel, h)) for h in (ht, ordered)]
    else:
        ht = heads_and_tails(g)
        ordered = ordered_heads_tails(inst, g) if inst.memory_limit is not None else ht
        seconds = time.perf_counter() - t0
        cp = [lower_bound(inst, g, ht=h).value for h in (ht, ordered)]
    before = facade._bounds(inst, implied=False)[0]  # noqa: SLF001
    after = combinatorial_bound(inst)
    return {"instance": inst.name, "actions": inst.n_actions,
            "critical path": inst.from_ticks(cp[0]), "ordered": inst.from_ticks(cp[1]),
            "bound before": inst.from_ticks(before), "after": inst.from_ticks(after),
            "lifted": "yes" if after > before else "", "seconds": round(seconds, 2)}


def main() -> None:
    files = benchmark_files(__doc__.splitlines()[0], "cpsched-ordered-")
    rows = [row(f) for f in files]
    with pd.option_context("display.width", 200, "display.max_columns", None):
        print(pd.DataFrame(rows).to_string(index=False))


if __name__ == "__main__":
    main()
