"""Benchmark: DualPipe fitted to a memory limit below its own peak (docs/modelling.md §62).

DualPipe (``dualpipe``) holds ``p + 1`` activations in its steady state: each overlapped
F&B pair takes its forward's activation before its backward frees one.  Under a limit of
``p`` activations it is over the limit, and where the list scheduler forms no pairs (the
bidirectional list scheduler on uniform costs) the best known schedule that fits is far
from DualPipe's makespan.  This script fits DualPipe's orders to the limit the simplest
way — on each device, in its order, a pair that would take the device over the limit runs
its backward first and then its forward, one after the other
(:func:`cpsched.schedules.transforms.pairs_within_limit`), times them with the simulator,
validates them, and runs ``solve`` twice for ``-t`` seconds: without the fitted start
(:data:`cpsched.solver.family.FITTED_SLACK` below 0: the window search starts from the warm
start, the best known schedule that fits) and by default (since session 58 the window
search starts from the fitted DualPipe when it is at most ``FITTED_SLACK`` longer).
Measured in session 58 (§62) on seed 58's r58-7 (p24 bidirectional m96, ``F = I = W = 1``,
pair 2.56, 1F1B's memory): DualPipe 273.48 over the limit, fitted 305.16; ``solve -t 60``
299 from ``list``'s 299, 291.72–292.56 from the fitted one.

    python benchmarks/dualpipe_fit.py FILE [FILE ...] -t 60
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from bench_table import load_or_exit, print_rows

from cpsched import solve, validate
from cpsched.instance import Instance
from cpsched.schedules.registry import NotApplicable, run_schedule
from cpsched.schedules.transforms import pairs_within_limit
from cpsched.solver import family


def row(inst: Instance, time_limit: float) -> dict[str, object]:
    """One instance: DualPipe, its fitted orders, the solves without and with the fitted
    start."""
    out: dict[str, object] = {"instance": inst.name, "actions": inst.n_actions}
    try:
        dualpipe = run_schedule("dualpipe", inst)
    except NotApplicable as e:
        out["dualpipe"] = f"not applicable: {e}"
        return out
    out["dualpipe"] = f"{dualpipe.makespan:g} (peak {max(dualpipe.peak_memory):g})"
    start = pairs_within_limit(dualpipe)
    if start is None or validate(start):
        out["fitted"] = "none valid"
        return out
    out["fitted"] = f"{start.makespan:g}"
    for label, slack in (("from warm start", -1.0), ("default", family.FITTED_SLACK)):
        family.FITTED_SLACK, kept = slack, family.FITTED_SLACK
        try:
            t0 = time.perf_counter()
            res = solve(inst, time_limit=time_limit, started=t0)
        finally:
            family.FITTED_SLACK = kept
        out[label] = f"{res.makespan:g} ({time.perf_counter() - t0:.0f} s)"
        out[f"{label} gap %"] = round(100 * (res.gap or 0.0), 2)
        out[f"{label}: fitted start"] = res.stats.get("dualpipe_fitted") is not None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", type=Path, nargs="+", help="instance TOML files")
    ap.add_argument("-t", "--time-limit", type=float, default=60.0,
                    help="seconds per solve (default 60)")
    args = ap.parse_args()
    instances = [load_or_exit(ap, f) for f in args.files]
    print_rows(instances, lambda inst: row(inst, args.time_limit))


if __name__ == "__main__":
    main()
