"""Heuristic vs optimal: grids of instances, the comparison table, the memory–makespan front.

Library code only (the ``cpsched compare`` command calls these functions):

* :func:`load_grid` — a grid TOML (a base instance plus ``[grid]`` lists of values) → the
  product of instances;
* :func:`compare` — every applicable known schedule of every instance next to two CP-SAT
  optima: without a memory limit, and at the schedule's own peak memory ("same memory"),
  plus one ``cpsat`` row per instance (the optimum under the instance's own limit).  Solves
  run in parallel processes with a progress bar;
* :func:`write_results` — the table as CSV and Markdown;
* :func:`pareto_front` / :func:`schedule_points` — the optimal makespan as a function of the
  per-device memory limit, and where the known schedules sit.

Invariant: an optimum is never worse than a valid schedule it is compared with.  The "same
memory" solve is warm-started from every applicable schedule at that limit, the schedule in
question included (an overlapped F&B pair of an instance without ``overlap_forward_backward``
is first serialised into its backward then its forward — same end, memory never higher — so
that it is a hint the CP-SAT model accepts), and :func:`cpsched.solver.solve` never returns
something worse than its warm start.  The unlimited optimum is at most the same-memory one.
"""

from __future__ import annotations

import itertools
import math
import os
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from multiprocessing import get_context
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from cpsched.instance import (
    Costs,
    Instance,
    InstanceError,
    Memory,
    Pipeline,
    load_instance,
    read_toml,
)
from cpsched.model import Schedule
from cpsched.schedules import run_all
from cpsched.solver import solve
from cpsched.validate import validate

#: Columns of :func:`compare`'s table, in order.
COLUMNS = [
    "instance", "p", "v", "m", "placement", "split_backward", "forward", "backward",
    "backward_input", "backward_weight", "p2p_latency", "memory_limit",
    "schedule", "makespan", "bubble_fraction", "peak_memory", "peak_memory_per_device",
    "valid", "violation",
    "opt_makespan_unlimited", "improvement_unlimited_pct", "status_unlimited",
    "lower_bound_unlimited",
    "opt_makespan_same_memory", "improvement_same_memory_pct",
    "status", "gap", "lower_bound", "solve_seconds", "warm_start",
]

#: Name of the optimum's rows (schedule column), as :func:`cpsched.plots.bubble_bars` expects.
OPTIMUM = "cpsat"

# short names of grid keys for instance names (``base-p4-m8-lim8``)
_SHORT = {
    "pipeline.devices": "p", "pipeline.stages_per_device": "v",
    "pipeline.microbatches": "m", "pipeline.placement": "", "pipeline.split_backward": "split",
    "costs.forward": "F", "costs.backward": "B", "costs.backward_input": "I",
    "costs.backward_weight": "W", "costs.overlap_forward_backward": "ov",
    "costs.p2p_latency": "lat", "memory.activation": "act",
    "memory.released_by_input": "r", "memory.limit": "lim",
}
_SECTIONS: dict[str, Any] = {"pipeline": Pipeline, "costs": Costs, "memory": Memory}


# --------------------------------------------------------------------------------- grids
def _fmt_value(x: Any) -> str:
    if x is None:
        return "none"
    if isinstance(x, bool):
        return "1" if x else "0"
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    if isinstance(x, list):
        return "_".join(_fmt_value(y) for y in x)
    return str(x)


def _grid_value(x: Any) -> Any:
    """TOML has no null: the string ``"none"`` stands for "absent" (e.g. no memory limit)."""
    return None if isinstance(x, str) and x.lower() in ("none", "null") else x


def _check_grid_key(key: str, values: Any) -> None:
    parts = key.split(".")
    if len(parts) == 1 and parts[0] in ("name", "description"):
        pass
    elif len(parts) != 2 or parts[0] not in _SECTIONS or (
            parts[1] not in _SECTIONS[parts[0]].model_fields):
        allowed = [f"{sec}.{f}" for sec, cls in _SECTIONS.items() for f in cls.model_fields]
        raise InstanceError(f"grid.{key}", values,
                            "unknown key; a grid varies dotted instance keys: "
                            + ", ".join(allowed))
    if not isinstance(values, list) or not values:
        raise InstanceError(f"grid.{key}", values,
                            'a non-empty list of values, e.g. "pipeline.devices" = [4, 8]')


