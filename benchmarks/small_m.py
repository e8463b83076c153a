"""Benchmark: the optimum as the microbatches grow — whose side of a small gap is short.

On an analog the full model often proves the optimum for a few microbatches but not for the
analog's own ``m`` (benchmarks/analogs.py, docs/modelling.md §46, §51, §52).  Every
microbatch is the same, so once the pipeline is in its steady state the optimum grows by the
same amount per added microbatch: this script asks the full CP-SAT model alone
(``--method model``) for ``m = step, 2·step, ...`` up to ``--up-to`` and prints, per ``m``,
the makespan, the proven bound, the status, the increment over the previous ``m`` when both
are proven optimal, and the combinatorial bound (what ``solve`` starts from).

The last line extrapolates the proven optima to the instance's own ``m`` with the last proven
increment — an *estimate*, not a bound (nothing proves the increments stay constant) — next to
the instance's combinatorial bound and its best known schedule that fits.  When the estimate
meets the best schedule ``solve`` finds at that ``m`` and stands well above the bound, the
bound is the short side; when it lies well below, the schedule is.  Read the increments,
not only the estimate: where the loss above the bound comes in steps (the limit-24 row's
p = 6 analog: 60, 60, 60, then 75 per two microbatches, docs/modelling.md §52) the last
increment over- or under-shoots.

    python benchmarks/small_m.py FILE                     # m = 2, 4, ... 8; 120 s each
    python benchmarks/small_m.py FILE --step 2 --up-to 12 -t 300
    python benchmarks/small_m.py FILE --from 10 --step 2 --up-to 16

Default ``--step``: 2 on bidirectional placement (one microbatch of each direction), else 1.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from bench_table import load_or_exit, print_rows
from scale import best_known

from cpsched import solve
from cpsched.instance import Instance, InstanceError
from cpsched.model import Status
from cpsched.solver.facade import combinatorial_bound


def with_m(inst: Instance, m: int) -> Instance:
    """``inst`` with ``m`` microbatches (name suffixed ``-m{m}``)."""
    return inst.replace(**{"pipeline.microbatches": m, "name": f"{inst.name}-m{m}"})


def row(inst: Instance, m: int, seconds: float, last: dict[str, object] | None
        ) -> dict[str, object]:
    """One table row: the full model alone on ``inst`` with ``m`` microbatches for
    ``seconds``; the increment over ``last`` (the previous row) when both are optimal."""
    small = with_m(inst, m)
    t0 = time.perf_counter()
    res = solve(small, time_limit=seconds, started=t0, method="model")
    optimal = res.status == Status.OPTIMAL
    inc: object = "-"
    if optimal and last is not None and last["status"] == "OPTIMAL":
        inc = round(float(res.makespan or 0) - float(str(last["makespan"])), 6)
    return {"m": m, "actions": small.n_actions, "makespan": res.makespan,
            "bound": res.lower_bound, "status": res.status.value,
            "increment": inc, "combinatorial": small.from_ticks(combinatorial_bound(small)),
            "seconds": round(time.perf_counter() - t0, 1)}


def extrapolate(inst: Instance, rows: list[dict[str, object]], step: int) -> str:
    """The last line: the proven optima carried to ``inst.m`` with the last increment."""
    proven = [r for r in rows if isinstance(r["increment"], float)]
    if not proven:
        return "no two proven optima in a row: nothing to extrapolate"
    r = proven[-1]
    est = float(str(r["makespan"])) + (inst.m - int(str(r["m"]))) / step * float(
        str(r["increment"]))
    name, known = best_known(inst)
    known_text = "none fits" if known is None else f"{name} {known:g}"
    return (f"m = {inst.m}: estimate {est:g} (last increment {r['increment']:g} per "
            f"{step} microbatches, not a bound); combinatorial bound "
            f"{inst.from_ticks(combinatorial_bound(inst)):g}; best known that fits "
            f"{known_text}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", type=Path, help="instance TOML file")
    ap.add_argument("--step", type=int, help="microbatches added per row (default: 2 on "
                    "bidirectional placement, else 1)")
    ap.add_argument("--from", dest="first", type=int, help="first m (default: the step)")
    ap.add_argument("--up-to", type=int, default=8, help="largest m (default 8)")
    ap.add_argument("-t", "--time-limit", type=float, default=120.0,
                    help="seconds per m (default 120)")
    args = ap.parse_args()
    inst = load_or_exit(ap, args.file)
    step = args.step if args.step is not None else (
        2 if inst.placement == "bidirectional" else 1)
    first = step if args.first is None else args.first
    if step < 1 or first < 1 or args.up_to < first:
        ap.exit(2, f"error: --step {step}, --from {first}, --up-to {args.up_to}: need "
                   "step >= 1 and 1 <= from <= up-to\n")
    if args.time_limit <= 0:
        ap.exit(2, f"error: --time-limit {args.time_limit}: must be > 0\n")
    sizes = range(first, args.up_to + 1, step)
    for m in sizes:  # every m asked is an instance (e.g. even on bidirectional placement)
        try:
            with_m(inst, m)
        except InstanceError as e:
            ap.exit(2, f"error: {args.file} with {m} microbatches: {e}\n")
    rows: list[dict[str, object]] = []

    def one(m: int) -> dict[str, object]:
        rows.append(row(inst, m, args.time_limit, rows[-1] if rows else None))
        return rows[-1]

    print_rows(sizes, one)
    print(extrapolate(inst, rows, step))


if __name__ == "__main__":
    main()
