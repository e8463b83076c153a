"""Benchmark: groups of devices kept together in the relaxation (docs/modelling.md §31, §35).

For each instance: the combinatorial bound (§4, §11, §16, §30), then the relaxation of
device 0 alone and of each group ``solve`` forms (:func:`cpsched.solver.relaxation.
relaxed_groups`: under loop and V placement the turn groups 0 + last and 0 + 1 + last,
then the first devices 0-2; p-3..p-1 too under bidirectional placement), each from the
combinatorial bound up to ``--upper`` (default: the best valid known schedule), within
``--units`` CP-SAT deterministic units on one worker (reproducible), with the bound each
proves, whether it solved it, and the seconds.  Groups above ``MAX_GROUP_ACTIONS``, which
``solve`` skips, are left out (empty cells).

    python benchmarks/relaxation_groups.py              # the small cases below
    python benchmarks/relaxation_groups.py FILE ... --units 20 --upper 108.58

Default instances: three small loop shapes (F = 2, B = 3, activation 1, limit 3; the full
model proves their optima), instances 5 and 7 of ``make_scale_instances.py --random 26``
(p12 loop v1 m24 at V-Half's limit; p8 loop v2 m8 at half of 1F1B's memory) and r27-4 of
``--random 27`` (p8 loop v2, fused, profiled, V-Half's limit) with 8 and 12 microbatches.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench_table import print_rows
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


def _label(inst: Instance, group: tuple[int, ...]) -> str:
    """The column of a group: the turn pair, the turn triple (both with the last device,
    §35) or the first devices (§31)."""
    return {(0, inst.p - 1): "0+last", (0, 1, inst.p - 1): "0+1+last"}.get(group, "first")


def device_label(d: int | tuple[int, ...]) -> str:
    """A device or a group of devices as the tables print it ("0", "0+7")."""
    return "+".join(map(str, d)) if isinstance(d, tuple) else str(d)


def row_start(inst: Instance, upper: float | None,
              ) -> tuple[int, Any, Any, int, dict[str, object]]:
    """What a row of a relaxation benchmark starts from: ``inst``'s combinatorial bound
    (ticks), task graph, heads and tails, the upper end of the search (ticks: ``upper``, or
    the best valid known schedule) and the row's first cells."""
    lb, g, _, _, ht = facade._bounds(inst)  # noqa: SLF001
    up = (inst.ticks(upper) if upper is not None else
          min(inst.ticks(s.makespan) for s in run_all(inst).values() if not validate(s)))
    return lb, g, ht, up, {"instance": inst.name, "upper": inst.from_ticks(up),
                           "combinatorial": inst.from_ticks(lb)}


def row(inst: Instance, units: float, upper: float | None) -> dict[str, object]:
    """One table row: ``inst``'s combinatorial bound, device 0's relaxation and each group's
    that ``solve`` forms (:func:`relaxed_groups`)."""
    lb, g, ht, up, out = row_start(inst, upper)
    for d in [0, *relaxed_groups(inst, g)]:
        column = "device 0" if d == 0 else _label(inst, d)
        t0 = time.perf_counter()
        r = relax_device(inst, g, ht, d, lb, up, deterministic_time=units)
        name = "" if d == 0 else device_label(d) + ": "
        out[column] = f"{name}{inst.from_ticks(r.bound):g}{' solved' if r.solved else ''}"
        out[f"{column} s"] = round(time.perf_counter() - t0, 1)
    return out


def random_cases(prefix: str, microbatches: Sequence[int]) -> list[Instance]:
    """Instances 5 and 7 of ``make_scale_instances.py --random 26``, then r27-4 of
    ``--random 27`` with each of ``microbatches`` (written under a new temporary directory
    named with ``prefix``)."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    names = random_instances(26, 8, tmp)
    r27_4 = load_instance(tmp / f"{random_instances(27, 5, tmp)[4]}.toml")
    return [load_instance(tmp / f"{names[k]}.toml") for k in (5, 7)] + [
        r27_4.replace(**{"pipeline.microbatches": m, "name": f"r27-4-m{m}"})
        for m in microbatches]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--units", type=float, default=20.0,
                    help="CP-SAT deterministic units per relaxation (default 20)")
    ap.add_argument("--upper", type=float, default=None,
                    help="upper end of the search (default: the best valid known schedule)")
    args = ap.parse_args()
    instances = ([load_instance(f) for f in args.files] if args.files else
                 [small(*shape) for shape in SMALL]
                 + random_cases("relaxation_groups_", (8, 12)))
    print_rows(instances, lambda inst: row(inst, args.units, args.upper))


if __name__ == "__main__":
    main()