def load_grid(path: str | Path, skipped: list[tuple[str, str]] | None = None
              ) -> list[Instance]:
    """Instances from a grid file: the product of the ``[grid]`` values over a base instance.

    The file is an instance file (SPEC §2) plus a ``[grid]`` table of dotted keys → lists of
    values, or ``base = "path.toml"`` (relative to the grid file) whose instance the file's
    own tables, if any, amend::

        base = "../article-interleaved.toml"
        [grid]
        "pipeline.devices" = [4, 8]
        "pipeline.microbatches" = [8, 16]
        "memory.limit" = [8, "none"]      # "none": no limit (TOML has no null)
        "costs.backward" = [10, 20]       # cost ratios F:B = 1:2 and 1:4

    Instances come in product order (the first key varies slowest) and are named after the
    base instance and the keys that take more than one value: ``article-p4-m8-lim8``
    (``p v m F B I W lat lim act r ov split``; a placement appears as its value).

    Args:
        path: the grid TOML file.
        skipped: invalid combinations raise by default; pass a list to skip them instead,
            and ``(name, reason)`` is appended to it for each one skipped.

    Returns:
        The validated instances, at least one.

    Raises:
        InstanceError: the file is missing or not TOML; ``base`` is not a file; ``[grid]`` is
            missing, has an unknown key or a value that is not a non-empty list (field
            ``grid.KEY``); a combination is invalid and ``skipped`` is None (field
            ``grid[KEY=VALUE, ...].FIELD`` naming the combination and the wrong field); every
            combination was skipped.
    """
    gpath = Path(path)
    data = read_toml(gpath, "grid file")
    grid = data.pop("grid", None)
    if not isinstance(grid, dict) or not grid:
        raise InstanceError("grid", grid, 'a [grid] table of dotted keys -> lists of values, '
                            'e.g. "pipeline.devices" = [4, 8]')
    base_ref = data.pop("base", None)
    if base_ref is not None:
        if not isinstance(base_ref, str):
            raise InstanceError("base", base_ref, "a path to an instance TOML file")
        bpath = (gpath.parent / base_ref)
        if not bpath.is_file():
            raise InstanceError("base", base_ref,
                                f"an instance file relative to the grid file ({bpath})")
        base = load_instance(bpath).to_dict()
        for key, val in data.items():  # the grid file's own fields amend the base
            if isinstance(val, dict) and isinstance(base.get(key), dict):
                base[key] = {**base[key], **val}
            else:
                base[key] = val
    else:
        base = dict(data)
        base.setdefault("name", gpath.stem)
    for key, values in grid.items():
        _check_grid_key(key, values)
    keys = list(grid)
    varied = [k for k in keys if len(grid[k]) > 1]
    out: list[Instance] = []
    names: set[str] = set()
    base_name = str(base.get("name", gpath.stem))
    for combo in itertools.product(*(grid[k] for k in keys)):
        assign = {k: _grid_value(v) for k, v in zip(keys, combo, strict=True)}
        label = ", ".join(f"{k}={_fmt_value(v)}" for k, v in assign.items())
        name = "-".join([base_name] + [_SHORT.get(k, k.split(".")[-1]) + _fmt_value(assign[k])
                                       for k in varied])
        if name in names:
            name = f"{name}-{len(out)}"
        names.add(name)
        try:
            inst = load_instance(None, {**assign, "name": assign.get("name", name)},
                                 base=base)
        except InstanceError as exc:
            if skipped is None:
                raise InstanceError(f"grid[{label}].{exc.field}", exc.value,
                                    exc.allowed) from None
            skipped.append((name, str(exc)))
            continue
        out.append(inst)
    if not out:
        raise InstanceError("grid", grid, "at least one valid combination (all were skipped: "
                            + "; ".join(r for _, r in (skipped or [])[:3]) + ")")
    return out


# ------------------------------------------------------------------------------ solving
def _limit_key(limit: float | None) -> float | None:
    return None if limit is None else round(float(limit), 9)


@dataclass(frozen=True)
class _Task:
    index: int                  # instance index
    limit: float | None         # memory limit of this solve (None: unlimited)
    instance: dict[str, Any]
    time_limit: float | None
    workers: int
    parameters: dict[str, Any] | None


