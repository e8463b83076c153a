"""The gate bound: a device's fill and drain under another device's memory (docs/modelling.md §26).

On a device ``g`` that holds several stages, a microbatch holds *all* of them from the start
of ``F(u)`` — ``u`` the last of ``g``'s stages on the way down — to the end of the backward
``R(u)`` (``B`` or ``I``): its *core* there.  So at most ``k = floor(limit / A)`` microbatches
are in their core at once (``A`` the sum of ``g``'s stage activations), and each core lasts at
least the chain ``c`` from ``F(u)`` to the end of ``R(u)``.  Cores that start within ``c`` of
each other all contain one instant, so at most ``k * ceil(L / c)`` start in a span of length
``L``; the same holds for the cores that end in it.

The turn device of V placement is such a gate: every microbatch passes its stages ``p - 1``
and ``p`` back to back, and holds both for the whole round trip beyond.  During the fill the
first device can run only its first-stage forwards (as many as its own limit holds) and the
work of the few microbatches that have passed the gate; during the drain only the backward
work of the microbatches it still holds and the work of the few that have yet to pass back.
The per-device fill/drain bound (:func:`cpsched.bounds.fill_drain_bound`) sees the first
limit but not the gate: on p16-v-m128-vmin-profiled it counts about 18.5 idle in the fill and
11.3 in the drain; the schedules found idle 31.4 and 23.7 there, and this bound proves 30.4
and 23.5.

Applies to loop and V placement with a memory limit and no overlap cost (0 otherwise).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from cpsched.actions import Action, Kind
from cpsched.bounds import fractional_knapsack
from cpsched.instance import Instance
from cpsched.rules import chain_heads_tails, default_kinds, duration

_EPS = 1e-9
#: Gates tried per device: the ones whose cores are longest per microbatch they admit.
TOP_GATES = 4


@dataclass(frozen=True)
class Gate:
    """Device ``device``'s core: at most ``k`` microbatches at once, each at least ``length``
    ticks, starting at the earliest at ``first_start`` (the head of ``F(last)``); ``last`` is
    the device's last stage on the way down."""

    device: int
    last: int
    k: int
    length: int
    first_start: int


@dataclass(frozen=True)
class Item:
    """One action of the target device (kind, stage), the same for every microbatch."""

    kind: Kind
    stage: int
    ticks: int
    head: int
    tail: int


def applies(inst: Instance) -> bool:
    """Loop or V placement, a memory limit, no overlap cost, at least two microbatches."""
    return (inst.memory_limit is not None and inst.overlap_forward_backward is None
            and inst.placement != "bidirectional" and inst.m > 1)


def _pieces(span: float, length: int) -> int:
    """How many spans of ``length`` cover ``span`` (0 for an empty span)."""
    return 0 if span <= 0 else math.ceil(span / length - _EPS)


def _position(inst: Instance, kind: Kind, stage: int) -> float:
    """Place of (kind, stage) on the microbatch's chain ``F(0) .. F(S-1), R(S-1) .. R(0)``;
    a ``W`` hangs off its ``I`` (half a step after it, an ancestor of nothing)."""
    S = inst.num_stages
    if kind == Kind.F:
        return stage
    if kind == Kind.W:
        return 2 * S - 1 - stage + 0.5
    return 2 * S - 1 - stage


def gates(inst: Instance, head: dict[Kind, list[int]]) -> list[Gate]:
    """The devices whose core admits fewer than ``m`` microbatches at once, with ``head``
    the chain heads of :func:`cpsched.rules.chain_heads_tails` (ticks)."""
    R = default_kinds(inst)[1]
    limit = float(inst.memory_limit or 0.0)
    out = []
    for g in range(inst.p):
        stages = inst.stages_of(g)
        held = sum(inst.activation[s] for s in stages)
        if held <= _EPS:
            continue
        k = math.floor(limit / held + _EPS)
        u = max(stages)
        length = head[R][u] + duration(inst, Action(R, u, 0)) - head[Kind.F][u]
        if k < inst.m and length > 0:
            out.append(Gate(g, u, k, length, head[Kind.F][u]))
    return out


