"""Benchmark: the full model alone against the window search first, on memory-capped
instances of 500-1499 actions (docs/modelling.md §32).

Draws random instances with ``make_scale_instances.random_instances`` (8 per seed, seeds
from ``--seed`` on) and keeps those with a memory limit, no overlap cost and 500-1499
actions (``--actions``), until ``--count`` are found (or takes the given files).  Each is
solved twice with ``solve(time_limit=T)``: ``method="model"`` (what ``auto`` ran below 1500
actions before session 27) and ``method="auto"`` (since then, from 500 actions: the window
search with half of the time, then the full model).  Prints makespan, bound and status of
both, how much shorter ``auto`` is, and the seconds.  Wall-clock limits: a run's values vary
by about 1 %.

With ``--share S`` the first run is ``auto`` with the window search given the share ``S`` of
the time (the full model then searching on from its schedule) on every memory-capped model
without an overlap cost below the ``--actions`` upper end, instead of ``method="model"``
(docs/modelling.md §54: 0.5 below 2500 actions, longer on five of eight instances of
1500-2499 actions).

    python benchmarks/capped_midsize.py                      # seeds 100.., 10 instances, -t 60
    python benchmarks/capped_midsize.py -t 120 --count 4
    python benchmarks/capped_midsize.py --actions 250 500     # below the threshold
    python benchmarks/capped_midsize.py FILE ...
    python benchmarks/capped_midsize.py --actions 1500 2500 --seed 300 --count 8 --share 0.5
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench_table import print_rows
from make_scale_instances import random_instances

from cpsched import load_instance, solve
from cpsched.instance import Instance
from cpsched.solver import facade, prelude


def capped_midsize(first_seed: int, count: int, out: Path,
                   actions: tuple[int, int] = (500, 1500)) -> list[Instance]:
    """``count`` random instances with a memory limit, no overlap cost and ``lo <= actions
    < hi`` (``actions = (lo, hi)``), drawn from seed ``first_seed`` on (at most 200 seeds)."""
    found: list[Instance] = []
    for seed in range(first_seed, first_seed + 200):
        folder = out / str(seed)
        for name in random_instances(seed, 8, folder):
            inst = load_instance(folder / f"{name}.toml")
            if (inst.memory_limit is not None and inst.overlap_forward_backward is None
                    and actions[0] <= inst.n_actions < actions[1]):
                found.append(inst)
                if len(found) == count:
                    return found
    return found


@contextmanager
def search_share(share: float | None, below: int) -> Iterator[None]:
    """Within it ``auto`` gives the window search ``share`` of the time on memory-capped
    models without an overlap cost of fewer than ``below`` actions (None: as it is)."""
    if share is None:
        yield
        return
    usual = prelude.search_share

    def changed(inst: Instance, method: str = "auto") -> float:
        if (method == "auto" and inst.memory_limit is not None
                and inst.overlap_forward_backward is None and inst.n_actions < below):
            return share
        return usual(inst, method)

    prelude.search_share = facade.search_share = changed
    try:
        yield
    finally:
        prelude.search_share = facade.search_share = usual


def row(inst: Instance, seconds: float, share: float | None = None,
        below: int = 1500) -> dict[str, object]:
    """One table row: ``inst`` solved with the full model alone (or, with ``share``, with
    ``auto`` giving the search that share below ``below`` actions) and with ``auto``."""
    first = "model" if share is None else f"share {share:g}"
    out: dict[str, object] = {"instance": inst.name, "actions": inst.n_actions}
    made: dict[str, float] = {}
    for label in (first, "auto"):
        t0 = time.perf_counter()
        with search_share(share if label != "auto" else None, below):
            res = solve(inst, time_limit=seconds,
                        method="model" if label == "model" else "auto")
        made[label] = res.makespan
        out[label] = f"{res.makespan:g} {res.status}"
        out[f"{label} bound"] = res.lower_bound
        out[f"{label} s"] = round(time.perf_counter() - t0, 1)
    out["shorter"] = f"{100 * (made[first] - made['auto']) / made[first]:.1f} %"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("-t", "--time-limit", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=100, help="first seed drawn (default 100)")
    ap.add_argument("--count", type=int, default=10, help="instances drawn (default 10)")
    ap.add_argument("--actions", type=int, nargs=2, default=(500, 1500), metavar=("LO", "HI"),
                    help="draw instances of LO <= actions < HI (default 500 1500)")
    ap.add_argument("--share", type=float, default=None,
                    help="compare auto with the search given this share of the time below "
                         "HI actions (0 < S <= 1) instead of the full model alone")
    args = ap.parse_args()
    if args.share is not None and not 0 < args.share <= 1:
        ap.error(f"--share {args.share:g}: must be in (0, 1]")
    if args.files:
        instances = [load_instance(f) for f in args.files]
    else:
        tmp = Path(tempfile.mkdtemp(prefix="capped_midsize_"))
        instances = capped_midsize(args.seed, args.count, tmp, tuple(args.actions))
    print_rows(instances, lambda inst: row(inst, args.time_limit, args.share,
                                           args.actions[1]))


if __name__ == "__main__":
    main()
