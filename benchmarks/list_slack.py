"""Benchmark: the list portfolio's loose admission slack, searched per rule (docs/modelling.md
§42), against the fixed slacks of sessions 8–33 (4, 8, 5 and 6 largest stage activations for
``ilv``, ``due0.2`` and ``due0.4``).

For each memory-capped instance on loop or V placement (bidirectional placement has its own
portfolio, :mod:`cpsched.schedules.listsched_bidi`): the known schedule ``list`` as cpsched
computes it (makespan, winning configuration, seconds), the same portfolio with the fixed
slacks instead of the search, and the change.

    python benchmarks/list_slack.py                         # the shipped scale rows
    python benchmarks/list_slack.py --dir /tmp/r38          # any directory of instance files
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from cpsched import load_instance
from cpsched.instance import Instance
from cpsched.schedules import listsched
from cpsched.schedules.listsched import pipeline_list_schedule

SCALE = Path(__file__).resolve().parent.parent / "instances" / "scale"
#: the loose runs before session 38: these slacks, each for these rules
FIXED_SLACKS, FIXED_RULES = (4, 8, 5, 6), ("ilv", "due0.2", "due0.4")


def fixed(makespan: Callable[[int], int | None]) -> dict[int, int]:
    """The fixed slacks in place of :func:`~cpsched.schedules.listsched_slack.slack_search`."""
    seen: dict[int, int] = {}
    for k in FIXED_SLACKS:
        value = makespan(k)
        if value is None:
            break
        seen[k] = value
    return seen


def timed(inst: Instance) -> tuple[float, str, float]:
    t0 = time.perf_counter()
    res = pipeline_list_schedule(inst)
    return inst.from_ticks(res.makespan), res.config, time.perf_counter() - t0


def row(path: Path) -> dict[str, object] | None:
    inst = load_instance(path)
    if inst.memory_limit is None or inst.placement == "bidirectional":
        return None
    searched, config, seconds = timed(inst)
    search, rules = listsched.slack_search, listsched.LOOSE_RULES
    listsched.slack_search, listsched.LOOSE_RULES = fixed, FIXED_RULES
    try:
        before, _, seconds_before = timed(inst)
    finally:
        listsched.slack_search, listsched.LOOSE_RULES = search, rules
    return {"instance": path.stem, "actions": inst.n_actions, "fixed slacks": before,
            "s (fixed)": round(seconds_before, 1), "searched": searched,
            "s (searched)": round(seconds, 1),
            "change %": round(100 * (searched - before) / before, 2), "winning run": config}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="instance names (default: all in --dir)")
    ap.add_argument("--dir", type=Path, default=SCALE, help="directory of instance files")
    args = ap.parse_args()
    paths = sorted(args.dir.glob("*.toml"))
    if args.names:
        paths = [p for p in paths if p.stem in args.names]
    rows = [r for r in map(row, paths) if r is not None]
    with pd.option_context("display.width", 250, "display.max_columns", None,
                           "display.max_colwidth", 60):
        print(pd.DataFrame(rows).to_string(index=False))


if __name__ == "__main__":
    main()
