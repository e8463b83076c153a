"""Probe: how short a period a periodic pattern of K microbatches can have under the limit.

Not part of ``cpsched solve``: a measuring tool for docs/modelling.md §22 (session 9); the
exact model that ``solve`` runs on small patterns is ``cpsched/solver/modulo_exact.py`` (§41). For
each instance, K and per-microbatch period ``T`` it builds one CP-SAT model of a pattern of
microbatches ``0 .. K-1`` repeated every ``P = K·T`` ticks and prints whether one exists, its
span, and the makespan of the pattern's device orders timed by the simulator for all ``m``
microbatches (valid: every row is checked by the validator).

The model (offsets ``o`` in ticks, no hint):

* ``o = k·P + r`` with ``0 <= r < P``; per device one ``NoOverlap`` over ``[r, r + d)`` and
  ``[r + P, r + P + d)`` — exactly "no two actions overlap modulo ``P``";
* the dependencies of docs/spec.md §1 with their p2p lags;
* memory by a *sufficient* test: per device ``Σ amount · n <= limit`` with an integer
  ``n >= L / P`` per buffer (``L`` from the start of ``F`` to the end of its release): the
  steady state holds ``floor`` or ``ceil(L / P)`` of each buffer, so the exact peak is at most
  that sum; INFEASIBLE therefore means "not under this test", not "no pattern at all";
* the microbatches enter stage 0 in index order within one period; minimise the span.

    python benchmarks/pattern_cpsat.py instances/scale/p16-v-m128-vmin-profiled.toml \\
        --k 1 --period 6.464 6.3

Measured in session 9 (2 workers): V-Min profiled, K = 1: 6.464 (V-Min's own period) found
and span-optimal in 4.5 s, timed 886.938; 6.3 and 6.2 infeasible under the test in 28-30 s.
p4 v1 split limit 2 m16, K = 2 at 4.7: 77.126, the proven optimum (K = 1: 79.158).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd
from ortools.sat.python import cp_model

from cpsched import load_instance, validate
from cpsched.actions import Action, Kind
from cpsched.graph import memory_buffers
from cpsched.instance import Instance
from cpsched.rules import default_kinds, dependencies, duration
from cpsched.schedules.modulo import no_fused
from cpsched.simulate import simulate


def pattern_model(inst: Instance, k: int, period: int
                  ) -> tuple[cp_model.CpModel, dict[Action, cp_model.IntVar], cp_model.IntVar]:
    """The model of the module docstring for ``k`` microbatches every ``period`` ticks
    (``P``): ``(model, offset per action of microbatches 0..k-1, span)``."""
    reps = tuple(range(k))
    acts = [Action(kind, s, i) for i in reps for kind in default_kinds(inst)
            for s in range(inst.num_stages)]
    limit, buffers = memory_buffers(inst, reps)
    horizon = 30 * period
    m = cp_model.CpModel()
    off: dict[Action, cp_model.IntVar] = {}
    per_device: dict[int, list[cp_model.IntervalVar]] = {}
    for a in acts:
        d = duration(inst, a)
        off[a] = m.new_int_var(0, horizon, "")
        r = m.new_int_var(0, period - 1, "")
        m.add(off[a] == period * m.new_int_var(0, horizon // period, "") + r)
        r2 = m.new_int_var(period, 2 * period - 1, "")  # the copy one period later
        m.add(r2 == r + period)
        per_device.setdefault(inst.device_of(a.stage, a.microbatch), []).extend(
            [m.new_fixed_size_interval_var(r, d, ""), m.new_fixed_size_interval_var(r2, d, "")])
    for intervals in per_device.values():
        m.add_no_overlap(intervals)
    for a in acts:
        for b, lag in dependencies(inst, a, no_fused):
            m.add(off[a] >= off[b] + duration(inst, b) + lag)
    span = m.new_int_var(0, horizon + period, "span")
    for a in acts:
        m.add(span >= off[a] + duration(inst, a))
    if limit is not None:
        held: dict[int, list[tuple[int, cp_model.IntVar]]] = {}
        for f, rel, amount in buffers:
            n = m.new_int_var(0, limit, "")
            m.add(n * period >= off[rel] + duration(inst, rel) - off[f])
            held.setdefault(inst.device_of(f.stage, f.microbatch), []).append((amount, n))
        for xs in held.values():
            m.add(sum(amount * n for amount, n in xs) <= limit)
    m.add(off[Action(Kind.F, 0, 0)] == 0)
    for i in reps[1:]:
        m.add(off[Action(Kind.F, 0, i)] > off[Action(Kind.F, 0, i - 1)])
        m.add(off[Action(Kind.F, 0, i)] < period)
    m.minimize(span)
    return m, off, span


def pattern_orders(inst: Instance, k: int, period: int, offsets: dict[Action, int]
                   ) -> list[list[Action]]:
    """Device orders of all ``m`` microbatches: microbatch ``k·q + j`` runs microbatch
    ``j``'s offsets plus ``q·P``; shape ``(p, actions on the device)``."""
    keyed: list[list[tuple[int, Action]]] = [[] for _ in range(inst.p)]
    for a, x in offsets.items():
        for q, mb in enumerate(range(a.microbatch, inst.m, k)):
            keyed[inst.device_of(a.stage, mb)].append((q * period + x, Action(a.kind, a.stage, mb)))
    return [[a for _, a in sorted(row)] for row in keyed]


def probe(path: Path, k: int, period: float, seconds: float, workers: int) -> dict[str, object]:
    """One table row: the pattern model of ``path`` at ``k`` microbatches and per-microbatch
    ``period`` (time units), solved within ``seconds``."""
    inst = load_instance(path)
    big_p = inst.ticks(period) * k
    t0 = time.perf_counter()
    model, off, span = pattern_model(inst, k, big_p)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = seconds
    solver.parameters.num_workers = workers
    code = solver.solve(model)
    row: dict[str, object] = {"instance": inst.name, "K": k, "T": period,
                              "status": solver.status_name(code), "span": "-", "timed": "-",
                              "valid": "-"}
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        offsets = {a: solver.value(v) for a, v in off.items()}
        sch = simulate(inst, pattern_orders(inst, k, big_p, offsets), method="pattern")
        row |= {"span": inst.from_ticks(solver.value(span)), "timed": sch.makespan,
                "valid": not validate(sch)}
    row["seconds"] = round(time.perf_counter() - t0, 1)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("instances", nargs="+", type=Path)
    ap.add_argument("--k", type=int, nargs="+", default=[1], help="microbatches per pattern")
    ap.add_argument("--period", type=float, nargs="+", required=True,
                    help="per-microbatch periods T to try (time units)")
    ap.add_argument("-t", "--time-limit", type=float, default=60.0, help="seconds per model")
    ap.add_argument("-w", "--workers", type=int, default=2)
    args = ap.parse_args()
    rows = [probe(path, k, period, args.time_limit, args.workers)
            for path in args.instances for k in args.k for period in args.period]
    print(pd.DataFrame(rows).to_markdown(index=False))


if __name__ == "__main__":
    main()
