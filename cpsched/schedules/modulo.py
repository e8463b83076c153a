"""Modulo (periodic) schedules: one microbatch's pattern, repeated every ``T`` ticks.

Source: iterative modulo scheduling, the loop-pipelining technique of high-level synthesis
(B. R. Rau, "Iterative modulo scheduling", MICRO-27, 1994; docs/references.md#modulo),
applied to the pipeline as docs/modelling.md §22 describes.

A **pattern** gives each default action of microbatch 0 an offset ``o(a)`` (ticks) such that
its dependencies hold (``o(a) >= o(pred) + duration(pred) + lag``) and, on every device, the
actions' intervals taken *modulo the period* ``T`` do not overlap.  Then the timetable
``start(a, i) = i * T + o(a)`` is a valid schedule without memory limit, and each device's
order sorted by that key can be timed by the simulator (never later than the timetable:
ASAP timing of a feasible order).  A stage's activation of one microbatch is held from
``o(F)`` to the end of its release action, a lifespan ``L``; in the steady state the number
of microbatches holding it at phase ``x`` since its last start is ``ceil((L - x) / T)``, and
:func:`pattern_peak` sums that over a device's buffers at every phase where it can rise.
Since memory depends only on the order, no prefix of the order holds more than that peak.

The pattern is built greedily (no backtracking): actions in chain order (forwards, then the
backward chain, then the weight gradients, or each ``W`` right after its ``I``), each at the
earliest offset after its predecessor where the device is free modulo ``T``; or from the turn
outward (:func:`place_outward`), so that the waits fall near stage 0, where they lengthen
fewer buffers: capped DualPipe p16 m64 238.9 -> 223.8, p32 v4 m64 limit 8 1753.0 -> 1701.2.
:func:`modulo_schedule` tries periods from :func:`min_period` upward and keeps the best
timed schedule whose pattern fits the memory limit.  Where memory, not work, sets the pace
(limits well below interleaved 1F1B's), this beats the list scheduler: p = 16 v = 2 m = 64
limit 24: 2475 against 2515 (docs/modelling.md §22).

With bidirectional placement (DualPipe's) a pattern places one microbatch of each direction
(:func:`representatives`): microbatch ``m/2 + i`` runs at ``i * T`` plus its direction's
offsets.  No registered schedule there is memory-aware (DualPipe holds ``p + 1``
microbatches); before DualPipe ran a fused backward, p = 16 m = 48 F = 1 B = 2 limit 20 went
from the sequential schedule's 2289 to 187 (pattern) and 170 after the window search.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from cpsched.actions import Action, Kind
from cpsched.graph import memory_buffers
from cpsched.instance import Instance
from cpsched.model import Schedule
from cpsched.rules import chain_heads_tails, default_kinds, dependencies, duration
from cpsched.simulate import simulate

#: Periods tried: from :func:`min_period` ``T0`` upward in steps of ``T0 / PERIOD_STEPS``
#: ticks, up to ``MAX_PERIOD * T0``.
PERIOD_STEPS = 100
MAX_PERIOD = 2.0
#: Periods tried after the first one whose pattern fits the memory limit.
EXTRA_PERIODS = 10
#: Patterns timed by the simulator (the best by estimated makespan).
TIMED = 3


@dataclass(frozen=True)
class Pattern:
    """One microbatch's periodic pattern.

    Attributes:
        period: ``T``, ticks between two microbatches' patterns.
        offsets: ``{action of microbatch 0: start offset (ticks)}``, every default action.
        span: ticks from the first start to the last end of the pattern.
    """

    period: int
    offsets: dict[Action, int]
    span: int

    def estimate(self, m: int) -> int:
        """Makespan (ticks) of the timetable ``i * T + o(a)`` for ``m`` microbatches (``i``
        counted within a direction: two microbatches per period with bidirectional
        placement)."""
        per_period = len({a.microbatch for a in self.offsets})
        return (-(-m // per_period) - 1) * self.period + self.span


def no_fused(stage: int, microbatch: int) -> bool:
    """The default action set for :func:`cpsched.rules.dependencies`: no fused ``B`` on a
    split instance (a pattern places the instance's default actions)."""
    return False


def representatives(inst: Instance) -> tuple[int, ...]:
    """The microbatches a pattern places: microbatch 0, and with bidirectional placement
    also ``m // 2``, the first of the other direction (one of each per period)."""
    return (0, inst.m // 2) if inst.placement == "bidirectional" and inst.m > 1 else (0,)


def device_work(inst: Instance) -> list[int]:
    """Ticks of default actions per period (one microbatch, or one of each direction) on
    each device, shape ``(p,)``."""
    work = [0] * inst.p
    for i in representatives(inst):
        for k in default_kinds(inst):
            for s in range(inst.num_stages):
                work[inst.device_of(s, i)] += duration(inst, Action(k, s, i))
    return work


def min_period(inst: Instance) -> int:
    """The smallest period (ticks) any pattern can have: the busiest device's work per
    microbatch, and, under a memory limit, each device's ``sum(amount * L_min) / limit``
    — a buffer lives at least its chain ``L_min`` from the start of ``F`` to the end of its
    release, and the steady state holds ``L / T`` of it on average, at most the limit."""
    period = max(device_work(inst))
    limit, buffers = memory_buffers(inst, representatives(inst))
    if limit:
        # both directions' chains pass the stages in the same order with the same
        # durations and lags: the heads of direction 0 serve both
        head, _ = chain_heads_tails(inst)
        area = [0] * inst.p
        for f, rel, amount in buffers:
            life = head[rel.kind][rel.stage] + duration(inst, rel) - head[Kind.F][f.stage]
            area[inst.device_of(f.stage, f.microbatch)] += amount * life
        period = max(period, -(-max(area) // limit))
    return period


def _pieces(start: int, length: int, period: int) -> list[tuple[int, int]]:
    """``[start, start + length)`` modulo ``period`` as at most two intervals of ``[0, T)``."""
    r = start % period
    if r + length <= period:
        return [(r, r + length)]
    return [(r, period), (0, r + length - period)]


def _earliest(busy: list[tuple[int, int]], period: int, lo: int, length: int) -> int | None:
    """Smallest ``o >= lo`` whose interval modulo ``period`` misses ``busy``; None if none."""
    if length > period:
        return None
    base = lo - lo % period
    starts = {lo} | {base + e + k * period for _, e in busy for k in (0, 1)}
    for o in sorted(x for x in starts if x >= lo):
        if all(b <= s or e <= a for a, b in _pieces(o, length, period) for s, e in busy):
            return o
    return None


def _latest(busy: list[tuple[int, int]], period: int, hi: int, length: int) -> int | None:
    """Largest ``o <= hi`` whose interval modulo ``period`` misses ``busy``; None if none."""
    if length > period:
        return None
    base = hi - hi % period
    ends = {hi} | {base + a - length + k * period for a, _ in busy for k in (-1, 0, 1)}
    for o in sorted((x for x in ends if x <= hi), reverse=True):
        if all(b <= s or e <= a for a, b in _pieces(o, length, period) for s, e in busy):
            return o
    return None


def place_outward(inst: Instance, period: int, w_last: bool = True) -> Pattern | None:
    """The greedy pattern placed from the turn outward: for ``s = S - 1, ..., 0`` the forward
    ``F(s)`` goes to the latest free offset before ``F(s + 1)`` needs it and the backward
    (``B``/``I``) of ``s`` to the earliest after its predecessor; the ``W`` right after its
    ``I``, or after all of them (``w_last``).  A wait at stage ``s`` — before ``F(s + 1)`` or
    after the backward of ``s + 1`` — lengthens the lifespan of every buffer of stages up to
    ``s`` (docs/modelling.md §22), so the stages next to the turn, placed first on empty
    devices, are the costly ones to delay and the cheap ones, near stage 0, take the waits.
    None when an action finds no free room modulo ``period``.
    """
    S, kinds = inst.num_stages, default_kinds(inst)
    busy: list[list[tuple[int, int]]] = [[] for _ in range(inst.p)]
    offsets: dict[Action, int] = {}

    def put(a: Action, o: int | None) -> bool:
        if o is None:
            return False
        offsets[a] = o
        busy[inst.device_of(a.stage, a.microbatch)].extend(
            _pieces(o, duration(inst, a), period))
        return True

    def after(a: Action) -> int:
        return max(offsets[b] + duration(inst, b) + lag
                   for b, lag in dependencies(inst, a, no_fused))

    reps = representatives(inst)
    base = period * (2 * S + 2)  # offsets stay positive; shifted to 0 at the end
    weights: list[Action] = []
    for s in range(S - 1, -1, -1):
        for i in reps:
            f = Action(Kind.F, s, i)
            dev = busy[inst.device_of(s, i)]
            if s == S - 1:
                hi = base
            else:
                nxt = Action(Kind.F, s + 1, i)
                (_, lag), = dependencies(inst, nxt, no_fused)  # F(s) with its lag
                hi = offsets[nxt] - lag - duration(inst, f)
            if not put(f, _latest(dev, period, hi, duration(inst, f))):
                return None
            b = Action(kinds[1], s, i)
            if not put(b, _earliest(dev, period, after(b), duration(inst, b))):
                return None
            if Kind.W in kinds:
                w = Action(Kind.W, s, i)
                if w_last:
                    weights.append(w)
                elif not put(w, _earliest(dev, period, after(w), duration(inst, w))):
                    return None
    for w in weights:
        dev = busy[inst.device_of(w.stage, w.microbatch)]
        if not put(w, _earliest(dev, period, after(w), duration(inst, w))):
            return None
    low = min(offsets.values())
    offsets = {a: o - low for a, o in offsets.items()}
    span = max(o + duration(inst, a) for a, o in offsets.items())
    return Pattern(period, offsets, span)


def place_pattern(inst: Instance, period: int, w_last: bool = True,
                  interleave: bool = True) -> Pattern | None:
    """The greedy pattern at ``period`` (module docstring), or None when an action finds no
    free room on its device modulo ``period``.

    Args:
        w_last: place the weight gradients after the whole backward chain (else each right
            after its input gradient).
        interleave: with bidirectional placement, place the two directions' chains step by
            step, alternately (else one whole chain, then the other).  Alternating shares the
            waits: capped DualPipe p16 m64 259.7 -> 238.9, p16 m48 fused 206 -> 187.
    """
    S, kinds = inst.num_stages, default_kinds(inst)
    chains: list[list[Action]] = []
    for i in representatives(inst):
        back = [Action(kinds[1], s, i) for s in range(S - 1, -1, -1)]
        weights = ([Action(Kind.W, s, i) for s in range(S - 1, -1, -1)]
                   if Kind.W in kinds else [])
        chain = [Action(Kind.F, s, i) for s in range(S)]
        if w_last:
            chain += back + weights
        else:
            chain += [x for pair in zip(back, weights, strict=False) for x in pair] or back
        chains.append(chain)
    # every chain has the same length
    seq = ([a for step in zip(*chains, strict=True) for a in step] if interleave
           else [a for chain in chains for a in chain])
    busy: list[list[tuple[int, int]]] = [[] for _ in range(inst.p)]
    offsets: dict[Action, int] = {}
    span = 0
    for a in seq:
        d = duration(inst, a)
        lo = max((offsets[b] + duration(inst, b) + lag
                  for b, lag in dependencies(inst, a, no_fused)), default=0)
        dev = busy[inst.device_of(a.stage, a.microbatch)]
        o = _earliest(dev, period, lo, d)
        if o is None:
            return None
        offsets[a] = o
        dev.extend(_pieces(o, d, period))
        span = max(span, o + d)
    return Pattern(period, offsets, span)


def pattern_peak(inst: Instance, pattern: Pattern) -> list[int]:
    """Steady-state peak memory of each device under ``pattern``, in the integer units of
    :func:`cpsched.graph.memory_buffers` (zeros without a memory limit), shape ``(p,)``."""
    T = pattern.period
    per_dev: list[list[tuple[int, int, int]]] = [[] for _ in range(inst.p)]
    for f, rel, amount in memory_buffers(inst, representatives(inst))[1]:
        life = pattern.offsets[rel] + duration(inst, rel) - pattern.offsets[f]
        per_dev[inst.device_of(f.stage, f.microbatch)].append(
            (pattern.offsets[f] % T, life, amount))
    peaks = []
    for bufs in per_dev:
        peak = 0
        for x0 in {ph for ph, _, _ in bufs}:
            held = 0
            for ph, life, amount in bufs:
                age = (x0 - ph) % T
                held += amount * max(0, -(-(life - age) // T))
            peak = max(peak, held)
        peaks.append(peak)
    return peaks


def pattern_orders(inst: Instance, pattern: Pattern) -> list[list[Action]]:
    """Each device's actions sorted by ``i * T + o(a)``, shape ``(p, actions on device)``;
    with bidirectional placement ``i`` counts within a direction (microbatch ``m // 2 + i``
    is the other direction's ``i``-th)."""
    reps = representatives(inst)
    ends = [*reps[1:], inst.m]
    keyed: list[list[tuple[int, Action]]] = [[] for _ in range(inst.p)]
    for a, o in pattern.offsets.items():
        first = a.microbatch
        dev = keyed[inst.device_of(a.stage, first)]
        for i in range(first, ends[reps.index(first)]):
            dev.append(((i - first) * pattern.period + o, _chain_rank(inst, a), i,
                        Action(a.kind, a.stage, i)))
    return [[row[-1] for row in sorted(k)] for k in keyed]


def _chain_rank(inst: Instance, a: Action) -> float:
    """Position of ``a`` along its microbatch's chain (forwards by stage, then the backward
    back, each ``W`` after its ``I``): at equal times (actions of no duration) an action
    comes after the ones it depends on."""
    if a.kind == Kind.F:
        return a.stage
    return 2 * inst.num_stages - a.stage + (0.5 if a.kind == Kind.W else 0.0)


def scan_patterns(inst: Instance, deadline: float | None = None,
                  stop: Callable[[], bool] | None = None) -> list[Pattern]:
    """The greedy patterns that fit the memory limit (module docstring), from
    :func:`min_period` upward in steps of 1 % of it, up to :data:`MAX_PERIOD` times it and
    :data:`EXTRA_PERIODS` periods past the first that fits; every variant at every period
    (both chain orders, both directions interleaved or not, both placed from the turn
    outward, :func:`place_outward`).  ``deadline`` (``time.perf_counter()``) and ``stop()``
    end the scan early."""
    limit = memory_buffers(inst, ())[0]
    t0 = min_period(inst)
    variants: list[Callable[[int], Pattern | None]] = [
        partial(place_pattern, inst, w_last=w, interleave=il) for w in (True, False)
        for il in ((True, False) if len(representatives(inst)) > 1 else (True,))]
    variants += [partial(place_outward, inst, w_last=w) for w in (True, False)]
    step = max(1, t0 // PERIOD_STEPS)
    found: list[Pattern] = []
    tried_after = 0
    period = t0
    while period <= MAX_PERIOD * t0 and tried_after <= EXTRA_PERIODS:
        if (deadline is not None and time.perf_counter() >= deadline) or (stop and stop()):
            break
        for place in variants:
            pat = place(period)
            if pat is not None and (limit is None or max(pattern_peak(inst, pat)) <= limit):
                found.append(pat)
        tried_after += bool(found)
        period += step
    return found


def time_pattern(inst: Instance, pattern: Pattern) -> Schedule:
    """``pattern``'s device orders (:func:`pattern_orders`) timed by the simulator, method
    ``"modulo"``, its ``extra`` the ``period`` and the scan's start ``min_period`` (time
    units)."""
    sch = simulate(inst, pattern_orders(inst, pattern), method="modulo")
    sch.extra = {"period": inst.from_ticks(pattern.period),
                 "min_period": inst.from_ticks(min_period(inst))}
    return sch


def modulo_schedule(inst: Instance, deadline: float | None = None,
                    stop: Callable[[], bool] | None = None,
                    found: list[Pattern] | None = None) -> Schedule | None:
    """The best timed modulo schedule whose pattern fits the memory limit (module
    docstring), method ``"modulo"``, its ``extra`` giving the pattern's ``period`` and the
    scan's start ``min_period`` (time units); None when none is found.  It applies to every
    instance: with an overlap cost the pattern runs every action alone (pairs are allowed,
    never required: docs/spec.md §1).

    Args:
        deadline: a ``time.perf_counter()`` value; the period scan stops there.
        stop: polled between periods; True ends the scan (Ctrl-C).
        found: the patterns of :func:`scan_patterns` when already scanned (else it scans).

    Cost: at most ``2 * PERIOD_STEPS`` periods of 4 greedy patterns (6 with bidirectional
    placement: both chain orders, and both placed from the turn outward,
    :func:`place_outward`), each O(actions per microbatch x actions per device), and
    :data:`TIMED` simulations; past ``deadline`` only the best estimate found so far is timed.
    """
    if found is None:
        found = scan_patterns(inst, deadline, stop)
    best: Schedule | None = None
    for k, pat in enumerate(sorted(found, key=lambda x: x.estimate(inst.m))[:TIMED]):
        if k and ((deadline is not None and time.perf_counter() >= deadline)
                  or (stop and stop())):
            break  # the best estimate is always timed
        sch = time_pattern(inst, pat)
        if best is None or sch.makespan < best.makespan:
            best = sch
    return best


__all__ = ["Pattern", "device_work", "min_period", "modulo_schedule",
           "no_fused", "pattern_orders", "pattern_peak", "place_outward", "place_pattern",
           "scan_patterns", "time_pattern"]