def device_items(inst: Instance, d: int, head: dict[Kind, list[int]],
                 tail: dict[Kind, list[int]]) -> list[Item]:
    """Device ``d``'s actions of one microbatch with their ticks, heads and tails
    (:func:`cpsched.rules.chain_heads_tails`)."""
    return [Item(k, s, duration(inst, Action(k, s, 0)), head[k][s], tail[k][s])
            for s in inst.stages_of(d) for k in default_kinds(inst)]


def _window_work(inst: Instance, n_gated: int, gated: int, hold: float,
                 units: list[tuple[int, float]]) -> float:
    """Most work (ticks) a window can hold under ``d``'s limit: at most ``n_gated``
    microbatches doing ``gated`` each and holding ``hold`` at least, and any number of
    ``units`` ``(work, memory held)`` of the others (a fractional knapsack: an upper bound)."""
    items = [(float(gated), hold, n_gated)] + [(float(w), a, inst.m) for w, a in units]
    return fractional_knapsack(items, float(inst.memory_limit or 0.0))


def fill_idle(inst: Instance, d: int, gate: Gate, items: list[Item],
              head: dict[Kind, list[int]]) -> int:
    """Least idle (ticks) of device ``d`` in ``[t0, X]`` for some ``X`` before its first
    release can end (docs/modelling.md §26, fill).  Every microbatch with work there holds its
    first stage's activation at ``X``; the work of a microbatch after ``F(gate.last)``
    (``gated``) can start before ``X`` only if its core started before ``X - lag``."""
    t0 = min(it.head for it in items)
    first = min(inst.stages_of(d))
    x_max = _first_release(inst, d, items)
    pos_u = _position(inst, Kind.F, gate.last)
    gated = [it for it in items if _position(inst, it.kind, it.stage) >= pos_u]
    if not gated:
        return 0
    lag = min(it.head - head[Kind.F][gate.last] for it in gated)
    xs = {x_max} | {it.head for it in items} | {
        gate.first_start + lag + j * gate.length for j in range(1, inst.m + 1)
        if gate.first_start + lag + j * gate.length <= x_max}
    best = 0.0
    for x in sorted(xs):
        if x <= t0 or x > x_max:
            continue
        n = min(inst.m, gate.k * _pieces(x - lag - gate.first_start, gate.length))
        reach = [it for it in items if it.head < x]
        # the others run only forwards before F(last), and release nothing before x
        units = [(it.ticks, inst.activation[it.stage]) for it in reach if it not in gated]
        work = _window_work(inst, n, sum(it.ticks for it in reach), inst.activation[first],
                            units)
        best = max(best, x - t0 - min(x - t0, work))
    return math.floor(best + _EPS)


def _first_release(inst: Instance, d: int, items: list[Item]) -> int:
    """Earliest end (ticks) of an action that gives back memory of ``d``'s first stage."""
    first = min(inst.stages_of(d))
    r = inst.released_by_input
    return min(it.head + it.ticks for it in items if it.stage == first and (
        it.kind in (Kind.B, Kind.W) or (it.kind == Kind.I and r > 0)))