def _solve_task(task: _Task) -> dict[str, Any]:
    """Worker: solve one instance at one memory limit (picklable in, plain dict out)."""
    try:
        inst = Instance.from_dict(task.instance).replace(**{"memory.limit": task.limit})
        res = solve(inst, time_limit=task.time_limit, workers=task.workers,
                    candidates=run_all(inst), parameters=task.parameters)
        sch = res.schedule
        return {
            "makespan": res.makespan, "status": res.status, "gap": res.gap,
            "lower_bound": res.lower_bound, "solve_seconds": res.solve_seconds,
            "warm_start": res.hint_method,
            "bubble_fraction": None if sch is None else sch.bubble_fraction,
            "peak_memory": None if sch is None else list(sch.peak_memory),
            "message": res.message,
        }
    except Exception as exc:  # noqa: BLE001  (reported in the table, never lost)
        return {"makespan": None, "status": "ERROR", "gap": None, "lower_bound": None,
                "solve_seconds": None, "warm_start": None, "bubble_fraction": None,
                "peak_memory": None, "message": f"{type(exc).__name__}: {exc}"}


class _InlineExecutor(Executor):
    """Runs each task at submit time (``jobs = 1``: no process start-up, easy to debug)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        fut: Future = Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001
            fut.set_exception(exc)
        return fut


def _mp_context() -> BaseContext:
    """``fork`` on Linux: no re-import of ``__main__`` (works from unguarded scripts and
    notebooks) and no start-up cost; the parent runs no solver threads while forking (CP-SAT
    joins its threads when a solve returns, and the progress bar refreshes without a thread).
    Elsewhere the platform default (spawn: scripts need ``if __name__ == "__main__":``)."""
    return get_context("fork") if sys.platform.startswith("linux") else get_context()


def _progress_bar(enabled: bool):  # noqa: ANN202
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), disable=not enabled, transient=False,
                    auto_refresh=False)


def _fmt_peaks(peaks: Sequence[float]) -> str:
    return " ".join(_fmt_value(round(float(x), 6)) for x in peaks)


def _mean(x: Sequence[float]) -> float:
    return sum(x) / len(x) if x else math.nan


def _improvement(schedule_ms: float, opt: float | None) -> float:
    if opt is None or not schedule_ms:
        return math.nan
    return 100.0 * (schedule_ms - opt) / schedule_ms


def compare(
    instances: Iterable[Instance],
    time_limit: float | None = 30,
    workers: int = 1,
    jobs: int | None = None,
    progress: bool = True,
    *,
    parameters: Mapping[str, Any] | None = None,
    schedules: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Every applicable known schedule of every instance against the CP-SAT optima.

    For each instance, one row per applicable registered schedule (:func:`run_all`, registry
    order; ``schedules`` restricts the rows, not the warm starts), then one row
    ``schedule == "cpsat"``: the optimum under the instance's own memory limit.  Each
    schedule row carries

    * the schedule's ``makespan`` (time units), ``bubble_fraction`` (in [0, 1]),
      ``peak_memory`` (max over devices, activation units) and ``peak_memory_per_device``
      (space-separated string), ``valid`` (the validator finds nothing, e.g. within the
      instance's limit) and the first ``violation`` ("" when valid);
    * ``opt_makespan_unlimited``: the optimum with no memory limit, its
      ``status_unlimited`` and ``lower_bound_unlimited``;
    * ``opt_makespan_same_memory``: the optimum with ``memory.limit`` = this schedule's
      ``peak_memory`` — the time the schedule leaves on the table at its own memory;
      ``status``, ``gap`` (fraction), ``lower_bound``, ``solve_seconds`` and
      ``warm_start`` describe that solve;
    * ``improvement_*_pct = 100 * (makespan - optimum) / makespan`` (>= 0 for valid
      schedules: see the module docstring).

    The ``cpsat`` row has the optimum's own makespan, bubble and memory; its improvement
    columns are NaN.  Instance columns: ``instance, p, v, m, placement, split_backward``, the
    mean over stages of ``forward, backward, backward_input, backward_weight`` (backward =
    the fused B), ``p2p_latency``, ``memory_limit`` (NaN: none).  See :data:`COLUMNS`.

    Solves are cached per (instance, memory limit): when the unlimited optimum is proven and
    fits under a limit, it is that limit's optimum too and is reused without solving.

    Args:
        instances: the instances (names should be unique: they key the table).
        time_limit: wall-clock seconds per solve (None: none).
        workers: CP-SAT workers per solve.
        jobs: parallel solver processes (default: CPU count), capped by the number of
            solves; 1 solves in this process.
        progress: show a rich progress bar.
        parameters: CP-SAT parameters for every solve, e.g. ``{"max_deterministic_time":
            2.0}`` with ``workers=1`` for reproducible numbers.
        schedules: only these registered schedules get rows (others are skipped).

    Returns:
        The table, columns :data:`COLUMNS` (a solve that crashed has ``status = "ERROR"``
        and the reason in ``violation``; a warning is issued).
    """
    insts = list(instances)
    params = dict(parameters) if parameters else None
    heur: list[dict[str, Schedule]] = []
    for inst in insts:
        hs = run_all(inst)
        if schedules is not None:
            hs = {k: v for k, v in hs.items() if k in schedules}
        heur.append(hs)
    # limits needed per instance: None, own limit, each schedule's peak
    wanted: list[list[float | None]] = []
    for inst, hs in zip(insts, heur, strict=True):
        lims = [None, _limit_key(inst.memory_limit)]
        lims += [_limit_key(max(s.peak_memory)) for s in hs.values()]
        wanted.append(list(dict.fromkeys(lims)))
    results: list[dict[float | None, dict[str, Any]]] = [{} for _ in insts]

    def task(i: int, limit: float | None) -> _Task:
        return _Task(i, limit, insts[i].to_dict(), time_limit, workers, params)

    n_tasks_max = sum(len(w) for w in wanted)
    n_jobs = max(1, min(jobs or os.cpu_count() or 1, n_tasks_max))
    executor: Executor = (_InlineExecutor() if n_jobs == 1 else
                          ProcessPoolExecutor(n_jobs, mp_context=_mp_context()))
    with executor, _progress_bar(progress) as bar:
        bar_id = bar.add_task("solving", total=len(insts))
        pending: dict[Future, _Task] = {}
        submitted = 0

        def submit(t: _Task) -> None:
            nonlocal submitted
            submitted += 1
            bar.update(bar_id, total=max(submitted, len(insts)), refresh=True)
            pending[executor.submit(_solve_task, t)] = t

        for i in range(len(insts)):
            submit(task(i, None))
        while pending:
            done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for fut in done:
                t = pending.pop(fut)
                results[t.index][t.limit] = fut.result()
                if t.limit is None:  # phase 2: the limited solves of this instance
                    unl = results[t.index][None]
                    for lim in wanted[t.index]:
                        if lim is None:
                            continue
                        if (unl["status"] == "OPTIMAL" and unl["peak_memory"]
                                and max(unl["peak_memory"]) <= lim + 1e-9):
                            results[t.index][lim] = {**unl, "solve_seconds": 0.0,
                                                     "reused": True}
                        else:
                            submit(task(t.index, lim))
                bar.update(bar_id, advance=1, refresh=True)
    rows: list[dict[str, Any]] = []
    for i, (inst, hs) in enumerate(zip(insts, heur, strict=True)):
        res = results[i]
        for r in res.values():
            if r["status"] == "ERROR":
                warnings.warn(f"compare: {inst.name}: {r['message']}", stacklevel=2)
        unl = res[None]
        base = {
            "instance": inst.name, "p": inst.p, "v": inst.v, "m": inst.m,
            "placement": inst.placement, "split_backward": inst.split_backward,
            "forward": _mean(inst.forward), "backward": _mean(inst.backward),
            "backward_input": _mean(inst.backward_input) if inst.split_backward else math.nan,
            "backward_weight": (_mean(inst.backward_weight) if inst.split_backward
                                else math.nan),
            "p2p_latency": inst.p2p_latency,
            "memory_limit": math.nan if inst.memory_limit is None else inst.memory_limit,
            "opt_makespan_unlimited": unl["makespan"],
            "status_unlimited": unl["status"], "lower_bound_unlimited": unl["lower_bound"],
        }
        for name, sch in hs.items():
            viol = validate(sch)
            peak = max(sch.peak_memory)
            same = res[_limit_key(peak)]
            rows.append({
                **base, "schedule": name, "makespan": sch.makespan,
                "bubble_fraction": sch.bubble_fraction, "peak_memory": peak,
                "peak_memory_per_device": _fmt_peaks(sch.peak_memory),
                "valid": not viol, "violation": viol[0] if viol else "",
                "improvement_unlimited_pct": _improvement(sch.makespan, unl["makespan"]),
                "opt_makespan_same_memory": same["makespan"],
                "improvement_same_memory_pct": _improvement(sch.makespan, same["makespan"]),
                "status": same["status"], "gap": same["gap"],
                "lower_bound": same["lower_bound"], "solve_seconds": same["solve_seconds"],
                "warm_start": same["warm_start"],
            })
        own = res[_limit_key(inst.memory_limit)]
        peaks = own["peak_memory"] or []
        rows.append({
            **base, "schedule": OPTIMUM, "makespan": own["makespan"],
            "bubble_fraction": own["bubble_fraction"],
            "peak_memory": max(peaks) if peaks else math.nan,
            "peak_memory_per_device": _fmt_peaks(peaks),
            "valid": own["status"] in ("OPTIMAL", "FEASIBLE"),
            "violation": own["message"] if own["status"] == "ERROR" else "",
            "improvement_unlimited_pct": math.nan,
            "opt_makespan_same_memory": math.nan, "improvement_same_memory_pct": math.nan,
            "status": own["status"], "gap": own["gap"], "lower_bound": own["lower_bound"],
            "solve_seconds": own["solve_seconds"], "warm_start": own["warm_start"],
        })
    return pd.DataFrame(rows, columns=COLUMNS)


