"""V-Half and V-Min (Pipeline Parallelism with Controllable Memory) as per-device orders.

Source: Qi, Wan, Amar, Lin, "Pipeline Parallelism with Controllable Memory", NeurIPS 2024
(arXiv:2405.15362) and the Zero Bubble repository's V-Half/V-Min scheduler
(docs/references.md#controllable-memory).  Re-implemented in cpsched's terms; the tests check
that the orders equal the ones recorded from the authors' code (tests/data/zb/).

Placement ``v``: device ``d`` holds stage ``d`` (chunk 0, the way down) and ``2p - 1 - d``
(chunk 1, the way back up).  A device's timeline is a row of unit *slots*; every microbatch
repeats a *building block* of four slots per device — forward down, forward up, input
gradient up, input gradient down — with period 6 (the stable pattern; V-Half spreads the block
over about ``3p`` slots, V-Min over about ``2p``, which is what bounds the activations alive at
once).  Then, as the authors do:

1. one weight gradient ``W`` goes into each free slot after an ``I`` (oldest ``I`` first);
2. *reorder* (with ``W``): in time order, each warm-up and cool-down item moves to the earliest
   free slot after its dependencies that keeps the device's peak memory (in chunk
   activations, ``W`` releasing one) at most the pattern's peak; steady-state items stay;
3. *squeeze*: every item starts as early as the device order allows with unit durations;
4. the ``W`` are dropped and the cool-down reordered again (now a ``W`` is assumed in every
   free slot after an ``I``), then squeezed;
5. the ``W`` are placed again, one per free slot, those of the up chunk first.

The device order is its items by slot.  Costs and latency play no part in the order (the
authors' code uses them only to time the result), so the orders depend on ``p`` and ``m``
only.  Peak memory (activation 1 per stage, all released by ``W``): at most
``2 * ((p + 2) // 2)`` stage activations for V-Half and ``2 * ((p + 4) // 3)`` for V-Min —
the paper's ``(p + 2) / 2`` and ``(p + 4) / 3`` microbatches (a microbatch holds two stage
activations on a device), against ``p`` for 1F1B.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import NoReturn

from cpsched.actions import Action, DeviceOrders, Kind, Step, fuse_backwards
from cpsched.instance import Instance
from cpsched.schedules.registry import register

#: Slots per microbatch in the stable pattern.
PERIOD = 6

# Item types of a device's lanes (the authors' ``F f B b W``): forward of the down chunk,
# forward of the up chunk, input gradient of the up chunk, input gradient of the down chunk,
# weight gradient (of either chunk, in the order of the input gradients; split at the end
# into the up chunk's and the down chunk's).
F_DOWN, F_UP, I_UP, I_DOWN, W_ANY = 0, 1, 2, 3, 4
W_UP, W_DOWN = 4, 5

#: Lanes[d][t][i]: slot of device d's item of type t for microbatch i.
Lanes = list[list[list[int]]]


class ReferenceFailure(RuntimeError):
    """The authors' procedure would fail here (a dependency placed after its user)."""


# ------------------------------------------------------------------- pattern


def stable_pattern(p: int, variant: str) -> list[list[int]]:
    """First-microbatch slots ``[F_DOWN, F_UP, I_UP, I_DOWN]`` per device.

    V-Half: ``2d, 3p - d - 2, 3p + g + 2d - 1, 6p + g - d - 2`` with gap ``g = 3`` for even
    ``p`` (else 0); V-Min: ``d, 2p - d - 1, 2p + g + d, 4p + g - d - 1`` with ``g = 2`` when
    ``3 | p`` (else 0).
    """
    if variant == "half":
        g = 3 if p % 2 == 0 else 0
        return [[2 * d, 3 * p - d - 2, 3 * p + g + 2 * d - 1, 6 * p + g - d - 2]
                for d in range(p)]
    g = 2 if p % 3 == 0 else 0
    return [[d, 2 * p - d - 1, 2 * p + g + d, 4 * p + g - d - 1] for d in range(p)]


def _cells(lanes: list[list[int]]) -> list[int]:
    """Type of the item in each slot up to the last one (-1: free)."""
    bound = max(lane[-1] for lane in lanes)
    cells = [-1] * (bound + 1)
    for t, lane in enumerate(lanes):
        for s in lane:
            cells[s] = t
    return cells


