"""The memory–makespan front: the optimal makespan as a function of the per-device memory
limit, and where the known schedules sit on that plane."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from cpsched.instance import Instance
from cpsched.model import Schedule
from cpsched.schedules import run_all
from cpsched.solver import solve
from cpsched.study.memory import memory_quantum, with_memory_limit
from cpsched.study.parallel import LimitSolve


class ParetoPoint(NamedTuple):
    """One point of the front: the best makespan under a per-device memory limit."""

    limit: float
    makespan: float | None
    status: str


def _default_limits(inst: Instance, max_points: int, solve_kw: Mapping[str, Any]
                    ) -> list[float]:
    """Every multiple of :func:`memory_quantum` from the smallest feasible limit up to the
    peak memory of the unlimited optimum, thinned evenly to ``max_points`` (ends kept)."""
    free = with_memory_limit(inst, None)
    unl = solve(free, candidates=run_all(free), **solve_kw)
    assert unl.schedule is not None
    return limit_grid(inst, max(unl.schedule.peak_memory), max_points)


def limit_grid(inst: Instance, top: float, max_points: int) -> list[float]:
    """Every multiple of :func:`memory_quantum` from :meth:`Instance.min_memory_limit` up to
    ``top`` (activation units), thinned evenly to ``max_points`` (both ends kept)."""
    lo = inst.min_memory_limit()
    q = memory_quantum(inst)
    n = int(math.floor((top - lo) / q + 1e-9)) + 1
    grid = [lo + k * q for k in range(n)]
    if len(grid) > max_points:
        idx = sorted({round(k * (len(grid) - 1) / (max_points - 1)) for k in range(max_points)})
        grid = [grid[k] for k in idx]
    return [round(x, 9) for x in grid]


def _front(limits: list[float], found: list[tuple[float, float]]) -> list[ParetoPoint]:
    """Points from ``(makespan, bound)`` per ascending limit: a schedule found under a smaller
    limit holds under a larger one, a bound proven under a larger limit holds below it."""
    bounds = [lb for _, lb in found]
    for k in range(len(found) - 2, -1, -1):
        bounds[k] = max(bounds[k], bounds[k + 1])
    out: list[ParetoPoint] = []
    best_ms = math.inf
    for lim, (ms, _), lb in zip(limits, found, bounds, strict=True):
        best_ms = min(best_ms, ms)
        out.append(ParetoPoint(lim, best_ms, "OPTIMAL" if lb >= best_ms - 1e-9 else "FEASIBLE"))
    return out


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
    kw: dict[str, Any] = {"time_limit": time_limit, "workers": workers,
                          "parameters": parameters}
    if limits is None:
        limits = _default_limits(inst, max_points, kw)
    lims = sorted({float(x) for x in limits})
    found: list[tuple[float, float]] = []  # (makespan, lower bound) per limit
    prev: Schedule | None = None
    for lim in lims:
        li = with_memory_limit(inst, lim)
        cands = dict(run_all(li))
        if prev is not None:
            cands["previous-limit"] = Schedule(li, list(prev.actions), method="previous-limit")
        res = solve(li, candidates=cands, **kw)
        assert res.schedule is not None and res.makespan is not None
        ms, lb = res.makespan, res.lower_bound if res.lower_bound is not None else 0.0
        if prev is None or ms <= prev.makespan:  # never worse than prev: it is a warm start
            prev = res.schedule
        found.append((ms, lb))
    return _front(lims, found)


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


def pareto_fronts(
    instances: Sequence[Instance],
    limits: Sequence[float] | None = None,
    *,
    time_limit: float | None = None,
    workers: int = 1,
    seed: int = 0,
    parameters: Mapping[str, Any] | None = None,
    max_points: int = 25,
    scheduler: Any = None,
    jobs: int | None = None,
    study: str | Path | None = None,
    progress: bool = False,
) -> dict[str, list[ParetoPoint]]:
    """The memory–makespan fronts of many instances, every (instance, limit) solve a Dask
    task (:func:`cpsched.study.dask_run.run_solves`) — a local cluster, a remote one, or
    this process with ``jobs=1``; with ``study`` every solve is written to that study
    directory as it finishes and a rerun computes only what is missing.

    Limits as in :func:`pareto_front` (the given ones, else from the least feasible one up
    to the unlimited optimum's peak memory, at most ``max_points``), but solved
    independently (each warm-started from every applicable known schedule at its limit, not
    from the previous limit's schedule); a schedule found under a smaller limit and a bound
    proven under a larger one are then carried over likewise.

    Args:
        instances: the instances (their own ``memory.limit`` is ignored; names unique).
        limits: the limits to solve for every instance (default: per instance, as above).
        time_limit: wall-clock seconds per solve (None: none — deterministic with
            ``workers=1`` and ``parameters={"max_deterministic_time": ...}``).
        workers / seed / parameters: CP-SAT ``num_workers``, ``random_seed``, others.
        max_points: at most this many limits per instance when ``limits`` is None.
        scheduler / jobs / study / progress: as in :func:`cpsched.study.compare`.

    Returns:
        ``{instance name: [ParetoPoint, ...]}`` sorted by limit; a point whose solves all
        failed has makespan None and status ``ERROR``.

    Raises:
        InstanceError: a given limit is below an instance's ``min_memory_limit()``.
        cpsched.outputs.OutputError: ``study`` cannot be used or is another study.
        SolvesInterrupted: Ctrl-C (finished solves are in ``study``).
    """
    from cpsched.study.dask_run import run_solves
    from cpsched.study.directory import SolverSettings, StudyDir

    free = [with_memory_limit(inst, None) for inst in instances]
    if limits is not None:
        for inst in free:
            for lim in limits:
                with_memory_limit(inst, lim)  # raises naming memory.limit when too small
    settings = SolverSettings(time_limit, workers, seed, dict(parameters or {}))
    store = None
    if study is not None:
        store = StudyDir(study)
        store.begin("pareto", settings, {"max_points": max_points})
        store.add_run(free, [])
    chosen: dict[int, list[float]] = {}

    def follow_up(i: int, unlimited: LimitSolve) -> list[float]:
        top = max(unlimited.peak_memory or [free[i].min_memory_limit()])
        chosen[i] = (sorted({float(x) for x in limits}) if limits is not None
                     else limit_grid(free[i], top, max_points))
        return chosen[i]

    solved = run_solves(free, follow_up, settings, store=store, scheduler=scheduler,
                        jobs=jobs, progress=progress)
    out: dict[str, list[ParetoPoint]] = {}
    for i, inst in enumerate(free):
        lims = chosen.get(i, [])
        found = [solved.get(i, lim) for lim in lims]
        pairs = [(r.makespan if r.makespan is not None else math.inf,
                  r.lower_bound if r.lower_bound is not None else 0.0) for r in found]
        out[inst.name] = [pt if pt.makespan != math.inf else
                          ParetoPoint(pt.limit, None, "ERROR") for pt in _front(lims, pairs)]
    return out
