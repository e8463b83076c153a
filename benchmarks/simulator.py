"""Benchmark: the simulator against pp-schedule-visualizer's ``Schedule.execute``, and the cost
of everything that runs before the solver (issue 9's targets).

Table 1, per case (1F1B p=16 m=512; interleaved 1F1B p=32 v=2 m=256): CPU seconds (best of
``--repeat``; the three columns measured in turn within each repetition, so that a busy
machine slows them alike; each call after a full garbage collection, timed with the
collector on: :func:`best_of`) of

* the visualizer's ``Schedule.execute`` on its own 1F1B / interleaved generator (building the
  operations, its ``generate_*`` call, is not timed);
* cpsched's event engine timing the same orders (:func:`cpsched.engine.run_orders`, the part
  that corresponds to ``execute``): per-device start and end ticks;
* what a user gets from :func:`cpsched.simulate.simulate` and then reading ``.makespan``: the
  checks, the times, every timed row (a :class:`~cpsched.actions.TimedAction` per action, in
  the schedule's row order), the :class:`~cpsched.model.Schedule`, its makespan, and the
  garbage collection those new rows cost (the collector is paused while they are built and
  runs at the next allocation, inside the timing).  The other metrics (bubble fraction, peak
  memory) are properties computed when read: not included.

and the speed-ups against the visualizer.  Target: the simulator at least 10x the visualizer
on 1F1B p=16 m=512.

Table 2, per instance at p=32 v=2 m=256: seconds of ``run_all`` (every applicable schedule,
the list-scheduling portfolio included), of the task graph with its bound and windows, and
of the pipeline's resource graph (CPU seconds, one run).  Target (with the solver's model
build): under 3 s.

The visualizer (docs/references.md#ppviz, MIT) is not part of cpsched and is not copied: its
two source files (``ppviz_execution_model.py.txt``, ``ppviz_strategies.py.txt``) are loaded at
run time from ``--visualizer DIR``, else ``$PPVIZ_DIR``, else the ``reference`` folder of a
``shared`` directory next to the repository; without them its column says so.

Usage: python benchmarks/simulator.py [--repeat 5] [--visualizer DIR]
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from cpsched.engine import run_orders
from cpsched.graph import build_task_graph, lower_bound, pipeline_resource_graph, windows
from cpsched.instance import Instance
from cpsched.schedules import get_schedule, run_all
from cpsched.simulate import simulate

ROOT = Path(__file__).resolve().parents[1]
FILES = ("ppviz_execution_model.py.txt", "ppviz_strategies.py.txt")


def instance(p: int, v: int, m: int, *, split: bool = False,
             limit: float | None = None) -> Instance:
    """Uniform costs: F=5, B=10 (or F=I=W=1 with split backward), activation 1."""
    costs = ({"forward": 1, "backward_input": 1, "backward_weight": 1} if split
             else {"forward": 5, "backward": 10})
    memory: dict[str, Any] = {"activation": 1}
    if limit is not None:
        memory["limit"] = limit
    return Instance.from_dict({
        "name": f"p{p}-v{v}-m{m}" + ("-split" if split else "") + (f"-lim{limit}" if limit
                                                                    else ""),
        "pipeline": {"devices": p, "stages_per_device": v, "microbatches": m,
                     "split_backward": split},
        "costs": costs, "memory": memory})


def best_of(fn: Callable[[], Any], repeat: int, setup: Callable[[], Any] | None = None
            ) -> float:
    """Least CPU seconds of ``repeat`` calls of ``fn(setup())`` (or ``fn()``), each started
    after a full garbage collection (no garbage of an earlier call to collect) and timed with
    the collector on (each call pays for collecting what it allocates)."""
    best = float("inf")
    for _ in range(repeat):
        arg = setup() if setup is not None else None
        gc.collect()
        t = time.process_time()
        fn(arg) if setup is not None else fn()  # type: ignore[call-arg]
        best = min(best, time.process_time() - t)
    return best


def visualizer_dir(given: str | None) -> Path | None:
    """Where the visualizer's files are, or None."""
    candidates = [given, os.environ.get("PPVIZ_DIR"), str(ROOT.parent / "shared" / "reference")]
    for c in candidates:
        if c and all((Path(c) / f).is_file() for f in FILES):
            return Path(c)
    return None