def place_weights(lanes: list[list[int]], split: bool) -> list[list[int]]:
    """The device's four lanes plus its ``W`` lane(s): each free slot takes one pending
    ``W`` (one per ``I`` already run; with ``split``, the up chunk's before the down chunk's),
    the rest go right after the last item."""
    out = [list(lane) for lane in lanes[:4]] + [[] for _ in range(2 if split else 1)]
    pending = [0, 0]
    cells = _cells(lanes[:4])
    for s, t in enumerate(cells):
        if t >= 0:
            if t in (I_UP, I_DOWN):
                pending[t - I_UP if split else 0] += 1
            continue
        w = 0 if pending[0] else (1 if pending[1] else -1)
        if w >= 0:
            out[4 + w].append(s)
            pending[w] -= 1
    s = len(cells) - 1
    for w in (0, 1):
        for _ in range(pending[w]):
            s += 1
            out[4 + w].append(s)
    return out


def running_memory(cells: list[int], has_w: bool) -> list[int]:
    """Activations held by the device after each slot (chunk units) as the authors count
    them: each forward holds one, each ``W`` frees one; without a ``W`` lane a ``W`` is
    assumed in every free slot while some ``I`` has no ``W`` yet."""
    cur = pending = 0
    out = []
    for t in cells:
        if t in (F_DOWN, F_UP):
            cur += 1
        elif t == W_ANY:
            cur -= 1
        elif t >= 0:
            pending += 1
        elif pending and not has_w:
            cur -= 1
            pending -= 1
        out.append(cur)
    return out


def peak_memory(lanes: list[list[int]]) -> int:
    """Peak of :func:`running_memory` (at least 0) for a device's lanes (with a ``W`` lane
    when there are five)."""
    return max(0, *running_memory(_cells(lanes), len(lanes) > 4))


def _peak_without_w(cells: list[int]) -> int:
    """:func:`peak_memory` of a device without a ``W`` lane, from its cells (hot loop)."""
    cur = peak = pending = 0
    for t in cells:
        if t in (F_DOWN, F_UP):
            cur += 1
            if cur > peak:
                peak = cur
        elif t >= 0:
            pending += 1
        elif pending:
            cur -= 1
            pending -= 1
    return peak


# ------------------------------------------------------------ reorder, squeeze


def _earliest(lanes: Lanes, d: int, t: int, i: int) -> int:
    """First slot item ``(d, t, i)`` may take: after its predecessors' current slots."""
    p = len(lanes)
    dep = -1
    if t in (F_DOWN, I_UP) and d > 0:
        dep = max(dep, lanes[d - 1][t][i])
    if t in (F_UP, I_DOWN) and d < p - 1:
        dep = max(dep, lanes[d + 1][t][i])
    if 0 < t < W_ANY:
        dep = max(dep, lanes[d][t - 1][i])
    if t == W_ANY:
        dep = max(dep, sorted(lanes[d][I_UP] + lanes[d][I_DOWN])[i])
    if i > 0:
        dep = max(dep, lanes[d][t][i - 1])
    return dep + 1


def _items(lanes: Lanes) -> list[tuple[int, int, int, int]]:
    """Every item as ``(slot, device, type, microbatch)``, in the authors' scan order."""
    return sorted((s, d, t, i) for d, dev in enumerate(lanes) for t, lane in enumerate(dev)
                  for i, s in enumerate(lane))