def drain_idle(inst: Instance, d: int, gate: Gate, items: list[Item],
               head: dict[Kind, list[int]], tail: dict[Kind, list[int]]) -> int:
    """Least idle (ticks) of device ``d`` in ``[C - Y, C]`` for some ``Y`` short enough that
    its first-stage forward lies before it (docs/modelling.md §26, drain).  Every microbatch
    with work there holds memory at ``C - Y``; the work of a microbatch before the end of
    ``R(gate.last)`` (``gated``) can end after ``C - Y`` only if its core ends after
    ``C - Y + lag``, and every core ends at least ``tail(R(last))`` before ``C``."""
    first = min(inst.stages_of(d))
    R = default_kinds(inst)[1]
    f_first = next(it for it in items if it.kind == Kind.F and it.stage == first)
    y_max = f_first.tail + f_first.ticks
    pos_r = _position(inst, R, gate.last)
    # a W is an ancestor of nothing: never before R(last)
    gated = [it for it in items
             if it.kind != Kind.W and _position(inst, it.kind, it.stage) <= pos_r]
    if not gated:
        return 0
    end_r = head[R][gate.last] + duration(inst, Action(R, gate.last, 0))
    lag = min(end_r - it.head - it.ticks for it in gated)
    tau = tail[R][gate.last]
    ys = {y_max} | {it.tail for it in items} | {
        lag + tau + j * gate.length for j in range(1, inst.m + 1)
        if lag + tau + j * gate.length <= y_max}
    best = 0.0
    for y in sorted(ys):
        if y <= 0 or y > y_max:
            continue
        n = min(inst.m, gate.k * _pieces(y - lag - tau, gate.length))
        reach = [it for it in items if it.tail < y]
        work = _window_work(inst, n, sum(it.ticks for it in reach), inst.activation[first],
                            _drain_units(inst, reach, gated))
        best = max(best, y - min(y, work))
    return math.floor(best + _EPS)


def _drain_units(inst: Instance, reach: list[Item], gated: list[Item]
                 ) -> list[tuple[int, float]]:
    """The others' work in the drain, per stage: a pending backward with its ``W`` (the
    stage's activation held), or a ``W`` alone (the part it gives back)."""
    r = inst.released_by_input
    units = []
    for s in {it.stage for it in reach}:
        w = sum(it.ticks for it in reach if it.stage == s and it.kind == Kind.W)
        back = [it for it in reach if it.stage == s and it.kind in (Kind.B, Kind.I)
                and it not in gated]
        if back:
            units.append((back[0].ticks + w, inst.activation[s]))
        if w:
            units.append((w, inst.activation[s] * (1 - r)))
    return units


def _device_bound(inst: Instance, d: int, found: Iterable[Gate], head: dict[Kind, list[int]],
                  tail: dict[Kind, list[int]]) -> int:
    """Device ``d``'s start + work + the best fill and drain idle over the gates ``found``."""
    items = device_items(inst, d, head, tail)
    t0 = min(it.head for it in items)
    work = inst.m * sum(it.ticks for it in items)
    fill = drain = 0
    for gate in found:
        fill = max(fill, fill_idle(inst, d, gate, items, head))
        drain = max(drain, drain_idle(inst, d, gate, items, head, tail))
    # the windows [t0, X] and [C - Y, C] are disjoint when X + Y <= t0 + work <= C
    first = min(inst.stages_of(d))
    f_first = next(it for it in items if it.kind == Kind.F and it.stage == first)
    apart = _first_release(inst, d, items) + f_first.tail + f_first.ticks <= t0 + work
    return t0 + work + (fill + drain if apart else max(fill, drain))


def gate_bound(inst: Instance) -> int:
    """Lower bound (ticks) on the makespan: every device's start, work and the fill and drain
    idle another device's memory forces on it (module docstring; docs/modelling.md §26); 0
    where it does not apply (:func:`applies`)."""
    if not applies(inst):
        return 0
    head, tail = chain_heads_tails(inst)
    # the strongest gates hold few microbatches for long (the turn device of V placement,
    # device 0's last chunk on loop): the others rarely add and cost p^2 windows
    found = sorted(gates(inst, head), key=lambda g: (-g.length / g.k, g.device))[:TOP_GATES]
    if not found:
        return 0
    return max(_device_bound(inst, d, found, head, tail) for d in range(inst.p))


__all__ = ["Gate", "Item", "applies", "device_items", "drain_idle", "fill_idle", "gate_bound",
           "gates"]
