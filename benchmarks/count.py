"""Benchmark: the counting bound (docs/modelling.md §55) on instance files — one device's
relaxation as a time-indexed LP of how many actions of each type have started.

    python benchmarks/count.py FILE [FILE ...] [-t SECONDS] [--variables N] [--devices D ...]
                               [--integer]

Per file: the best known schedule that fits, the combinatorial bound (with the implied orders,
§30), the counting bound from it, the grid (instance units a slot) and slots, the LPs solved
and whether the search ended within the time, the gap of the best known schedule to each
bound, and the seconds.  ``--variables`` caps an LP's size (the grid coarsens to fit; default
:data:`cpsched.solver.count_bound.MAX_VARIABLES`); files without a memory limit or with an
overlap cost are listed as such.  ``--integer``: after the LP, the same program with integer
counts (HiGHS, §56) from the LP's bound, within what is left of the time; the LP's own bound
and the integer programs solved are then columns too.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench_table import gap_columns, load_or_exit, print_rows
from scale import best_fitting

from cpsched.instance import Instance
from cpsched.solver.count_bound import MAX_VARIABLES, applies, count_bound
from cpsched.solver.facade import _bounds
from cpsched.solver.relaxation import pressured_devices


def row(name: str, inst: Instance, seconds: float, most: int, devices: list[int] | None,
        integer: bool = False) -> dict[str, object]:
    """One table row for ``inst`` (``seconds`` for the bound, LPs of ``most`` variables, the
    ``devices`` kept one at a time, default the most pressured one; with ``integer`` the
    integer programs after the LP)."""
    known = best_fitting(inst)
    out: dict[str, object] = {"instance": name}
    if known is None or not applies(inst):
        return out | {"counting bound": "does not apply" if known else "nothing fits"}
    method, sched = known
    upper = inst.ticks(sched.makespan)
    lb, g, _, _, ordered = _bounds(inst)
    devs = devices if devices is not None else pressured_devices(inst, g, ordered, 1)
    r = count_bound(inst, g, ordered, lb, upper, devs, time_limit=seconds, most=most,
                    integer=integer)
    known_ms = inst.from_ticks(upper)
    extra = {"LP bound": inst.from_ticks(r.lp_bound), "integer programs": r.programs
             } if integer else {}
    return out | {
        "best known that fits": f"{method} {known_ms:g}",
        "combinatorial": inst.from_ticks(lb), **extra,
        "counting bound": inst.from_ticks(r.bound),
        "device": r.device, "grid": inst.from_ticks(r.grid), "slots": r.slots,
        "LPs": r.lps, "complete": r.complete,
        **gap_columns(known_ms, inst.from_ticks(lb), inst.from_ticks(r.bound)),
        "seconds": round(r.seconds, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", type=Path, help="instance TOML files")
    ap.add_argument("-t", "--time-limit", type=float, default=60.0,
                    help="seconds for the bound per file (default 60)")
    ap.add_argument("--variables", type=int, default=MAX_VARIABLES,
                    help=f"most variables of one LP (default {MAX_VARIABLES})")
    ap.add_argument("--devices", type=int, nargs="+", default=None,
                    help="devices to keep, one at a time (default: the most pressured)")
    ap.add_argument("--integer", action="store_true",
                    help="after the LP, the integer program (HiGHS) in the time left")
    args = ap.parse_args()
    if args.time_limit <= 0 or args.variables < 1:
        ap.exit(2, "error: --time-limit must be > 0 and --variables >= 1\n")
    insts = [(p.stem, load_or_exit(ap, p)) for p in args.files]
    if args.devices is not None:
        bad = [d for d in args.devices if not all(0 <= d < inst.p for _, inst in insts)]
        if bad:
            ap.exit(2, f"error: --devices {bad[0]}: not a device of every file\n")
    print_rows(insts, lambda item: row(item[0], item[1], args.time_limit, args.variables,
                                       args.devices, args.integer))


if __name__ == "__main__":
    main()
