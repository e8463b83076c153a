"""Benchmark: the span bound (docs/modelling.md §53) on instance files — where a device holds
the turns of only a few microbatches.

    python benchmarks/span.py FILE [FILE ...] [-t SECONDS] [--workers N]

Per file: the best known schedule that fits, the combinatorial bound (with the implied orders,
§30), the span bound from it, the marker, the proven spans ``Δ_1, Δ_2, …`` (instance units;
``*`` where CP-SAT proved it optimal), the gap of the best known schedule to each bound, and
the seconds.  Files where the bound does not apply (no memory limit, bidirectional placement,
an overlap cost, or too many turns at once for a small model) are listed as such.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench_table import gap_columns, load_or_exit, print_rows
from scale import best_fitting

from cpsched.instance import Instance
from cpsched.solver.facade import _bounds
from cpsched.solver.span_bound import applies, peak_count, span_bound


def row(name: str, inst: Instance, seconds: float, workers: int) -> dict[str, object]:
    """One table row for ``inst`` (``seconds`` for the bound, CP-SAT ``workers``)."""
    known = best_fitting(inst)
    out: dict[str, object] = {"instance": name, "turns at once": peak_count(inst)}
    if known is None or not applies(inst):
        return out | {"span bound": "does not apply" if known else "nothing fits"}
    method, sched = known
    upper = inst.ticks(sched.makespan)
    lb, g, _, _, ordered = _bounds(inst)
    r = span_bound(inst, ordered, lambda a: g.nodes[a]["duration"], lb, upper,
                   time_limit=seconds, workers=workers)
    spans = ", ".join(f"{inst.from_ticks(v):g}{'*' if ok else ''}"
                      for v, ok in zip(r.spans, r.solved, strict=True))
    known_ms = inst.from_ticks(upper)
    return out | {
        "best known that fits": f"{method} {known_ms:g}",
        "combinatorial": inst.from_ticks(lb), "span bound": inst.from_ticks(r.bound),
        "marker": f"F({r.stage})", "spans": spans,
        **gap_columns(known_ms, inst.from_ticks(lb), inst.from_ticks(r.bound)),
        "seconds": round(r.seconds, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", type=Path, help="instance TOML files")
    ap.add_argument("-t", "--time-limit", type=float, default=20.0,
                    help="seconds for the span bound per file (default 20)")
    ap.add_argument("--workers", type=int, default=8,
                    help="CP-SAT workers per small model (default 8)")
    args = ap.parse_args()
    if args.time_limit <= 0 or args.workers < 1:
        ap.exit(2, "error: --time-limit must be > 0 and --workers >= 1\n")
    insts = [(p.stem, load_or_exit(ap, p)) for p in args.files]
    print_rows(insts, lambda item: row(item[0], item[1], args.time_limit, args.workers))


if __name__ == "__main__":
    main()
