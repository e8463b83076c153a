"""Benchmark: where a far instance's gap lies — the same shape on fewer devices.

A gap at p = 16–32 is the schedule's or the bound's, and at that size nothing says which. On
fewer devices the full model often proves the optimum or gets close, so the sessions placed
each far class by hand on a small *analog* (docs/modelling.md §20–§46). This script builds
the analogs and runs them:

- the same placement, chunks per device, backward split, latency, activation rule and
  overlapped-pair cost; microbatches in proportion to the devices (``m' = m p' / p``, at
  least 2, even on bidirectional placement); every per-stage list (costs, activations, pair
  durations) resampled by position along the pipeline, so the first stage stays the first
  and the last (with the vocabulary) the last;
- the memory limit at a named level (``vmin`` ``(p' + 4) / 3``, ``vhalf`` ``(p' + 2) / 2``,
  ``1f1b`` ``p'``, ``half1f1b`` ``p' / 2`` microbatches' worth of a device's activation, as
  ``make_scale_instances.py --random`` draws them): the instance's own level when its limit
  is one of them (:func:`parent_level`; e.g. the shipped V-Half and V-Min rows), or the one
  ``--level`` names; else in proportion to the devices (``limit p' / p``, or ``--level
  proportional``).  Never below what one microbatch needs
  (:meth:`~cpsched.instance.Instance.min_memory_limit`).  Scaling a level row in proportion
  starves its analogs: V-Min's 6.67 at p = 16 gives 1.67 at p = 4 where V-Min is 2.67, and
  that analog's gap was 31.7 % against the row's 3.7 % (docs/modelling.md §51);
- then ``solve`` with its default method for ``-t`` seconds and, with ``--model``, the full
  CP-SAT model alone for as long (its bound is CP-SAT's own).

Each row: the best known schedule that fits, both results with their bounds, the best of the
bounds and the gap to it. Where an analog's best schedule meets its best bound the optimum is
known there, and the default run's gap at that size is the side that was short.

    python benchmarks/analogs.py FILE                       # p' = 4, 6, 8; 60 s each
    python benchmarks/analogs.py FILE --devices 4 8 -t 120 --model --level vmin
    python benchmarks/analogs.py FILE --write /tmp/analogs  # keep the analog files
"""

from __future__ import annotations

import argparse
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

import pandas as pd
from bench_table import load_or_exit
from make_scale_instances import LEVELS, level_limit
from scale import best_known

from cpsched import solve
from cpsched.instance import Instance, InstanceError
from cpsched.model import gap


def resample(values: list[Any], n: int) -> list[Any]:
    """``values`` (one per stage) at ``n`` stages, by position: stage ``j`` takes the value
    of stage ``round(j (len - 1) / (n - 1))``, so both ends are kept."""
    if n == 1 or len(values) == 1:
        return [values[-1]] * n
    k = len(values) - 1
    return [values[round(j * k / (n - 1))] for j in range(n)]


def parent_level(inst: Instance) -> str | None:
    """The named level (:data:`LEVELS`) ``inst``'s memory limit is at — as
    ``make_scale_instances.py`` writes it, rounded to two decimals — or None (no limit, or
    none of them)."""
    limit = inst.memory_limit
    if limit is None:
        return None
    for name in LEVELS:
        if abs(level_limit(max(inst.activation), inst.v, name, inst.p) - limit) < 1e-6:
            return name
    return None


