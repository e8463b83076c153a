"""The modulo pattern at a shorter period, found by CP-SAT (docs/modelling.md §41).

The greedy of :mod:`cpsched.schedules.modulo` places one microbatch's actions (one of each
direction under bidirectional placement) without backtracking and scans periods upward from
:func:`~cpsched.schedules.modulo.min_period` until a pattern fits the memory limit.  Where
memory sets the pace, the period it stops at is often well above what a pattern can reach:
the first action placed with a wait lengthens lifespans that the greedy cannot shorten again.

:func:`exact_pattern` asks CP-SAT for a pattern at a given period ``T`` with the same three
conditions (docs/modelling.md §22): every offset ``o(a) = k(a)·T + r(a)`` with the phase
``0 <= r(a) < T``;

- *dependencies*: ``o(a) >= o(b) + duration(b) + lag`` within the pattern's microbatches;
- *no overlap modulo T*: per device one ``NoOverlap`` over the intervals ``[r(a), r(a) + d)``
  and their copies one period later — two intervals on the circle of length ``T`` meet
  exactly when one of those four pairs meets (each ``d <= T``: a device's work per period
  is at most ``T``, or it has no pattern);
- *memory*: a buffer with lifespan ``ℓ = o(release) + duration(release) - o(F) = q·T + ρ``
  (``0 <= ρ < T``) is held by ``q`` microbatches at every phase and by one more on the arc
  ``[r(F), r(F) + ρ)`` of the circle (:func:`~cpsched.schedules.modulo.pattern_peak`'s
  ``ceil((ℓ - age) / T)``); per device ``Σ amount·q`` plus a cumulative over the arcs and
  their copies one period later stays within the limit (every point of the circle is seen
  once in ``[T, 2T)``).

It minimises the pattern's span.  :func:`descend` starts from the greedy pattern that fits
and asks for shorter periods, each hinted with the last pattern found, until one is not
found (infeasible, or not decided within its limit) or the time is up; every pattern found is
timed by the simulator (:func:`~cpsched.schedules.modulo.pattern_orders`, never later than
the timetable) and the shortest schedule is kept.  It is a heuristic: a pattern that is not
found at ``T`` says nothing about schedules that are not periodic (§12).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ortools.sat.python import cp_model

from cpsched.actions import Action
from cpsched.graph import memory_buffers
from cpsched.instance import Instance
from cpsched.model import Schedule
from cpsched.rules import default_kinds, dependencies, duration
from cpsched.schedules.modulo import (
    Pattern,
    min_period,
    no_fused,
    pattern_peak,
    representatives,
    time_pattern,
)
from cpsched.solver.cpsat import solve_model

#: the most actions a pattern may have for :func:`descend` to be worth its time: with 48
#: (p = 12, one microbatch of each direction or one V) CP-SAT found shorter periods within a
#: second or two, with 72 to 384 (p = 16 V-Min, p = 24 loop split, p = 32 V and v = 4) not
#: even 1 % below the greedy's in 2-20 s (docs/modelling.md §41)
MAX_PATTERN_ACTIONS = 64
#: CP-SAT limits per period asked: wall seconds (with a deadline) and deterministic units
#: (without one: reproducible with one worker)
PERIOD_SECONDS, PERIOD_DETERMINISTIC_TIME = 2.0, 3.0


def pattern_actions(inst: Instance) -> list[Action]:
    """Every default action of the pattern's microbatches
    (:func:`~cpsched.schedules.modulo.representatives`), in chain order per microbatch."""
    return [Action(k, s, i) for i in representatives(inst) for k in default_kinds(inst)
            for s in range(inst.num_stages)]


def exact_pattern(inst: Instance, period: int, hint: Pattern | None = None, *,
                  seconds: float | None = None,
                  deterministic_time: float = PERIOD_DETERMINISTIC_TIME, workers: int = 1,
                  on_solver: Callable[[cp_model.CpSolver], None] | None = None,
                  ) -> tuple[Pattern | None, str]:
    """A pattern at ``period`` (ticks) that fits the memory limit, of the shortest span CP-SAT
    finds within its limits (module docstring), hinted with ``hint``'s offsets.

    Args:
        seconds: wall limit (None: only ``deterministic_time`` counts).
        on_solver: called with the ``CpSolver`` before it solves (Ctrl-C stops it).

    Returns:
        ``(pattern or None, CP-SAT status name)``.
    """
    acts = pattern_actions(inst)
    if period <= 0 or any(duration(inst, a) > period for a in acts):
        return None, "INFEASIBLE"
    chain = sum(duration(inst, a) for a in acts)
    # offsets up to every action laid end to end plus two periods (or the hint's span)
    horizon = max(chain, 0 if hint is None else hint.span) + 2 * period
    m = cp_model.CpModel()
    off: dict[Action, Any] = {}
    phase: dict[Action, Any] = {}
    by_dev: dict[int, list[Any]] = {}
    for a in acts:
        off[a] = m.new_int_var(0, horizon, "")
        phase[a] = m.new_int_var(0, period - 1, "")
        m.add(off[a] == m.new_int_var(0, horizon // period, "") * period + phase[a])
        d = duration(inst, a)
        if d > 0:
            by_dev.setdefault(inst.device_of(a.stage, a.microbatch), []).extend(
                m.new_fixed_size_interval_var(phase[a] + shift, d, "") for shift in (0, period))
    for a in acts:
        for b, lag in dependencies(inst, a, no_fused):
            m.add(off[a] >= off[b] + duration(inst, b) + lag)
    for ivs in by_dev.values():
        m.add_no_overlap(ivs)
    pattern_memory(inst, m, off, phase, period, horizon)
    span = m.new_int_var(0, horizon + chain, "")
    for a in acts:
        m.add(span >= off[a] + duration(inst, a))
    m.minimize(span)
    if hint is not None:
        low = min(hint.offsets.values())
        for a in acts:
            if a in hint.offsets:
                m.add_hint(off[a], min(horizon, hint.offsets[a] - low))
    solver = cp_model.CpSolver()
    prm = solver.parameters
    prm.num_workers, prm.catch_sigint_signal = max(1, workers), False
    prm.max_deterministic_time = deterministic_time
    if seconds is not None:
        prm.max_time_in_seconds = max(0.05, seconds)
    if on_solver is not None:
        on_solver(solver)
    code = solve_model(solver, m)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, solver.status_name(code)
    return solved_pattern(inst, period, solver, off), solver.status_name(code)


def solved_pattern(inst: Instance, period: int, solver: cp_model.CpSolver,
                   off: dict[Action, Any]) -> Pattern:
    """The pattern of a solved pattern model: the offsets' values (``off``: action -> its
    offset variable), shifted so the first starts at 0, and their span (ticks)."""
    values = {a: solver.value(v) for a, v in off.items()}
    low = min(values.values())
    offsets = {a: v - low for a, v in values.items()}
    return Pattern(period, offsets, max(o + duration(inst, a) for a, o in offsets.items()))


def pattern_memory(inst: Instance, m: cp_model.CpModel, off: dict[Action, Any],
                   phase: dict[Action, Any], period: int, horizon: int) -> None:
    """The memory condition (module docstring) on every device with a limit, added to ``m``:
    ``off`` and ``phase`` map each buffer's forward to its offset and phase variables
    (ticks, the phase in ``[0, period)``), ``horizon`` bounds every offset."""
    limit, buffers = memory_buffers(inst, representatives(inst))
    if limit is None:
        return
    per_dev: dict[int, tuple[list[Any], list[int], list[Any]]] = {}
    for f, rel, amount in buffers:
        whole = m.new_int_var(0, horizon // period + 1, "")  # q
        rest = m.new_int_var(0, period - 1, "")  # ρ
        m.add(off[rel] + duration(inst, rel) - off[f] == whole * period + rest)
        end = m.new_int_var(0, 2 * period, "")
        m.add(end == phase[f] + rest)
        ivs, amounts, held = per_dev.setdefault(inst.device_of(f.stage, f.microbatch),
                                                ([], [], []))
        for shift in (0, period):
            ivs.append(m.new_interval_var(phase[f] + shift, rest, end + shift, ""))
            amounts.append(amount)
        held.append(amount * whole)
    for ivs, amounts, held in per_dev.values():
        room = m.new_int_var(0, limit, "")
        m.add(room == limit - sum(held))
        m.add_cumulative(ivs, amounts, room)


def descend(inst: Instance, start: Pattern, deadline: float | None = None,
            stop: Callable[[], bool] | None = None, workers: int = 1,
            on_solver: Callable[[cp_model.CpSolver], None] | None = None,
            ) -> tuple[Schedule | None, dict[str, Any]]:
    """Shorter periods than ``start``'s (a pattern that fits the memory limit), each asked
    of :func:`exact_pattern` hinted with the last pattern found: steps of 1 % of
    :func:`~cpsched.schedules.modulo.min_period` that double after a pattern found and halve
    after a period without one (never to a period without one or below the smallest
    period), until a one-step move finds nothing, ``deadline`` (``time.perf_counter()``) comes or
    ``stop()`` is True.

    Returns:
        The shortest timed schedule of the patterns found
        (:func:`~cpsched.schedules.modulo.time_pattern`), None if none was found; and stats:
        ``periods`` asked, the shortest ``period`` found (time units, ``start``'s if none).
    """
    unit = max(1, min_period(inst) // 100)
    best: Schedule | None = None
    last, jump, floor, asked = start, unit, min_period(inst) - 1, 0
    limit = memory_buffers(inst, ())[0]
    while True:
        period = max(last.period - jump, floor + 1)
        left = None if deadline is None else deadline - time.perf_counter()
        if period >= last.period or (left is not None and left < 0.2) or (
                stop is not None and stop()):
            break
        asked += 1
        pat, _ = exact_pattern(
            inst, period, last, seconds=None if left is None else min(PERIOD_SECONDS, left),
            deterministic_time=PERIOD_DETERMINISTIC_TIME, workers=workers, on_solver=on_solver)
        if pat is None or (limit is not None and max(pattern_peak(inst, pat)) > limit):
            if jump == unit:
                break
            floor, jump = period, max(unit, jump // 2)
            continue
        sch = time_pattern(inst, pat)
        if best is None or sch.makespan < best.makespan:
            best = sch
        last, jump = pat, 2 * jump
    return best, {"periods": asked, "period": inst.from_ticks(last.period)}


__all__ = ["MAX_PATTERN_ACTIONS", "descend", "exact_pattern", "pattern_actions",
           "pattern_memory", "solved_pattern"]