def load_visualizer(folder: Path) -> types.ModuleType:
    """The visualizer's strategies module, its ``src.execution_model`` import satisfied."""
    src = types.ModuleType("src")
    src.__path__ = []  # a package
    model = types.ModuleType("src.execution_model")
    exec(compile((folder / FILES[0]).read_text(encoding="utf-8"), FILES[0], "exec"),  # noqa: S102
         model.__dict__)
    sys.modules["src"], sys.modules["src.execution_model"] = src, model
    strategies = types.ModuleType("src.strategies")
    exec(compile((folder / FILES[1]).read_text(encoding="utf-8"), FILES[1], "exec"),  # noqa: S102
         strategies.__dict__)
    strategies.ScheduleConfig = model.ScheduleConfig
    return strategies


def simulator_table(repeat: int, viz: types.ModuleType | None) -> pd.DataFrame:
    """Table 1 (see the module docstring)."""
    cases = [("1F1B p=16 m=512", instance(16, 1, 512), "1f1b", "standard",
              "generate_1f1b_schedule"),
             ("interleaved p=32 v=2 m=256", instance(32, 2, 256), "interleaved-1f1b",
              "interleave", "generate_1f1b_interleave_schedule")]
    rows = []
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 200_000))  # execute() recurses
    for name, inst, ours, placement, theirs in cases:
        orders = get_schedule(ours).generate(inst)
        row: dict[str, Any] = {"case": name, "actions": sum(len(o) for o in orders)}
        timed: dict[str, tuple[Callable[[Any], Any], Callable[[], Any]]] = {}
        if viz is not None:
            cfg = viz.ScheduleConfig(inst.p, inst.num_stages, inst.m, placement_strategy=placement,
                                     op_times={"forward": 5.0, "backward": 10.0})
            gen = getattr(viz, theirs)
            ms = gen(cfg)
            ms.execute()
            assert ms.get_total_execution_time() == simulate(inst, orders).makespan
            timed["visualizer execute (s)"] = (lambda s: s.execute(), lambda: gen(cfg))  # noqa: B023
        timed["cpsched engine (s)"] = (lambda _: run_orders(inst, orders), lambda: None)  # noqa: B023
        timed["cpsched simulate (s)"] = (
            lambda _: simulate(inst, orders).makespan, lambda: None)  # noqa: B023
        best = dict.fromkeys(timed, float("inf"))
        for _ in range(repeat):  # in turn: load on the machine slows every column alike
            for col, (fn, setup) in timed.items():
                best[col] = min(best[col], best_of(fn, 1, setup))
        row["visualizer execute (s)"] = best.get("visualizer execute (s)", float("nan"))
        row.update((k, v) for k, v in best.items() if k != "visualizer execute (s)")
        v = row["visualizer execute (s)"]
        row["engine speed-up"] = v / row["cpsched engine (s)"]
        row["simulate speed-up"] = v / row["cpsched simulate (s)"]
        rows.append(row)
    return pd.DataFrame(rows)


def before_solver_table() -> pd.DataFrame:
    """Table 2 (see the module docstring): one run each, CPU seconds."""
    rows = []
    for inst in (instance(32, 2, 256), instance(32, 2, 256, split=True, limit=48)):
        t0 = time.process_time()
        scheds = run_all(inst)
        t1 = time.process_time()
        g = build_task_graph(inst)
        lb = lower_bound(inst, g)
        windows(g, max(s.makespan for s in scheds.values()) * inst.time_scale)
        t2 = time.process_time()
        pipeline_resource_graph(inst)
        t3 = time.process_time()
        best = min(scheds, key=lambda k: scheds[k].makespan)
        rows.append({"instance": inst.name, "actions": g.number_of_nodes(),
                     "run_all (s)": t1 - t0, "task graph + bound + windows (s)": t2 - t1,
                     "resource graph (s)": t3 - t2, "total (s)": t3 - t0,
                     "best": f"{best} {scheds[best].makespan:g}",
                     "bound": inst.from_ticks(lb.value)})
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--visualizer", default=None, help="folder with the visualizer's files")
    args = ap.parse_args(argv)
    folder = visualizer_dir(args.visualizer)
    viz = load_visualizer(folder) if folder is not None else None
    print(simulator_table(args.repeat, viz).to_markdown(index=False, floatfmt=".4g"))
    if viz is None:
        print(f"\n(visualizer column empty: {', '.join(FILES)} not found; pass --visualizer DIR)")
    print()
    print(before_solver_table().to_markdown(index=False, floatfmt=".3g"))


if __name__ == "__main__":
    main()
