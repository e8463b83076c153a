"""Benchmark: groups of devices kept together in the relaxation (docs/modelling.md §31).

For each instance: the combinatorial bound (§4, §11, §16, §30), then the relaxation of
device 0 alone and of each group ``solve`` forms (:func:`cpsched.solver.relaxation.
relaxed_groups`; devices 0-2, and p-3..p-1 under bidirectional placement), each from the
combinatorial bound up to ``--upper`` (default: the best valid known schedule), within
``--units`` CP-SAT deterministic units on one worker (reproducible), with the bound each
proves, whether it solved it, and the seconds.  Groups above ``MAX_GROUP_ACTIONS``, which
``solve`` skips, are left out ("-").

    python benchmarks/relaxation_groups.py              # the small cases below
    python benchmarks/relaxation_groups.py FILE ... --units 20 --upper 108.58

Default instances: three small loop shapes (F = 2, B = 3, activation 1, limit 3; the full
model proves their optima) and instances 5 and 7 of ``make_scale_instances.py --random 26``
(p12 loop v1 m24 at V-Half's limit; p8 loop v2 m8 at half of 1F1B's memory).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pandas as pd
from make_scale_instances import random_instances

import cpsched.solver.facade as facade
from cpsched import load_instance, validate
from cpsched.instance import Instance
from cpsched.schedules import run_all
from cpsched.solver.relaxation import relax_device, relaxed_groups

SMALL = [(4, 2, 8), (4, 2, 6), (3, 2, 6)]  # (p, v, m): optima 192, 148, 109


def small(p: int, v: int, m: int) -> Instance:
    """A small memory-capped loop instance: F = 2, B = 3, activation 1, limit 3."""
    return Instance.from_dict({
        "name": f"p{p}-v{v}-m{m}-F2-B3-lim3",
        "pipeline": {"devices": p, "stages_per_device": v, "microbatches": m},
        "costs": {"forward": 2, "backward": 3}, "memory": {"activation": 1, "limit": 3}})


def row(inst: Instance, units: float, upper: float | None) -> dict[str, object]:
    """One table row: ``inst``'s combinatorial bound, device 0's relaxation and its
    groups'."""
    lb, g, _, _, ht = facade._bounds(inst)  # noqa: SLF001
    up = (inst.ticks(upper) if upper is not None else
          min(inst.ticks(s.makespan) for s in run_all(inst).values() if not validate(s)))
    out: dict[str, object] = {"instance": inst.name, "upper": inst.from_ticks(up),
                              "combinatorial": inst.from_ticks(lb)}
    groups = relaxed_groups(inst, g)
    for d, column in [(0, "device 0"), *((grp, "group") for grp in groups[:1])]:
        t0 = time.perf_counter()
        r = relax_device(inst, g, ht, d, lb, up, deterministic_time=units)
        out[column] = f"{inst.from_ticks(r.bound):g}{' solved' if r.solved else ''}"
        out[f"{column} s"] = round(time.perf_counter() - t0, 1)
    out["devices"] = "+".join(map(str, groups[0])) if groups else "-"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--units", type=float, default=20.0,
                    help="CP-SAT deterministic units per relaxation (default 20)")
    ap.add_argument("--upper", type=float, default=None,
                    help="upper end of the search (default: the best valid known schedule)")
    args = ap.parse_args()
    if args.files:
        instances = [load_instance(f) for f in args.files]
    else:
        tmp = Path(tempfile.mkdtemp(prefix="relaxation_groups_"))
        names = random_instances(26, 8, tmp)
        instances = [small(*shape) for shape in SMALL] + [
            load_instance(tmp / f"{names[k]}.toml") for k in (5, 7)]
    rows = []
    for inst in instances:
        rows.append(row(inst, args.units, args.upper))
        print(pd.DataFrame(rows[-1:]).to_markdown(index=False), flush=True)
    print()
    print(pd.DataFrame(rows).to_markdown(index=False))


if __name__ == "__main__":
    main()
