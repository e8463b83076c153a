"""The span bound: how far apart the turns of a few microbatches must be (docs/modelling.md §53).

Pick one action per microbatch, the *marker* — the forward of a device's last stage, where the
microbatch holds all of that device's activations at once.  In a FIFO schedule (some optimal
schedule is one, §1) the markers start in microbatch order, ``t_0 <= t_1 <= ...``.  Keep only
microbatches ``i .. i + n`` of such a schedule and renumber them ``0 .. n``: it is a FIFO
schedule of the same pipeline with ``n + 1`` microbatches (each microbatch's dependencies are
its own; fewer microbatches hold less memory and leave the devices freer).  So
``t_{i+n} - t_i >= Δ_n``, the least marker span over all schedules of ``n + 1``
microbatches, and any lower bound CP-SAT proves on ``Δ_n`` will do.  Spans compose
(``t_{i+a+b} - t_i >= Δ_a + Δ_b``), so with ``D(k)`` the best sum of proven spans over
``k`` microbatch steps, every schedule has
``makespan >= head(marker of j) + D(k - j) + duration + tail(marker of k)`` for ``j <= k``.

The small model is anchored: its first marker is fixed at ``upper`` and the horizon is
``2 · upper`` (``upper``: a known makespan).  A restricted schedule shifted so that its first
marker starts there still fits, since every action of a schedule no longer than ``upper`` lies
within ``upper`` of the marker; without the anchor CP-SAT wastes its effort on shifting the
whole schedule (p = 4 loop v = 4, limit one microbatch: ``Δ_1`` unproven in 60 s unanchored,
proven in 0.08 s anchored).

Where the memory limit holds only a few microbatches per device this sees what the area
argument misses — that a microbatch's turn must wait until the one before it has released
the device, and that their forwards and backwards then collide on the other devices — and
on the p = 4 analog of the limit-8 scale row it meets the optimum.  Where the limit holds
many microbatches, ``Δ_n`` for the few ``n`` a small model can take adds nothing.
Not under bidirectional placement (restricting to consecutive microbatches mixes the
directions) nor with an overlap cost (a restricted pair loses its other half).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ortools.sat.python import cp_model

from cpsched.actions import Action, Kind
from cpsched.core import HeadsTails
from cpsched.graph import task_graph
from cpsched.instance import Instance, InstanceError
from cpsched.solver.constraints import ordered_heads_tails
from cpsched.solver.cpsat import solve_model
from cpsched.solver.pipeline_model import PipelineModel
from cpsched.solver.relaxation import kept_actions, relaxed_model

#: Most actions of a small model (``(n + 1)`` microbatches): on p = 8 loop v = 4 split (96 a
#: microbatch) eight workers solved ``n = 1, 2, 3`` (up to 384 actions) within 15 s; the
#: limit-24 row's p = 6 analog (24 a microbatch) up to ``n = 16`` within 120 s (§53)
MAX_SPAN_ACTIONS = 400
#: Deterministic CP-SAT units per small model (p = 4 loop v = 4 split, two microbatches:
#: 0.04-0.08 s; p = 8, four microbatches: 2 s)
SPAN_DETERMINISTIC_TIME = 1.0
#: Share of a small model's limits for its device alone first (solved at once where it is
#: solved at all: p = 8 loop v = 4, three microbatches, 0.2 s with eight workers)
RELAXED_SHARE = 0.3
#: Larger models are not tried after this many in a row that CP-SAT did not solve (a larger
#: one is harder still)
MAX_MISSES = 1


@dataclass(frozen=True)
class SpanBound:
    """The span bound: ``bound`` (ticks, at least the ``lower`` it was given), the marker
    ``stage`` (its forward; None when nothing ran), ``spans[n - 1]`` the proven ``Δ_n``
    (ticks) and ``solved[n - 1]`` whether CP-SAT proved it optimal, and the ``seconds``
    taken."""

    bound: int
    stage: int | None
    spans: tuple[int, ...]
    solved: tuple[bool, ...]
    seconds: float


def _turns(inst: Instance, d: int) -> float:
    """How many microbatches' full activations (every stage of device ``d``) its limit
    holds (infinite without a limit or activations)."""
    held = sum(inst.activation[s] for s in inst.stages_of(d))
    return (inst.memory_limit or math.inf) / held if held > 0 else math.inf


def peak_count(inst: Instance) -> int:
    """How many microbatches' turns fit at once on the tightest device: the fewest
    ``⌊limit / (sum of the device's stage activations)⌋`` (at least 1; ``m`` without a
    limit)."""
    fewest = min(_turns(inst, d) for d in range(inst.p))
    return inst.m if math.isinf(fewest) else max(1, math.floor(fewest + 1e-9))


def applies(inst: Instance) -> bool:
    """Whether the bound is defined and can gain: a memory limit, neither bidirectional
    placement nor an overlap cost, and a small model with one microbatch more than fit their
    turns at once on the tightest device (:func:`peak_count`) within :data:`MAX_SPAN_ACTIONS`
    — with fewer the limit does not bind between the markers and the spans add nothing."""
    if (inst.memory_limit is None or inst.m < 2 or inst.placement == "bidirectional"
            or inst.overlap_forward_backward is not None):
        return False
    return (peak_count(inst) + 1) * (inst.n_actions // inst.m) <= MAX_SPAN_ACTIONS


def marker(inst: Instance) -> int:
    """The marker stage: the last stage of the tightest device (the fewest turns at once,
    :func:`peak_count`; the lowest device of those) — where a microbatch holds all of the
    device's activations.  On p = 4 loop v = 4 (limit one microbatch) every device's last
    stage gives ``Δ_1`` = 22.72, stage 0 only 21.338."""
    return max(inst.stages_of(min(range(inst.p), key=lambda d: (_turns(inst, d), d))))


@dataclass(frozen=True)
class _Limits:
    """One CP-SAT run's limits: deterministic units and wall seconds (None: none), workers,
    and the callback given each solver (Ctrl-C: its ``stop_search()``)."""

    deterministic_time: float | None
    time_limit: float | None
    workers: int
    on_solver: Callable[[cp_model.CpSolver], None] | None

    def share(self, part: float) -> _Limits:
        """These limits cut to ``part`` of them."""
        return replace(self, **{k: None if v is None else v * part for k, v in
                                (("deterministic_time", self.deterministic_time),
                                 ("time_limit", self.time_limit))})


def _solve_span(model: cp_model.CpModel, start: Mapping[Action, Any], stage: int, n: int,
                upper: int, floor: int, limits: _Limits) -> tuple[int, bool]:
    """Minimise ``start F(stage, n) − upper`` with ``F(stage, 0)`` fixed at ``upper`` and
    the span at least ``floor``: the proven bound (ticks) and whether it is the optimum."""
    first, last = Action(Kind.F, stage, 0), Action(Kind.F, stage, n)
    model.add(start[first] == upper)
    model.add(start[last] - upper >= floor)
    model.minimize(start[last] - upper)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = limits.workers
    if limits.workers == 1:  # its LP took 35 s of wall for 0.2 deterministic units (§53)
        solver.parameters.linearization_level = 0
    solver.parameters.catch_sigint_signal = False  # Ctrl-C is the caller's
    if limits.deterministic_time is not None:
        solver.parameters.max_deterministic_time = max(1e-3, limits.deterministic_time)
    if limits.time_limit is not None:
        solver.parameters.max_time_in_seconds = max(0.01, limits.time_limit)
    if limits.on_solver is not None:
        limits.on_solver(solver)
    status = solve_model(solver, model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return floor, False
    return max(floor, math.ceil(solver.best_objective_bound - 1e-6)), status == cp_model.OPTIMAL


def min_span(inst: Instance, stage: int, n: int, upper: int, *,
             deterministic_time: float | None,
             time_limit: float | None = None, workers: int = 1,
             on_solver: Callable[[cp_model.CpSolver], None] | None = None
             ) -> tuple[int, bool]:
    """A proven lower bound on ``Δ_n`` (ticks) for the marker ``F(stage)`` and whether it is
    the optimum, on ``inst`` with ``n + 1`` microbatches, the first marker fixed at
    ``upper``, the horizon ``2 · upper``: first the marker's device alone (the relaxation of
    docs/modelling.md §21 on the small instance; :data:`RELAXED_SHARE` of the limits), then
    the exact small model with the span at least what that proved (``workers`` CP-SAT
    workers, within ``deterministic_time`` units and ``time_limit`` seconds, each None for
    no limit).

    Raises:
        ValueError: ``n < 1``.
    """
    if n < 1:
        raise ValueError(f"n = {n}: a span needs two microbatches or more")
    try:
        sub = inst.replace(**{"pipeline.microbatches": n + 1, "name": f"{inst.name}-span{n}"})
    except InstanceError:
        return 0, False
    limits = _Limits(deterministic_time, time_limit, workers, on_solver)
    t0 = time.perf_counter()
    g = task_graph(sub)
    rm = relaxed_model(sub, ordered_heads_tails(sub, g),
                       kept_actions(sub, g, sub.device_of(stage)), 0, 2 * upper)
    low, _ = _solve_span(rm.model, rm.start, stage, n, upper, 0, limits.share(RELAXED_SHARE))
    if time_limit is not None:
        rest = time_limit - (time.perf_counter() - t0)
        if rest < 0.05:
            return low, False
        limits = replace(limits, time_limit=rest)
    pm = PipelineModel(sub, 2 * upper, 0)
    if deterministic_time is not None:
        limits = limits.share(1 - RELAXED_SHARE)
    return _solve_span(pm.model, pm.timing.start, stage, n, upper, low, limits)


def compose(spans: Sequence[int], k: int) -> list[int]:
    """``D(0..k)``: the most ``spans[n - 1]`` (``Δ_n``) add up to over ``k`` steps,
    ``D(0) = 0`` — every ``k`` steps of markers are at least ``D(k)`` apart (ticks)."""
    best = [0] * (k + 1)
    for j in range(1, k + 1):
        best[j] = max((best[j - n] + spans[n - 1] for n in range(1, min(j, len(spans)) + 1)),
                      default=0)
    return best


def combine(inst: Instance, stage: int, spans: Sequence[int], ht: HeadsTails,
            duration: int) -> int:
    """The makespan bound (ticks) of the spans for the marker ``F(stage)``: the most of
    ``head(F(stage, j)) + D(k - j) + duration + tail(F(stage, k))`` over ``j <= k``
    (``ht``: heads and tails of every FIFO schedule, e.g. with the implied orders)."""
    head, tail = ht
    heads = [head[Action(Kind.F, stage, i)] for i in range(inst.m)]
    tails = [tail[Action(Kind.F, stage, i)] for i in range(inst.m)]
    d = compose(spans, inst.m - 1)
    return max(max(heads[j] + d[k - j] for j in range(k + 1)) + duration + tails[k]
               for k in range(inst.m))


def _budget(time_limit: float | None) -> Callable[[], float | None]:
    """Seconds left of ``time_limit`` (None: no limit) from now, as a function."""
    t0 = time.perf_counter()
    return lambda: None if time_limit is None else time_limit - (time.perf_counter() - t0)


def span_bound(inst: Instance, ht: HeadsTails, duration: Callable[[Action], int],
               lower: int, upper: int, *, time_limit: float | None = None,
               deterministic_time: float = SPAN_DETERMINISTIC_TIME, workers: int = 1,
               stopped: Callable[[], bool] = lambda: False,
               on_solver: Callable[[cp_model.CpSolver], None] | None = None) -> SpanBound:
    """The span bound (module docstring) from ``lower`` against ``upper`` (ticks):
    ``Δ_1, Δ_2, …`` for the :func:`marker` while the small model stays within
    :data:`MAX_SPAN_ACTIONS`, fewer than :data:`MAX_MISSES` in a row were left unsolved,
    time is left and ``stopped()`` is false.

    Args:
        ht: heads and tails of every FIFO schedule (ticks, per action).
        duration: an action's duration (ticks).
        time_limit: wall seconds for all of it; None: ``deterministic_time`` per model
            instead (reproducible with one worker).
        workers: CP-SAT workers per small model (p = 8 loop v = 4, three microbatches:
            unsolved in 60 s with two, solved in 9 s with eight).
    """
    t0, left = time.perf_counter(), _budget(time_limit)
    if not applies(inst) or lower >= upper:
        return SpanBound(lower, None, (), (), 0.0)
    per_mb, stage = inst.n_actions // inst.m, marker(inst)
    found: list[tuple[int, bool]] = []
    misses = 0
    while (len(found) + 2) * per_mb <= MAX_SPAN_ACTIONS and len(found) + 1 < inst.m \
            and misses < MAX_MISSES and not stopped():
        rest = left()
        if rest is not None and rest < 0.05:
            break
        found.append(min_span(inst, stage, len(found) + 1, upper, workers=workers,
                              deterministic_time=None if rest is not None else
                              deterministic_time, time_limit=rest,
                              on_solver=on_solver))
        misses = 0 if found[-1][1] else misses + 1
    if not found:
        return SpanBound(lower, None, (), (), time.perf_counter() - t0)
    spans = [v for v, _ in found]
    bound = combine(inst, stage, spans, ht, duration(Action(Kind.F, stage, 0)))
    return SpanBound(max(lower, bound), stage, tuple(spans), tuple(ok for _, ok in found),
                     time.perf_counter() - t0)
