"""Benchmark: the relaxations after the search one after the other or side by side
(docs/modelling.md §36).

For each instance: the combinatorial bound (§4, §11, §16, §30), then
:func:`cpsched.solver.relaxation.relaxation_bound` — device 0 and the groups ``solve`` forms
(§21, §31, §35) — from it up to ``--upper`` (default: the best valid known schedule) within
``--wall`` seconds (and four deterministic units a second, as ``solve`` gives them), once in
one thread (as ``solve`` with one worker) and once with two side by side (``parallel``, as
``solve`` with more), with the bound each reaches, what each relaxation proved and the
seconds.  Wall-clock limits: the numbers vary a little from run to run.

    python benchmarks/relaxation_side_by_side.py            # the instances below, 30 s each
    python benchmarks/relaxation_side_by_side.py FILE ... --wall 15 --upper 108.58

Default instances: p4 v2 m16 F = 5 B = 10 limit 6 (``benchmarks/relaxation.py``; optimum 595),
instances 5 and 7 of ``make_scale_instances.py --random 26`` and r27-4 of ``--random 27`` with
12 microbatches (optimum 112.3).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from bench_table import print_rows
from relaxation_groups import device_label, random_cases, row_start

from cpsched import load_instance
from cpsched.instance import Instance
from cpsched.solver.relaxation import DeviceRelaxation, relaxation_bound


def _proved(inst: Instance, runs: list[DeviceRelaxation]) -> str:
    """What each relaxation proved, in the order they ended ("0+7: 111.3 solved")."""
    return "; ".join(f"{device_label(r.device)}: {inst.from_ticks(r.bound):g}"
                     f"{' solved' if r.solved else ''}" for r in runs)


def row(inst: Instance, wall: float, upper: float | None) -> dict[str, object]:
    """One table row: ``inst``'s combinatorial bound, then the relaxations in ``wall``
    seconds one after the other and side by side."""
    lb, g, ht, up, out = row_start(inst, upper)
    for label, parallel in (("one thread", False), ("side by side", True)):
        t0 = time.perf_counter()
        bound, runs = relaxation_bound(inst, g, ht, lb, up, deterministic_time=4 * wall,
                                       time_limit=wall, parallel=parallel)
        out[label] = inst.from_ticks(bound)
        out[f"{label}: proved"] = _proved(inst, runs)
        out[f"{label} s"] = round(time.perf_counter() - t0, 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--wall", type=float, default=30.0,
                    help="wall seconds for the relaxations (default 30: solve's most)")
    ap.add_argument("--upper", type=float, default=None,
                    help="upper end of the search (default: the best valid known schedule)")
    args = ap.parse_args()
    instances = ([load_instance(f) for f in args.files] if args.files else [
        Instance.from_dict({
            "name": "p4-v2-m16-F5-B10-lim6",
            "pipeline": {"devices": 4, "stages_per_device": 2, "microbatches": 16},
            "costs": {"forward": 5, "backward": 10}, "memory": {"activation": 1, "limit": 6}}),
        *random_cases("relaxation_side_by_side_", (12,))])
    print_rows(instances, lambda inst: row(inst, args.wall, args.upper))


if __name__ == "__main__":
    main()