# ------------------------------------------------------------------------------ output
def _cell(x: Any) -> str:
    if x is None:
        return ""
    if isinstance(x, float):
        if math.isnan(x):
            return ""
        if x.is_integer():
            return str(int(x))
        return f"{x:.4g}" if abs(x) < 1 else f"{x:.6g}"
    return str(x).replace("|", "\\|").replace("\n", " ")


def to_markdown(df: pd.DataFrame) -> str:
    """A GitHub Markdown table of ``df`` (no index; NaN as empty; floats to 4 significant
    digits below 1, 6 above; ``|`` escaped), numbers right-aligned."""
    cols = [str(c) for c in df.columns]
    body = [[_cell(x) for x in row] for row in df.itertuples(index=False)]
    numeric = [pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])
               for c in df.columns]
    widths = [max([len(c), 3, *(len(r[k]) for r in body)]) for k, c in enumerate(cols)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.rjust(w) if num else c.ljust(w)
                                 for c, w, num in zip(cells, widths, numeric, strict=True)) + " |"

    rule = "| " + " | ".join(("-" * (w - 1) + ":") if num else "-" * w
                             for w, num in zip(widths, numeric, strict=True)) + " |"
    return "\n".join([line(cols), rule, *(line(r) for r in body)]) + "\n"


