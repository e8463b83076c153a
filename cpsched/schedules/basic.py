"""GPipe, 1F1B and interleaved 1F1B as per-rank orders.

Sources: GPipe (Huang et al., 2019, arXiv:1811.06965) — all forwards then all backwards;
1F1B (PipeDream-Flush, Narayanan et al., 2021, arXiv:2006.09503) — rank r runs ``p - r - 1``
warm-up forwards, then one-forward-one-backward, then the remaining backwards; interleaved 1F1B
(Megatron-LM, Narayanan et al., 2021, arXiv:2104.04473) following the rounds-based rule of
PyTorch ``torch.distributed.pipelining.ScheduleInterleaved1F1B``.
"""

from __future__ import annotations

from collections import defaultdict

from cpsched.instance import Instance
from cpsched.model import Action, DeviceOrders, Kind
from cpsched.schedules.registry import register


def _single_stage(inst: Instance) -> str | None:
    if inst.placement != "loop":
        return f'pipeline.placement = "{inst.placement}": needs "loop"'
    if inst.v != 1:
        return f"pipeline.stages_per_device = {inst.v}: needs 1"
    return None


def _loop(inst: Instance) -> str | None:
    if inst.placement != "loop":
        return f'pipeline.placement = "{inst.placement}": needs "loop"'
    return None


@register("gpipe", summary="all forwards, then all backwards (AFAB)",
          preconditions='placement "loop", stages_per_device = 1',
          source="GPipe, Huang et al. 2019 (arXiv:1811.06965); PyTorch ScheduleGPipe",
          check=_single_stage)
def gpipe(inst: Instance) -> DeviceOrders:
    """Rank r: ``F0 .. F(m-1)`` then ``B0 .. B(m-1)`` of its one stage."""
    return [[Action(Kind.F, r, i) for i in range(inst.m)]
            + [Action(Kind.B, r, i) for i in range(inst.m)] for r in range(inst.p)]


@register("1f1b", summary="one-forward-one-backward (PipeDream-Flush)",
          preconditions='placement "loop", stages_per_device = 1',
          source="PipeDream-Flush, Narayanan et al. 2021 (arXiv:2006.09503); "
                 "PyTorch Schedule1F1B",
          check=_single_stage)
def one_f_one_b(inst: Instance) -> DeviceOrders:
    """Rank r: ``min(p - r - 1, m)`` warm-up forwards, then F/B pairs, then the remaining
    backwards (all fused B)."""
    p, m = inst.p, inst.m
    orders: DeviceOrders = []
    for r in range(p):
        warm = min(p - r - 1, m)
        ops: list = [Action(Kind.F, r, i) for i in range(warm)]
        for k in range(m - warm):
            ops += [Action(Kind.F, r, warm + k), Action(Kind.B, r, k)]
        ops += [Action(Kind.B, r, i) for i in range(m - warm, m)]
        orders.append(ops)
    return orders


def _interleaved_check(inst: Instance) -> str | None:
    why = _loop(inst)
    if why:
        return why
    rounds = max(1, inst.m // inst.p)
    if inst.m % rounds:
        return (f"pipeline.microbatches = {inst.m}: must be a multiple of the number of rounds "
                f"max(1, m // p) = {rounds}")
    return None


@register("interleaved-1f1b", summary="interleaved 1F1B (Megatron-LM v2, PyTorch rounds rule)",
          preconditions='placement "loop"; m divisible by max(1, m // p)',
          source="Megatron-LM interleaved schedule, Narayanan et al. 2021 (arXiv:2104.04473); "
                 "PyTorch ScheduleInterleaved1F1B",
          check=_interleaved_check)
def interleaved_1f1b(inst: Instance) -> DeviceOrders:
    """Rank r runs ``(v-1)*mpr + 2*(p-1-r)`` warm-up forwards (capped at ``m*v``), then F/B
    pairs, then backwards; chunks change every ``mpr = m // max(1, m // p)`` microbatches."""
    p, v, m = inst.p, inst.v, inst.m
    rounds = max(1, m // p)
    mpr = m // rounds
    orders: DeviceOrders = []
    for r in range(p):
        warm = min((v - 1) * mpr + 2 * (p - 1 - r), m * v)
        total = m * v

        def fwd_stage(step: int, r: int = r) -> int:
            return ((step // mpr) % v) * p + r

        def bwd_stage(step: int, r: int = r, warm: int = warm) -> int:
            return (v - 1 - ((step - warm) // mpr) % v) * p + r

        fmb: dict[int, int] = defaultdict(int)
        bmb: dict[int, int] = defaultdict(int)
        ops: list = []
        for op in range(total + warm):
            if op < total:
                s = fwd_stage(op)
                ops.append(Action(Kind.F, s, fmb[s]))
                fmb[s] += 1
            if op >= warm:
                s = bwd_stage(op)
                ops.append(Action(Kind.B, s, bmb[s]))
                bmb[s] += 1
        orders.append(ops)
    return orders
