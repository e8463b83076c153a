"""GPipe, 1F1B and interleaved 1F1B as per-rank orders (fused ``B`` backwards).

Every generator here returns :data:`~cpsched.model.DeviceOrders`: ``orders[r]`` is rank r's
compute actions in execution order, in PyTorch's terms (``2F0`` = forward of stage 2 for
microbatch 0).  Idle slots (PyTorch's ``None`` padding) are not part of an order: the one
simulator (:func:`cpsched.simulate.simulate`) starts every action as soon as its device and
its predecessors allow.

All these schedules use a fused ``B`` per (stage, microbatch), so they also run on
``split_backward = true`` instances (docs/spec.md §1: a fused ``B`` lasts ``I + W`` there).

The interleaved "1F1B family" core (:func:`one_f_one_b_family_rank`) is shared with the
interleaved zero-bubble schedule of :mod:`cpsched.schedules.torch_family`.
"""

from __future__ import annotations

from cpsched.instance import Instance
from cpsched.model import Action, DeviceOrders, Kind, Step
from cpsched.schedules.registry import NotApplicable, register

# --------------------------------------------------------------------- checks


def need_loop(inst: Instance, name: str) -> str | None:
    """Reason ``name`` does not apply unless the placement is ``loop`` (stage s on s % p)."""
    if inst.placement != "loop":
        return (f'pipeline.placement = "{inst.placement}": {name} needs "loop" '
                "(stage s on device s % p)")
    return None


def need_single_stage(inst: Instance, name: str) -> str | None:
    """Reason ``name`` does not apply unless the placement is ``loop`` with one stage per
    device."""
    why = need_loop(inst, name)
    if why:
        return why
    if inst.v != 1:
        return f"pipeline.stages_per_device = {inst.v}: {name} needs 1"
    return None