def reorder(lanes: Lanes, with_w: bool) -> Lanes:
    """The authors' greedy reorder, then a squeeze (see the module docstring, steps 2-4).

    Items are visited in slot order.  Warm-up (until device 0 runs its first ``I_DOWN``) is
    reordered only ``with_w``; the steady phase (until some device runs its last ``F_DOWN``)
    never; the cool-down always.  A moved item takes the earliest free slot (not used by an
    item already visited) from its dependencies on, before its current slot, that keeps the
    device's peak within the starting peak of the busiest device; else it stays.
    """
    lanes = [place_weights(dev, split=False) if with_w else [list(x) for x in dev]
             for dev in lanes]
    cap = max(peak_memory(dev) for dev in lanes)
    cells = [_cells(dev) for dev in lanes]
    held = [running_memory(c, True) for c in cells] if with_w else []
    m = len(lanes[0][0])
    used: list[set[int]] = [set() for _ in lanes]
    phase = 0
    for s, d, t, i in _items(lanes):
        if phase == 0 and t == I_DOWN and d == 0:
            phase = 1
        if phase == 1:
            if t == F_DOWN and i == m - 1:
                phase = 2
            used[d].add(s)
            continue
        if phase == 0 and not with_w:
            used[d].add(s)
            continue
        start = _earliest(lanes, d, t, i)
        if start > s:
            raise ReferenceFailure(f"item {(d, t, i)} after its dependencies")
        new = _first_fit(cells[d], held[d] if with_w else None, range(start, s), used[d], t,
                         cap)
        if new < 0:
            new = s
        lanes[d][t][i] = new
        cells[d][s] = -1
        cells[d][new] = t
        used[d].add(new)
        if with_w and t in (F_DOWN, F_UP, W_ANY):
            step = -1 if t == W_ANY else 1
            for x in range(new, s):
                held[d][x] += step
    if not with_w:
        lanes = [place_weights(dev, split=False) for dev in lanes]
    return squeeze(lanes)


def _first_fit(cells: list[int], held: list[int] | None, slots: range, used: set[int],
               t: int, cap: int) -> int:
    """The first slot in ``slots`` not in ``used`` where the item of type ``t`` keeps the
    device's peak within ``cap``, or -1.  ``cells`` is the device with the item in its
    current slot ``slots.stop``; ``held`` its :func:`running_memory` with the ``W`` lane.

    With the ``W`` lane, an ``I`` holds nothing and an earlier ``W`` frees sooner, so only a
    forward can raise the peak, by one over the slots it moves across (and the device is
    within ``cap`` before the move).  Without it, the assumed ``W`` shift: recount.
    """
    free = [c for c in slots if c not in used]
    if not free:
        return -1
    if held is not None:
        if t not in (F_DOWN, F_UP):
            return free[0]
        most, ok = 0, -1
        for c in range(slots.stop - 1, free[0] - 1, -1):
            most = max(most, held[c])
            if most + 1 <= cap and c not in used:
                ok = c
            elif most + 1 > cap:
                break
        return ok
    s = slots.stop
    cells[s] = -1
    try:
        for c in free:
            cells[c] = t
            ok = _peak_without_w(cells) <= cap
            cells[c] = -1
            if ok:
                return c
        return -1
    finally:
        cells[s] = t


def squeeze(lanes: Lanes) -> Lanes:
    """Start every item as early as its device order (by slot) and its dependencies allow,
    all durations 1 (the authors' "squeeze"); returns the start slots.

    Raises:
        ReferenceFailure: a dependency comes later in the scan (the authors' code fails).
    """
    p = len(lanes)
    end = [[[0] * len(lane) for lane in dev] for dev in lanes]  # 0: not placed yet
    last = [0] * p
    for _, d, t, i in _items(lanes):
        ready = last[d]  # covers the same lane's previous microbatch
        if t in (F_DOWN, I_UP) and d > 0:
            ready = max(ready, end[d - 1][t][i] or _missing(d - 1, t, i))
        elif t in (F_UP, I_DOWN) and d < p - 1:
            ready = max(ready, end[d + 1][t][i] or _missing(d + 1, t, i))
        if 0 < t < W_ANY and not end[d][t - 1][i]:
            _missing(d, t - 1, i)
        end[d][t][i] = last[d] = ready + 1
    return [[[x - 1 for x in lane] for lane in dev] for dev in end]


def _missing(d: int, t: int, i: int) -> NoReturn:
    raise ReferenceFailure(f"item {(d, t, i)} is needed before it is placed")


# -------------------------------------------------------------- the schedules


