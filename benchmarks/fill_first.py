"""Benchmark: the window search from a fuller fill of the first device (docs/modelling.md §51).

Under a memory limit the combinatorial bound of V placement counts device 0's fill as
``n`` first-stage forwards — as many as its limit holds next to one microbatch's other
stages there — before the first last-stage forward can start, and no idle after. The
known schedules and some of the window search's results on the V-Half analogs run fewer
(six of seven at p = 6, seven of nine at p = 8). This script takes the best known schedule that
fits, moves device 0's first ``n`` first-stage forwards to the front of its order, runs the
last stage's ``F``, ``R`` and ``W`` of the first ``k`` microbatches one after the other
after them (``k`` = 1..n, the shortest valid timing kept; the simulator times the orders, the
validator checks the memory), and runs ``solve`` twice for ``-t`` seconds: with its default
warm start, and with that filled schedule as its only candidate.  Measured in session 47
(§51): on V-Half's analogs at p = 4, 6, 8 and V-Min's at p = 4 no gain beyond the window
search's run-to-run spread.

    python benchmarks/fill_first.py FILE [FILE ...] -t 120 [--n N]
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from bench_table import load_or_exit, print_rows
from scale import best_fitting

from cpsched import solve, validate
from cpsched.actions import Action, Kind
from cpsched.engine.orders import OrderError
from cpsched.instance import Instance
from cpsched.model import Schedule
from cpsched.rules import default_kinds
from cpsched.simulate import simulate


def fill_count(inst: Instance) -> int:
    """Most first-stage forwards device 0's limit holds next to one microbatch's other
    stages on device 0 (``m`` without a limit)."""
    if inst.memory_limit is None:
        return inst.m
    others = sum(inst.activation[s] for s in inst.stages_of(0) if s != 0)
    return max(1, min(inst.m, math.floor((inst.memory_limit - others) / inst.activation[0]
                                         + 1e-9)))


def filled(inst: Instance, schedule: Schedule, n: int, k: int) -> Schedule | None:
    """``schedule``'s device orders with device 0 starting with ``F(0)`` of microbatches
    ``0..n-1``, then the last stage of device 0 (``F``, the backward, ``W``) of microbatches
    ``0..k-1`` in turn, then the rest in the old order; timed by the simulator.  None when
    the orders deadlock or the timing is not valid (the memory limit)."""
    orders = schedule.orders()
    last = max(inst.stages_of(0))
    head = [Action(Kind.F, 0, j) for j in range(n)] + [
        Action(kind, last, j) for j in range(k) for kind in default_kinds(inst)]
    front = set(head)
    orders[0] = head + [a for a in orders[0] if a not in front]
    try:
        timed = simulate(inst, orders, method=f"filled-{n}-{k}")
    except OrderError:
        return None
    return None if validate(timed, inst) else timed


def row(inst: Instance, time_limit: float, n: int | None) -> dict[str, object]:
    """One instance: the best known schedule, the best filled one, both solves."""
    out: dict[str, object] = {"instance": inst.name, "actions": inst.n_actions}
    found = best_fitting(inst)
    if found is None:
        out["best known"] = "none fits"
        return out
    name, best = found
    n = fill_count(inst) if n is None else n
    tries = [s for k in range(1, n + 1) if (s := filled(inst, best, n, k)) is not None]
    out |= {"best known": f"{name} {best.makespan:g}", "n": n}
    if not tries:
        out["filled"] = "none valid"
        return out
    start = min(tries, key=lambda s: s.makespan)
    out["filled"] = f"{start.method} {start.makespan:g}"
    for label, cands in (("default", None), ("from filled", {start.method: start})):
        t0 = time.perf_counter()
        res = solve(inst, time_limit=time_limit, started=t0, candidates=cands)
        out[label] = f"{res.makespan:g} ({time.perf_counter() - t0:.0f} s)"
        out[f"{label} gap %"] = round(100 * (res.gap or 0.0), 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", type=Path, nargs="+", help="instance TOML files")
    ap.add_argument("-t", "--time-limit", type=float, default=120.0,
                    help="seconds per solve (default 120)")
    ap.add_argument("--n", type=int, help="first-stage forwards to front (default: as many "
                                          "as device 0's limit holds)")
    args = ap.parse_args()
    instances = [load_or_exit(ap, f) for f in args.files]
    print_rows(instances, lambda inst: row(inst, args.time_limit, args.n))


if __name__ == "__main__":
    main()
