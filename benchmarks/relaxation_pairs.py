"""Benchmark: the one-device relaxation with overlapped pairs (docs/modelling.md §29).

For each instance: the pair window bound (§28), then the relaxation of device 0 and
``p - 1`` (bidirectional) or device 0, each from that bound up to ``--upper`` (the best valid
known schedule), within ``--units`` CP-SAT deterministic units on one worker
(reproducible), with the bound each proves, whether it solved it, and the seconds.  Devices
above ``MAX_PAIR_ACTIONS`` actions, which ``solve`` skips, are relaxed here too.

    python benchmarks/relaxation_pairs.py                    # ten small random instances
    python benchmarks/relaxation_pairs.py FILE ... --units 5

Default instances: :func:`make_scale_instances.small_pair_instances` with seed 1 (ten
bidirectional p 4–6 instances; ``b1-0`` is ``tests/data/b1-0-bidirectional-pairs.toml``).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pandas as pd
from make_scale_instances import small_pair_instances

import cpsched.solver.facade as facade
from cpsched import load_instance, validate
from cpsched.pair_window_bound import pair_window_bound
from cpsched.schedules import run_all
from cpsched.solver.relaxation import relax_device


def row(path: Path, units: float) -> dict[str, object]:
    """One table row: ``path``'s bounds and each first-stage device's relaxation."""
    inst = load_instance(path)
    lb, g, _, relaxed, _ = facade._bounds(inst)  # noqa: SLF001
    upper = min(inst.ticks(s.makespan) for s in run_all(inst).values() if not validate(s))
    pw = pair_window_bound(inst, g, lower=lb, upper=upper, relaxed=relaxed)
    out: dict[str, object] = {"instance": inst.name, "known": inst.from_ticks(upper),
                              "§28": inst.from_ticks(pw)}
    devices = [0, inst.p - 1] if inst.placement == "bidirectional" else [0]
    t0 = time.perf_counter()
    best = pw
    for d, column in zip(devices, ("device 0", "device p-1"), strict=False):
        r = relax_device(inst, g, relaxed[1], d, pw, upper, deterministic_time=units)
        out[column] = f"{inst.from_ticks(r.bound):g}{' solved' if r.solved else ''}"
        best = max(best, r.bound)
    out |= {"§29": inst.from_ticks(best), "seconds": round(time.perf_counter() - t0, 1)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--units", type=float, default=2.0,
                    help="CP-SAT deterministic units per device (default 2)")
    args = ap.parse_args()
    files = list(args.files)
    if not files:
        tmp = Path(tempfile.mkdtemp(prefix="relaxation_pairs_"))
        small_pair_instances(1, 10, tmp)
        files = sorted(tmp.glob("*.toml"))
    rows = [row(f, args.units) for f in files]
    with pd.option_context("display.width", 200, "display.max_columns", None):
        print(pd.DataFrame(rows).to_string(index=False))


if __name__ == "__main__":
    main()