def controllable_lanes(p: int, m: int, variant: str) -> Lanes:
    """Final slots per device: pattern, reorder with ``W``, reorder without, split ``W``
    lanes ``[F_DOWN, F_UP, I_UP, I_DOWN, W_UP, W_DOWN]`` (module docstring, steps 1-5).

    Raises:
        ReferenceFailure: the authors' procedure would fail (not seen for p <= 16, m <= 64).
    """
    lanes = [[list(range(x, x + PERIOD * m, PERIOD)) for x in dev]
             for dev in stable_pattern(p, variant)]
    lanes = [dev[:4] for dev in reorder(lanes, with_w=True)]
    lanes = [dev[:4] for dev in reorder(lanes, with_w=False)]
    return [place_weights(dev, split=True) for dev in lanes]


@lru_cache(maxsize=32)
def _device_items(p: int, m: int, variant: str) -> tuple[tuple[tuple[int, int, int], ...], ...]:
    """Each device's ``(slot, type, microbatch)`` in slot order (cached: ``solve`` and
    ``compare`` ask for the same orders repeatedly)."""
    return tuple(tuple(sorted((s, t, i) for t, lane in enumerate(dev)
                              for i, s in enumerate(lane)))
                 for dev in controllable_lanes(p, m, variant))


def controllable_orders(p: int, m: int, variant: str) -> DeviceOrders:
    """Per-device orders of V-Half (``variant = "half"``) or V-Min (``"min"``): each
    device's items by slot, in cpsched's stages (``d`` down, ``2p - 1 - d`` up)."""
    orders: DeviceOrders = []
    for d, items in enumerate(_device_items(p, m, variant)):
        up = 2 * p - 1 - d
        what = {F_DOWN: (Kind.F, d), F_UP: (Kind.F, up), I_UP: (Kind.I, up),
                I_DOWN: (Kind.I, d), W_UP: (Kind.W, up), W_DOWN: (Kind.W, d)}
        ops: list[Step] = [Action(what[t][0], what[t][1], i) for _, t, i in items]
        orders.append(ops)
    return orders


def _check(name: str) -> Callable[[Instance], str | None]:
    def check(inst: Instance) -> str | None:
        if inst.placement != "v":
            return (f'pipeline.placement = "{inst.placement}": {name} needs "v" '
                    "(stages_per_device = 2, device d holds stages d and 2p - 1 - d)")
        return None

    return check


_PRE = ('placement "v" (stages_per_device = 2); any devices, microbatches (a fused backward '
        "runs B for I and no W)")


@register("v-half", summary="V-Half: V schedule with about half of 1F1B's activation memory",
          preconditions=_PRE,
          source="Qi et al. 2024, Pipeline Parallelism with Controllable Memory "
                 "(arXiv:2405.15362), V-Half; docs/references.md#controllable-memory",
          check=_check("v-half"))
def v_half(inst: Instance) -> DeviceOrders:
    """V-Half: the authors' V-Half scheduler, order for order.

    Source: docs/references.md#controllable-memory (NeurIPS 2024, V-Half; the Zero Bubble
    repository's stable pattern, ``put_w`` and greedy reorder).  Peak memory at most
    ``(p + 2) // 2`` microbatches of a device's activations; the order depends on ``p`` and
    ``m`` only.  With a fused backward every ``I`` runs as ``B`` and no ``W`` runs
    (:func:`~cpsched.actions.fuse_backwards`; the peak is then no higher).
    """
    orders = controllable_orders(inst.p, inst.m, "half")
    return orders if inst.split_backward else fuse_backwards(orders)


@register("v-min", summary="V-Min: V schedule with about a third of 1F1B's activation memory",
          preconditions=_PRE,
          source="Qi et al. 2024, Pipeline Parallelism with Controllable Memory "
                 "(arXiv:2405.15362), V-Min; docs/references.md#controllable-memory",
          check=_check("v-min"))
def v_min(inst: Instance) -> DeviceOrders:
    """V-Min: the authors' V-Min scheduler, order for order.

    Source: docs/references.md#controllable-memory (NeurIPS 2024, V-Min).  Peak memory at
    most ``(p + 4) // 3`` microbatches of a device's activations; the order depends on ``p``
    and ``m`` only.  With a fused backward every ``I`` runs as ``B`` and no ``W`` runs
    (:func:`~cpsched.actions.fuse_backwards`; the peak is then no higher).
    """
    orders = controllable_orders(inst.p, inst.m, "min")
    return orders if inst.split_backward else fuse_backwards(orders)
