"""Benchmark: is there a one-microbatch modulo pattern at period T? — decided with laps.

``solve``'s CP-SAT pattern model (:func:`cpsched.solver.modulo_exact.exact_pattern`,
docs/modelling.md §41) keeps every offset as ``k(a)·T + r(a)`` with ``k(a)`` anywhere up to
the horizon and the phases in one ``NoOverlap`` per device with copies; from about 100
actions it decides nothing within seconds (p = 32 V: "UNKNOWN" at 9.0, 8.0 and 7.0 after 30 s
each).  This model states the same conditions differently, and decides them there:

- offsets ``o(a)`` in ``[h(a), h(a) + W]``: ``h(a)`` the earliest offset along the
  microbatch's chain (no waits), ``W`` (``--waits``, time units) the most any action may
  start later than that.  A pattern whose total waits exceed ``W`` is not looked at, so an
  INFEASIBLE answer says "none with waits up to ``W``" — give a ``W`` the memory rules out
  anyway (device 0 holds its first stage's activation for the whole round trip, so at ``T``
  its waits are at most about ``limit·T / activation`` minus the round trip);
- dependencies as in the pattern (``o(a) >= o(b) + d(b) + lag``);
- no overlap modulo ``T`` as one *lap* integer per pair of actions of a device:
  ``k·T + d(a) <= o(b) - o(a) <= (k + 1)·T - d(b)``, ``k`` only over the laps the offset
  ranges allow (a handful), which CP-SAT propagates well;
- memory exactly as ``solve``'s pattern model (the steady state's peak,
  :func:`cpsched.solver.modulo_exact.pattern_memory`).

Each row: the period asked, CP-SAT's answer, the pattern's span and steady-state peak, and
its timed makespan at the instance's ``m`` (the simulator, validated) — to compare with the
best schedule ``solve`` finds.  A period without a pattern says nothing about schedules that
are not periodic (docs/modelling.md §12, §52).

    python benchmarks/pattern_laps.py FILE 8.0 8.4 8.8 --waits 100 -t 30
"""

from __future__ import annotations

import argparse
import time
from itertools import combinations
from pathlib import Path
from typing import Any

from bench_table import load_or_exit, print_rows
from ortools.sat.python import cp_model

from cpsched import validate
from cpsched.actions import Action
from cpsched.graph import memory_buffers
from cpsched.instance import Instance
from cpsched.rules import chain_heads_tails, dependencies, duration
from cpsched.schedules.modulo import (
    Pattern,
    min_period,
    no_fused,
    pattern_peak,
    representatives,
    time_pattern,
)
from cpsched.solver.modulo_exact import pattern_actions, pattern_memory, solved_pattern


def _laps(inst: Instance, m: cp_model.CpModel, off: dict[Action, Any],
          head: dict[Action, int], period: int, waits: int) -> bool:
    """No overlap modulo ``period`` with one lap integer per pair of a device's actions;
    False when some pair has no lap at all (then there is no pattern)."""
    by_dev: dict[int, list[Action]] = {}
    for a in off:
        if duration(inst, a) > 0:
            by_dev.setdefault(inst.device_of(a.stage, a.microbatch), []).append(a)
    for ops in by_dev.values():
        for a, b in combinations(ops, 2):
            da, db = duration(inst, a), duration(inst, b)
            lo, hi = head[b] - head[a] - waits, head[b] - head[a] + waits
            kmin, kmax = -(-(lo + db) // period) - 1, (hi - da) // period
            if kmin > kmax:
                return False
            k = m.new_int_var(kmin, kmax, "")
            m.add(off[b] - off[a] - k * period >= da)
            m.add(off[b] - off[a] - k * period <= period - db)
    return True


def lap_pattern(inst: Instance, period: int, waits: int, seconds: float, workers: int = 2
                ) -> tuple[Pattern | None, str]:
    """The shortest-span pattern at ``period`` (ticks) CP-SAT finds within ``seconds``
    with waits up to ``waits`` ticks per action (module docstring), and its status name."""
    acts = pattern_actions(inst)
    if period <= 0 or any(duration(inst, a) > period for a in acts):
        return None, "INFEASIBLE"
    heads, _ = chain_heads_tails(inst)  # the same for every microbatch and direction
    head = {a: heads[a.kind][a.stage] for a in acts}
    m = cp_model.CpModel()
    off = {a: m.new_int_var(head[a], head[a] + waits, "") for a in acts}
    for a in acts:
        for b, lag in dependencies(inst, a, no_fused):
            m.add(off[a] >= off[b] + duration(inst, b) + lag)
    if not _laps(inst, m, off, head, period, waits):
        return None, "INFEASIBLE"
    horizon = max(head.values()) + waits + 2 * period
    limit, buffers = memory_buffers(inst, representatives(inst))
    if limit is not None:  # phases only where the memory needs them: the buffers' forwards
        phase = {f: m.new_int_var(0, period - 1, "") for f, _, _ in buffers}
        for f, ph in phase.items():
            m.add(off[f] == m.new_int_var(0, horizon // period, "") * period + ph)
        pattern_memory(inst, m, off, phase, period, horizon)
    span = m.new_int_var(0, horizon + period, "")
    for a in acts:
        m.add(span >= off[a] + duration(inst, a))
    m.minimize(span)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = workers
    solver.parameters.max_time_in_seconds = seconds
    code = solver.solve(m)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, solver.status_name(code)
    return solved_pattern(inst, period, solver, off), solver.status_name(code)


def row(inst: Instance, period: float, waits: float, seconds: float) -> dict[str, object]:
    """One table row: the pattern at ``period`` (time units), timed when found."""
    t0 = time.perf_counter()
    pat, status = lap_pattern(inst, inst.ticks(period), inst.ticks(waits), seconds)
    out: dict[str, object] = {"period": period, "status": status, "span": "-",
                              "peak": "-", "timed": "-"}
    if pat is not None:
        sch = time_pattern(inst, pat)
        out.update(span=inst.from_ticks(pat.span), peak=max(pattern_peak(inst, pat)),
                   timed=sch.makespan if not validate(sch) else "invalid")
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", type=Path, help="instance TOML file")
    ap.add_argument("periods", type=float, nargs="+", help="periods to ask (time units)")
    ap.add_argument("--waits", type=float, default=100.0,
                    help="most any action may start after its earliest offset (default 100)")
    ap.add_argument("-t", "--time-limit", type=float, default=30.0,
                    help="seconds per period (default 30)")
    args = ap.parse_args()
    inst = load_or_exit(ap, args.file)
    if args.waits < 0 or args.time_limit <= 0 or min(args.periods) <= 0:
        ap.exit(2, "error: periods and --time-limit must be > 0, --waits >= 0\n")
    print(f"{inst.name}: smallest period any pattern can have "
          f"{inst.from_ticks(min_period(inst)):g}", flush=True)
    print_rows(args.periods, lambda t: row(inst, t, args.waits, args.time_limit))


if __name__ == "__main__":
    main()
