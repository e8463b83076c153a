"""1F1B and interleaved 1F1B with overlapped F&B pairs in the steady phase.

Source: the ``1f1b_overlap`` and ``1f1b_interleave_overlap`` generators of the MIT-licensed
pipeline-schedule visualizer (``ppviz_strategies.py``), which take the idea of overlapping one
forward with one backward of another microbatch on the same rank from DeepSeek-V3's DualPipe
(arXiv:2412.19437) and apply it to 1F1B and to Megatron-LM's interleaved 1F1B (Narayanan et al.
2021, arXiv:2104.04473).  Each steady-phase step is an :class:`~cpsched.model.Overlap` of an
``F`` and a fused ``B``; it lasts ``costs.overlap_forward_backward`` when given, else ``F + B``.
With ``split_backward = true`` the backwards are still fused ``B`` (as in the visualizer).
"""

from __future__ import annotations

from cpsched.instance import Instance
from cpsched.model import Action, DeviceOrders, Kind, Overlap, Step
from cpsched.schedules.registry import register


def _overlap_1f1b_check(inst: Instance) -> str | None:
    if inst.placement != "loop":
        return f'pipeline.placement = "{inst.placement}": 1f1b-overlap needs "loop"'
    if inst.v != 1:
        return f"pipeline.stages_per_device = {inst.v}: 1f1b-overlap needs 1"
    need = 2 * inst.p - 1
    if inst.m < need:
        return (f"pipeline.microbatches = {inst.m}: 1f1b-overlap needs >= 2p - 1 = {need} "
                f"(rank 0 runs {need} warm-up forwards)")
    return None


@register("1f1b-overlap", summary="1F1B with each steady F/B pair overlapped",
          preconditions='placement "loop", stages_per_device = 1, microbatches >= 2p - 1',
          source="ppviz 1F1B-overlap generator (F&B overlap as in DeepSeek-V3 DualPipe, "
                 "arXiv:2412.19437)",
          check=_overlap_1f1b_check)
def one_f_one_b_overlap(inst: Instance) -> DeviceOrders:
    """Rank ``r``: ``w = 2(p - r - 1) + 1`` warm-up forwards, ``m - w`` overlapped pairs
    ``(F(w + k), B(k))``, then ``w`` cool-down backwards."""
    p, m = inst.p, inst.m
    orders: DeviceOrders = []
    for r in range(p):
        warm = 2 * (p - r - 1) + 1
        ops: list[Step] = [Action(Kind.F, r, i) for i in range(warm)]
        ops += [Overlap(Action(Kind.F, r, warm + k), Action(Kind.B, r, k))
                for k in range(m - warm)]
        ops += [Action(Kind.B, r, i) for i in range(m - warm, m)]
        orders.append(ops)
    return orders


def megatron_warmup(p: int, v: int, m: int, rank: int, group: int) -> int:
    """Megatron-LM's warm-up count for ``rank``: ``2(p - rank - 1) + (v - 1) * group``, capped
    at ``m * v`` (``1`` when ``p = 1``)."""
    total = m * v
    warm = 2 * (p - rank - 1) + (v - 1) * group if p > 1 else 1
    return min(warm, total)


def megatron_table(m: int, v: int, group: int) -> list[tuple[int, int]]:
    """Megatron-LM's schedule table: ``(microbatch, chunk)`` per virtual microbatch, chunks
    cycled every ``group`` microbatches (the last group takes the remainder)."""
    table: list[tuple[int, int]] = []
    for lo in range(0, m, group):
        hi = m if lo + group >= m else lo + group
        table += [(i, c) for c in range(v) for i in range(lo, hi)]
    return table


def _interleaved_overlap_check(inst: Instance) -> str | None:
    if inst.placement != "loop":
        return f'pipeline.placement = "{inst.placement}": interleaved-1f1b-overlap needs "loop"'
    p, v, m = inst.p, inst.v, inst.m
    if p == 1 and v > 2:
        return (f"pipeline.stages_per_device = {v}: interleaved-1f1b-overlap on one device "
                "needs <= 2 (its second warm-up forward would be overlapped with its own "
                "backward)")
    grouped = p > 1 and v > 1  # Megatron's chunk groups need whole groups of p
    warm = 2 * (p - 1) + (v - 1) * p if p > 1 else 1
    need = warm // v + 1
    if grouped:
        need = -(-need // p) * p
    if m * v <= warm:
        extra = f" (a multiple of p = {p})" if grouped else ""
        return (f"pipeline.microbatches = {m}: interleaved-1f1b-overlap needs m * v > "
                f"2(p - 1) + (v - 1) p = {warm}: m >= {need}{extra} with v = {v}")
    if grouped and m % p:
        return (f"pipeline.microbatches = {m}: interleaved-1f1b-overlap with "
                f"stages_per_device = {v} needs a multiple of p = {p} (Megatron's chunk "
                "groups; other values can deadlock)")
    return None


@register("interleaved-1f1b-overlap",
          summary="Megatron interleaved 1F1B with each steady F/B pair overlapped",
          preconditions='placement "loop"; m * v > 2(p - 1) + (v - 1) p; m a multiple of '
                        "p when v > 1; v <= 2 when p = 1",
          source="ppviz interleaved-overlap generator over Megatron-LM's schedule table "
                 "(arXiv:2104.04473), F&B overlap as in DeepSeek-V3 (arXiv:2412.19437)",
          check=_interleaved_overlap_check)
def interleaved_1f1b_overlap(inst: Instance) -> DeviceOrders:
    """Megatron interleaved 1F1B (chunk groups of ``p`` microbatches) with one extra warm-up
    forward: rank ``r`` runs ``w = 2(p - r - 1) + (v - 1) p + 1`` warm-up forwards (Megatron's
    count, capped at ``m v``, plus one), then ``m v - w`` overlapped pairs (next ``F`` with
    next ``B``), then ``w`` cool-down backwards.  Forwards visit chunks in table order,
    backwards the same table with chunks reversed."""
    p, v, m = inst.p, inst.v, inst.m
    table = megatron_table(m, v, p)
    total = m * v
    orders: DeviceOrders = []
    for r in range(p):
        warm = megatron_warmup(p, v, m, r, p) + 1
        fwd = [Action(Kind.F, c * p + r, i) for i, c in table]
        bwd = [Action(Kind.B, (v - 1 - c) * p + r, i) for i, c in table]
        ops: list[Step] = list(fwd[:warm])
        ops += [Overlap(fwd[k], bwd[k - warm]) for k in range(warm, total)]
        ops += bwd[total - warm:]
        orders.append(ops)
    return orders