def analog(inst: Instance, p: int, level: str | None = None) -> Instance:
    """``inst``'s shape on ``p`` devices (module docstring); ``level`` a name of
    :data:`LEVELS`, ``"proportional"``, or None for the instance's own
    (:func:`parent_level`, else proportional).

    Raises:
        cpsched.instance.InstanceError: the analog is not a valid instance (e.g. a placement
            that needs more devices).
    """
    doc = tomllib.loads(inst.to_toml())
    pipe = doc["pipeline"]
    p0, S0 = pipe["devices"], inst.num_stages
    m = max(2, round(pipe["microbatches"] * p / p0))
    if inst.placement == "bidirectional":
        m += m % 2
    pipe |= {"devices": p, "microbatches": m}
    doc["name"] = f"{inst.name}-analog-p{p}"
    doc["description"] = f"{inst.name} on {p} devices (benchmarks/analogs.py)"
    S = S0 * p // p0
    for table in ("costs", "memory"):
        for key, value in doc.get(table, {}).items():
            if isinstance(value, list) and len(value) == S0:
                doc[table][key] = resample(value, S)
    mem = doc.setdefault("memory", {})
    level = parent_level(inst) if level is None else level
    if "limit" in mem:
        if level in LEVELS:
            mem["limit"] = round(max(inst.activation) * inst.v * LEVELS[level](p), 4)
        else:
            mem["limit"] = round(mem["limit"] * p / p0, 4)
        free = dict(doc, memory={k: v for k, v in mem.items() if k != "limit"})
        need = Instance.from_dict(free).min_memory_limit()
        mem["limit"] = max(mem["limit"], need)
    return Instance.from_dict(doc)


def row(inst: Instance, time_limit: float, model: bool) -> dict[str, object]:
    """One table row: the known schedules, ``solve`` by default and (``model``) the full model
    alone, each for ``time_limit`` seconds."""
    best_name, best_known_makespan = best_known(inst)
    out: dict[str, object] = {
        "analog": inst.name, "m": inst.m, "limit": inst.memory_limit,
        "actions": inst.n_actions,
        "best known that fits": "-" if best_known_makespan is None
        else f"{best_name} {best_known_makespan:g}"}
    bounds, makespans = [], []
    for method in ("auto", "model") if model else ("auto",):
        t0 = time.perf_counter()
        res = solve(inst, time_limit=time_limit, started=t0, method=method)
        out[f"{method}"] = f"{res.makespan:g} ({time.perf_counter() - t0:.0f} s)"
        out[f"{method} bound"] = res.lower_bound
        bounds.append(res.lower_bound or 0.0)
        makespans.append(res.makespan)
    bound = max(bounds)
    out["best bound"] = bound
    out["gap to it %"] = round(100 * (gap(min(makespans), bound) or 0.0), 2)
    out["auto's gap to it %"] = round(100 * (gap(makespans[0], bound) or 0.0), 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", type=Path, help="instance TOML file")
    ap.add_argument("--devices", type=int, nargs="+", default=[4, 6, 8],
                    help="devices of the analogs (default 4 6 8)")
    ap.add_argument("-t", "--time-limit", type=float, default=60.0,
                    help="seconds per solve (default 60)")
    ap.add_argument("--model", action="store_true",
                    help="also the full CP-SAT model alone (--method model) for as long")
    ap.add_argument("--level", choices=[*sorted(LEVELS), "proportional"],
                    help="the memory limit at this level (default: the instance's own "
                         "level if its limit is one, else in proportion to p)")
    ap.add_argument("--write", type=Path, help="write the analog instances here")
    args = ap.parse_args()
    inst = load_or_exit(ap, args.file)
    out = args.write or Path(tempfile.mkdtemp(prefix="analogs_"))
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for p in args.devices:
        try:
            a = analog(inst, p, args.level)
        except InstanceError as e:  # e.g. a placement that needs more devices
            print(f"p = {p}: no analog: {e}", flush=True)
            continue
        (out / f"{a.name}.toml").write_text(a.to_toml(), encoding="utf-8")
        rows.append(row(a, args.time_limit, args.model))
        print(pd.DataFrame(rows[-1:]).to_string(index=False, header=len(rows) == 1),
              flush=True)
    print()
    if rows:
        print(pd.DataFrame(rows).to_markdown(index=False))
    print(f"\nanalog files: {out}")


if __name__ == "__main__":
    main()
