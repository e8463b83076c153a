"""Benchmark: DualPipe fitted to a memory limit below its own peak (docs/modelling.md §62).

DualPipe (``dualpipe``) holds ``p + 1`` activations in its steady state: each overlapped
F&B pair takes its forward's activation before its backward frees one.  Under a limit of
``p`` activations it is over the limit, and where the list scheduler forms no pairs (the
bidirectional list scheduler on uniform costs) the best known schedule that fits is far
from DualPipe's makespan.  This script fits DualPipe's orders to the limit the simplest
way — on each device, in its order, a pair that would take the device over the limit runs
its backward first and then its forward, one after the other — times them with the
simulator, validates them, and runs ``solve`` twice for ``-t`` seconds: with its default
warm start, and with the fitted schedule as its only candidate.  Measured in session 58
(§62) on seed 58's r58-7 (p24 bidirectional m96, ``F = I = W = 1``, pair 2.56, 1F1B's
memory): DualPipe 273.48 over the limit, fitted 305.16; ``solve -t 60`` 299 from its
default start (``list``), 291.92 from the fitted one.

    python benchmarks/dualpipe_fit.py FILE [FILE ...] -t 60
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from bench_table import load_or_exit, print_rows

from cpsched import solve, validate
from cpsched.actions import Kind, Overlap, Step, step_actions
from cpsched.engine.orders import OrderError
from cpsched.instance import Instance
from cpsched.model import Schedule
from cpsched.schedules.registry import NotApplicable, run_schedule
from cpsched.simulate import simulate
from cpsched.validate import TOLERANCE


def _taken(inst: Instance, step: Step) -> float:
    """Memory a step takes at its start (its forward's activation)."""
    return sum(inst.activation[a.stage] for a in step_actions(step) if a.kind == Kind.F)


def _given(inst: Instance, step: Step) -> float:
    """Memory a step gives back at its end (docs/spec.md §1's releases)."""
    r, out = inst.released_by_input, 0.0
    for a in step_actions(step):
        act = inst.activation[a.stage]
        out += {Kind.B: act, Kind.I: act * r, Kind.W: act * (1 - r)}.get(a.kind, 0.0)
    return out


def fitted(inst: Instance, schedule: Schedule) -> Schedule | None:
    """``schedule``'s orders with every overlapped pair that would take its device over the
    memory limit run as its backward, then its forward (a device's memory at each point is
    fixed by its own order); timed by the simulator.  None when the orders deadlock or the
    timing is not valid (a plain forward over the limit is left as it is)."""
    limit = float(inst.memory_limit or float("inf")) + TOLERANCE
    orders = []
    for row in schedule.orders():
        held, out = 0.0, []
        for step in row:
            parts = [step]
            if isinstance(step, Overlap) and held + _taken(inst, step) > limit:
                parts = [step.backward, step.forward]
            for part in parts:
                out.append(part)
                held += _taken(inst, part) - _given(inst, part)
        orders.append(out)
    try:
        timed = simulate(inst, orders, method=f"{schedule.method}-fitted")
    except OrderError:
        return None
    return None if validate(timed, inst) else timed


def row(inst: Instance, time_limit: float) -> dict[str, object]:
    """One instance: DualPipe, its fitted orders, both solves."""
    out: dict[str, object] = {"instance": inst.name, "actions": inst.n_actions}
    try:
        dualpipe = run_schedule("dualpipe", inst)
    except NotApplicable as e:
        out["dualpipe"] = f"not applicable: {e}"
        return out
    out["dualpipe"] = f"{dualpipe.makespan:g} (peak {max(dualpipe.peak_memory):g})"
    start = fitted(inst, dualpipe)
    if start is None:
        out["fitted"] = "none valid"
        return out
    out["fitted"] = f"{start.makespan:g}"
    for label, cands in (("default", None), ("from fitted", {start.method: start})):
        t0 = time.perf_counter()
        res = solve(inst, time_limit=time_limit, started=t0, candidates=cands)
        out[label] = f"{res.makespan:g} ({time.perf_counter() - t0:.0f} s)"
        out[f"{label} gap %"] = round(100 * (res.gap or 0.0), 2)
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
