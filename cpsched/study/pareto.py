"""The memory–makespan front: the optimal makespan as a function of the per-device memory
limit, and where the known schedules sit on that plane."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from cpsched.instance import Instance
from cpsched.model import Schedule
from cpsched.schedules import run_all
from cpsched.solver import solve
from cpsched.study.memory import memory_quantum, with_memory_limit


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
    top = max(unl.schedule.peak_memory)
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