def pytorch_rounds(p: int, m: int) -> tuple[int, int]:
    """PyTorch's interleaving rounds: ``(rounds, microbatches_per_round)`` with
    ``rounds = max(1, m // p)`` and ``microbatches_per_round = m // rounds``."""
    rounds = max(1, m // p)
    return rounds, m // rounds


def need_rounds_divide(inst: Instance, name: str) -> str | None:
    """Reason ``name`` (PyTorch's rounds rule) does not apply: placement ``loop`` and ``m`` a
    multiple of ``rounds = max(1, m // p)``."""
    why = need_loop(inst, name)
    if why:
        return why
    p, m = inst.p, inst.m
    rounds, _ = pytorch_rounds(p, m)
    if m % rounds:

        def ok(x: int) -> bool:
            return x % pytorch_rounds(p, x)[0] == 0

        below = next(x for x in range(m - 1, 0, -1) if ok(x))
        above = next(x for x in range(m + 1, 2 * m + 2) if ok(x))
        return (f"pipeline.microbatches = {m}: {name} needs a multiple of the number of "
                f"rounds max(1, microbatches // devices) = {rounds} "
                f"(nearest that work: {below} or {above})")
    return None


# ---------------------------------------------------------------- shared core


def chunk_table(m: int, v: int, group: int) -> list[tuple[int, int]]:
    """Megatron's schedule table: the ``(microbatch, chunk)`` of each of a rank's ``m * v``
    forward steps.

    Microbatches go in consecutive groups of ``group`` (the last one holds the remainder
    ``m % group`` when it is not 0); each group runs through chunk 0, then chunk 1, ..., then
    the next group starts.  With ``group = microbatches_per_round`` and ``m`` a multiple of it
    this is PyTorch's rounds rule (the stage changes every ``microbatches_per_round`` steps).
    """
    table: list[tuple[int, int]] = []
    lo = 0
    while lo < m:
        hi = m if lo + group >= m else lo + group
        table += [(i, c) for c in range(v) for i in range(lo, hi)]
        lo = hi
    return table


def one_f_one_b_family_rank(p: int, v: int, m: int, rank: int, warmup: int,
                            table: list[tuple[int, int]],
                            weight_lag: int | None = None) -> list[Step]:
    """One rank's order in the interleaved 1F1B family (Megatron / PyTorch).

    Forward step ``k`` (``0 <= k < m v``) runs ``F`` of chunk ``table[k][1]`` (stage
    ``chunk * p + rank``) for microbatch ``table[k][0]``; backward step ``j`` runs the backward
    of chunk ``v - 1 - table[j][1]`` for microbatch ``table[j][0]``.

    * warm-up: forward steps ``0 .. warmup-1``;
    * steady: ``m v - warmup`` pairs (forward ``k``, backward ``k - warmup``);
    * cool-down: the ``warmup`` remaining backwards.

    With ``weight_lag = None`` every backward is a fused ``B``.  With ``weight_lag = L`` each
    backward is an ``I`` and backward ``j``'s ``W`` runs right after the ``I`` of backward
    ``j + L`` (zero bubble: the W's fill the cool-down), the last ``L`` W's at the end.
    """
    n = m * v

    def stage(chunk: int) -> int:
        return chunk * p + rank

    def backward(j: int) -> Action:
        mb, chunk = table[j]
        kind = Kind.B if weight_lag is None else Kind.I
        return Action(kind, stage(v - 1 - chunk), mb)

    def weight(j: int) -> Action:
        mb, chunk = table[j]
        return Action(Kind.W, stage(v - 1 - chunk), mb)

    ops: list[Step] = []
    for k in range(n + warmup):
        if k < n:
            mb, chunk = table[k]
            ops.append(Action(Kind.F, stage(chunk), mb))
        j = k - warmup
        if j >= 0:
            ops.append(backward(j))
            if weight_lag is not None and j >= weight_lag:
                ops.append(weight(j - weight_lag))
    if weight_lag is not None:
        ops += [weight(j) for j in range(max(0, n - weight_lag), n)]
    return ops


# -------------------------------------------------------------------- GPipe


@register("gpipe", summary="all forwards, then all backwards (AFAB / fill-drain)",
          preconditions='placement "loop"; any devices, stages_per_device, microbatches',
          source="GPipe, Huang et al. 2019 (arXiv:1811.06965); PyTorch ScheduleGPipe",
          check=lambda inst: need_loop(inst, "gpipe"))
def gpipe(inst: Instance) -> DeviceOrders:
    """GPipe (fill-drain, "all forward all backward").

    Source: GPipe, Huang et al. 2019, arXiv:1811.06965; PyTorch
    ``torch.distributed.pipelining.ScheduleGPipe`` (identical orders for ``v = 1``).

    Rank r, ``v = 1``: warm-up ``m`` forwards ``F0 .. F(m-1)``, no steady phase, cool-down
    ``m`` backwards ``B0 .. B(m-1)``.

    ``v > 1`` (PyTorch's GPipe is single-stage; this is cpsched's choice): still all forwards
    then all backwards, breadth-first over the rank's stages: forwards of its first stage for
    every microbatch, then its next stage, ...; backwards from its last stage down, each stage
    in microbatch order (FIFO, as GPipe).  That is PyTorch's looped BFS with FIFO instead of
    LIFO backwards; with ``m >= p`` no rank waits between its forwards.
    """
    p, v, m = inst.p, inst.v, inst.m
    orders: DeviceOrders = []
    for r in range(p):
        stages = [c * p + r for c in range(v)]
        ops: list[Step] = [Action(Kind.F, s, i) for s in stages for i in range(m)]
        ops += [Action(Kind.B, s, i) for s in reversed(stages) for i in range(m)]
        orders.append(ops)
    return orders


# --------------------------------------------------------------------- 1F1B


@register("1f1b", summary="one-forward-one-backward (PipeDream-Flush)",
          preconditions='placement "loop", stages_per_device = 1; any microbatches '
                        "(PyTorch itself wants microbatches >= devices)",
          source="PipeDream-Flush, Narayanan et al. 2021 (arXiv:2006.09503); "
                 "PyTorch Schedule1F1B",
          check=lambda inst: need_single_stage(inst, "1f1b"))
def one_f_one_b(inst: Instance) -> DeviceOrders:
    """1F1B (PipeDream-Flush): at most ``p - r`` microbatches in flight on rank r.

    Source: PipeDream-Flush, Narayanan et al. 2021, arXiv:2006.09503; PyTorch
    ``torch.distributed.pipelining.Schedule1F1B``.

    Rank r: warm-up ``w = min(p - r - 1, m)`` forwards ``F0 .. F(w-1)``; steady ``m - w``
    pairs ``F(w + k), B(k)``; cool-down ``w`` backwards ``B(m-w) .. B(m-1)``.

    Equals PyTorch 2.13's order on every rank but the last, where PyTorch emits
    ``F1 .. Fm`` instead of ``F0 .. F(m-1)`` (off by one, docs/modelling.md §10).  PyTorch also
    rejects ``m < p``; the rule above is valid there too (the warm-up is capped at ``m``).
    """
    p, m = inst.p, inst.m
    orders: DeviceOrders = []
    for r in range(p):
        warm = min(p - r - 1, m)
        ops: list[Step] = [Action(Kind.F, r, i) for i in range(warm)]
        for k in range(m - warm):
            ops += [Action(Kind.F, r, warm + k), Action(Kind.B, r, k)]
        ops += [Action(Kind.B, r, i) for i in range(m - warm, m)]
        orders.append(ops)
    return orders


# --------------------------------------------------------- interleaved 1F1B


@register("interleaved-1f1b",
          summary="interleaved 1F1B, depth-first over v chunks (Megatron-LM / PyTorch)",
          preconditions='placement "loop"; microbatches a multiple of '
                        "max(1, microbatches // devices)",
          source="Megatron-LM interleaved schedule, Narayanan et al. 2021 (arXiv:2104.04473); "
                 "PyTorch ScheduleInterleaved1F1B",
          check=lambda inst: need_rounds_divide(inst, "interleaved-1f1b"))
def interleaved_1f1b(inst: Instance, *,
                     microbatch_group_size_per_vp_stage: int | None = None) -> DeviceOrders:
    """Interleaved 1F1B (Megatron-LM "virtual pipeline"), PyTorch's rounds rule by default.

    Source: Narayanan et al. 2021, arXiv:2104.04473 (Megatron-LM
    ``forward_backward_pipelining_with_interleaving``); PyTorch
    ``torch.distributed.pipelining.ScheduleInterleaved1F1B`` (identical orders by default).

    Microbatches go in groups of ``g``; a group runs chunk 0, then chunk 1, ... on each rank
    (see :func:`chunk_table`).  Default ``g`` = PyTorch's ``microbatches_per_round =
    m // max(1, m // p)`` (needs ``m`` a multiple of the rounds; checked up front).

    Rank r: warm-up ``w_r = min((v - 1) g + 2 (p - 1 - r), m v)`` forwards; steady
    ``m v - w_r`` (F, B) pairs; cool-down ``w_r`` backwards.

    Args:
        microbatch_group_size_per_vp_stage: Megatron's ``g`` (Megatron's default is ``p``).
            Accepted as Megatron accepts it, ``p <= g <= m`` with ``m % g`` either 0 or
            ``>= p``, and also ``g = m`` (one group: PyTorch's choice when ``m < p``) and any
            ``1 <= g <= m`` when ``v = 1`` (``g`` is then irrelevant).  Other values can
            deadlock (e.g. ``p = 3, v = 2, g = 1``).

    Raises:
        NotApplicable: placement not ``loop``; default ``g`` with ``m`` not a multiple of the
            rounds; ``g`` outside the accepted values.
    """
    p, v, m = inst.p, inst.v, inst.m
    g = microbatch_group_size_per_vp_stage
    if g is None:
        why = need_rounds_divide(inst, "interleaved-1f1b")
        if why:
            raise NotApplicable(f"interleaved-1f1b: {why}")
        g = pytorch_rounds(p, m)[1]
    else:
        why = need_loop(inst, "interleaved-1f1b")
        if why:
            raise NotApplicable(f"interleaved-1f1b: {why}")
        why = _group_size_problem(p, v, m, g)
        if why:
            raise NotApplicable(f"interleaved-1f1b: microbatch_group_size_per_vp_stage = {g!r}: "
                                + why)
    table = chunk_table(m, v, g)
    return [one_f_one_b_family_rank(p, v, m, r, min((v - 1) * g + 2 * (p - 1 - r), m * v),
                                    table)
            for r in range(p)]


def _group_size_problem(p: int, v: int, m: int, g: object) -> str | None:
    """Why Megatron's group size ``g`` is not accepted (None if it is); see
    :func:`interleaved_1f1b`."""
    if isinstance(g, bool) or not isinstance(g, int) or not 1 <= g <= m:
        return f"needs an integer in 1 .. microbatches = {m}"
    if v == 1 or g == m:
        return None
    if g < p:
        return (f"needs >= devices = {p} (or = microbatches = {m}); smaller groups can "
                "deadlock")
    if 0 < m % g < p:
        return (f"leaves a last group of microbatches % g = {m % g} < devices = {p} "
                "(Megatron's rule); pick g dividing the microbatches or leaving >= devices")
    return None