def write_results(df: pd.DataFrame, out_dir: str | Path, stem: str) -> tuple[Path, Path]:
    """Write ``OUT_DIR/STEM.csv`` and ``OUT_DIR/STEM.md`` (creating ``out_dir``).

    Returns:
        ``(csv_path, markdown_path)``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out / f"{stem}.csv", out / f"{stem}.md"
    df.to_csv(csv_path, index=False)
    md_path.write_text(to_markdown(df), encoding="utf-8")
    return csv_path, md_path


# ------------------------------------------------------------------------------ pareto
class ParetoPoint(NamedTuple):
    """One point of the front: the best makespan under a per-device memory limit."""

    limit: float
    makespan: float | None
    status: str


def memory_quantum(inst: Instance) -> float:
    """The step of the values a device's held memory can take (the gcd of the stage
    activations and their ``released_by_input`` parts, to 6 decimals): the front can only
    change at multiples of it above :meth:`Instance.min_memory_limit`."""
    r = inst.released_by_input
    vals = {round(x * 1e6) for a in inst.activation for x in (a, a * r, a * (1 - r))}
    g = 0
    for v in vals:
        g = math.gcd(g, v)
    return g / 1e6 if g else 1.0


def pareto_front(
    inst: Instance,
    limits: Sequence[float] | None = None,
    time_limit: float | None = 10,
    workers: int = 1,
    *,
    parameters: Mapping[str, Any] | None = None,
    max_points: int = 25,
) -> list[ParetoPoint]:
    """The memory–makespan front: the optimal makespan for each per-device memory limit.

    Limits (activation units): the given ones, else every multiple of
    :func:`memory_quantum` from :meth:`Instance.min_memory_limit` up to the peak memory of
    the optimum without a limit (beyond it nothing changes), thinned evenly to at most
    ``max_points`` (both ends kept).  They are solved in ascending order, each warm-started
    also from the previous limit's schedule (valid under a larger limit); then a schedule
    found under a smaller limit and a bound proven under a larger one are carried over, so
    makespans are non-increasing and bounds consistent even when time limits stop a solve.

    Args:
        inst: the instance (its own ``memory.limit`` is ignored).
        limits: the limits to solve; each must be >= ``inst.min_memory_limit()``.
        time_limit: wall-clock seconds per solve.
        workers: CP-SAT workers per solve.
        parameters: CP-SAT parameters, e.g. ``{"max_deterministic_time": 1.0}``.
        max_points: at most this many limits when ``limits`` is None.

    Returns:
        ``ParetoPoint(limit, makespan, status)`` sorted by limit; status ``OPTIMAL`` when
        the makespan equals the best bound proven at that limit or above, else ``FEASIBLE``.

    Raises:
        InstanceError: a limit below ``inst.min_memory_limit()``.
    """
    kw = {"time_limit": time_limit, "workers": workers, "parameters": parameters}
    if limits is None:
        free = inst.replace(**{"memory.limit": None})
        unl = solve(free, candidates=run_all(free), **kw)
        assert unl.schedule is not None
        top = max(unl.schedule.peak_memory)
        lo = inst.min_memory_limit()
        q = memory_quantum(inst)
        n = int(math.floor((top - lo) / q + 1e-9)) + 1
        grid = [lo + k * q for k in range(n)]
        if len(grid) > max_points:
            idx = sorted({round(k * (len(grid) - 1) / (max_points - 1))
                          for k in range(max_points)})
            grid = [grid[k] for k in idx]
        limits = [round(x, 9) for x in grid]
    lims = sorted({float(x) for x in limits})
    found: list[tuple[float, float]] = []  # (makespan, lower bound) per limit
    prev: Schedule | None = None
    for lim in lims:
        li = inst.replace(**{"memory.limit": lim})
        cands = dict(run_all(li))
        if prev is not None:
            cands["previous-limit"] = Schedule(li, list(prev.actions), method="previous-limit")
        res = solve(li, candidates=cands, **kw)
        assert res.schedule is not None and res.makespan is not None
        ms, lb = res.makespan, res.lower_bound if res.lower_bound is not None else 0.0
        if prev is None or ms <= prev.makespan:  # never worse than prev: it is a warm start
            prev = res.schedule
        found.append((ms, lb))
    out: list[ParetoPoint] = []
    best_ms = math.inf
    bounds = [lb for _, lb in found]
    for k in range(len(found) - 2, -1, -1):  # a bound at a larger limit holds below it
        bounds[k] = max(bounds[k], bounds[k + 1])
    for lim, (ms, _), lb in zip(lims, found, bounds, strict=True):
        best_ms = min(best_ms, ms)
        status = "OPTIMAL" if lb >= best_ms - 1e-9 else "FEASIBLE"
        out.append(ParetoPoint(lim, best_ms, status))
    return out


def schedule_points(inst: Instance, names: Sequence[str] | None = None
                    ) -> list[tuple[str, float, float]]:
    """Where the known schedules sit on the memory–makespan plane.

    Args:
        inst: the instance (schedules that react to ``memory.limit``, e.g. list scheduling,
            see it; others ignore it).
        names: only these registered schedules (default: every applicable one).

    Returns:
        ``(name, max peak memory over devices, makespan)`` per applicable schedule, in
        registry order — the ``schedules`` argument of :func:`cpsched.plots.pareto`.
    """
    return [(name, max(s.peak_memory), s.makespan) for name, s in run_all(inst).items()
            if names is None or name in names]


__all__ = [
    "COLUMNS", "OPTIMUM", "ParetoPoint", "compare", "load_grid", "memory_quantum",
    "pareto_front", "schedule_points", "to_markdown", "write_results",
]
