"""The remaining schedules of PyTorch ``torch.distributed.pipelining``, action for action.

``looped-bfs`` (ScheduleLoopedBFS), ``interleaved-zb`` (ScheduleInterleavedZeroBubble), ``zbv``
(ScheduleZBVZeroBubble) and ``dualpipev`` (ScheduleDualPipeV), written in cpsched's terms:
per-rank orders of :class:`~cpsched.model.Action` (and :class:`~cpsched.model.Overlap` pairs),
without PyTorch's ``None`` idle slots and communication actions.  For every configuration
PyTorch 2.13 accepts, each rank's order equals the compute actions PyTorch's generator emits for
that rank (``tests/schedules/test_torch_orders.py`` checks it).

Ranks, stages and microbatches are PyTorch's: with placement ``v`` rank r holds stages
``r`` ("chunk 0", going down the V) and ``2p - 1 - r`` ("chunk 1", coming back up).
"""

from __future__ import annotations

from collections import Counter, deque

from cpsched.actions import fuse_backwards
from cpsched.instance import Instance
from cpsched.model import Action, DeviceOrders, Kind, Overlap, Step
from cpsched.schedules.basic import (
    chunk_table,
    need_loop,
    need_rounds_divide,
    one_f_one_b_family_rank,
    pytorch_rounds,
)
from cpsched.schedules.registry import register

# --------------------------------------------------------------------- checks


def _need_split(inst: Instance, name: str) -> str | None:
    if not inst.split_backward:
        return (f"pipeline.split_backward = false: {name} needs pipeline.split_backward = true "
                "(it runs the input-gradient I and weight-gradient W backwards separately)")
    return None


def _need_v(inst: Instance, name: str) -> str | None:
    if inst.placement != "v":
        return (f'pipeline.placement = "{inst.placement}": {name} needs "v" '
                "(stages_per_device = 2, device d holds stages d and 2p - 1 - d)")
    return None


def _check_interleaved_zb(inst: Instance) -> str | None:
    return need_rounds_divide(inst, "interleaved-zb") or _need_split(inst, "interleaved-zb")


def _check_zbv(inst: Instance) -> str | None:
    return _need_v(inst, "zbv")


def _check_dualpipev(inst: Instance) -> str | None:
    why = _need_v(inst, "dualpipev")
    if why:
        return why
    if inst.m < 2 * inst.p:
        return (f"pipeline.microbatches = {inst.m}: dualpipev needs >= 2 * devices = "
                f"{2 * inst.p} (at least one microbatch per stage)")
    return None


class _Counters:
    """Per-(kind, stage) next-microbatch counters: PyTorch's schedules number the actions of
    each stage and kind 0, 1, 2, ... in emission order."""

    def __init__(self) -> None:
        self.next: Counter[tuple[Kind, int]] = Counter()

    def take(self, kind: Kind, stage: int, counter_kind: Kind | None = None) -> Action:
        key = (counter_kind or kind, stage)
        mb = self.next[key]
        self.next[key] += 1
        return Action(kind, stage, mb)


# ---------------------------------------------------------------- looped BFS


@register("looped-bfs", summary="breadth-first over each rank's stages (all F, then all B)",
          preconditions='placement "loop"; any devices, stages_per_device, microbatches',
          source="Breadth-First Pipeline Parallelism, Lamy-Poirier 2022 (arXiv:2211.05953); "
                 "PyTorch ScheduleLoopedBFS",
          check=lambda inst: need_loop(inst, "looped-bfs"))
def looped_bfs(inst: Instance) -> DeviceOrders:
    """Looped breadth-first schedule.

    Source: Lamy-Poirier 2022, arXiv:2211.05953; PyTorch
    ``torch.distributed.pipelining.ScheduleLoopedBFS``.

    Rank r (stages ``r, r + p, ...``): warm-up = every forward, ``m v`` of them, stage by stage
    (ascending), each stage's microbatches ``0 .. m-1``; no steady phase; cool-down = every
    backward (fused ``B``), ``m v``, stage by stage descending, microbatches ``m-1 .. 0``.
    """
    p, v, m = inst.p, inst.v, inst.m
    orders: DeviceOrders = []
    for r in range(p):
        stages = [c * p + r for c in range(v)]
        ops: list[Step] = [Action(Kind.F, s, i) for s in stages for i in range(m)]
        ops += [Action(Kind.B, s, i) for s in reversed(stages) for i in reversed(range(m))]
        orders.append(ops)
    return orders


# ------------------------------------------------------ interleaved zero bubble


@register("interleaved-zb",
          summary="interleaved 1F1B with split backward, W delayed to fill bubbles (ZB-1P)",
          preconditions='placement "loop"; split_backward = true; microbatches a multiple of '
                        "max(1, microbatches // devices)",
          source="Zero Bubble Pipeline Parallelism, Qi et al. 2023 (arXiv:2401.10241), ZB-1P; "
                 "PyTorch ScheduleInterleavedZeroBubble",
          check=_check_interleaved_zb)
def interleaved_zero_bubble(inst: Instance) -> DeviceOrders:
    """Interleaved zero bubble (ZB-1P over ``v`` chunks), PyTorch's rounds rule.

    Source: Qi et al. 2023, arXiv:2401.10241 (ZB-1P / ZB-H1); PyTorch
    ``torch.distributed.pipelining.ScheduleInterleavedZeroBubble``.

    Chunks change every ``g = m // max(1, m // p)`` microbatches as in interleaved 1F1B, but the
    warm-up grows by 1 (not 2) per hop and the backward is split.  Rank r:

    * warm-up ``w_r = min((v - 1) g + (p - 1 - r), m v)`` forwards;
    * steady ``m v - w_r`` steps ``F, I`` plus, from the ``(r + 1)``-th step on, the ``W``
      of the backward ``r`` steps earlier;
    * cool-down ``w_r`` steps ``I`` (+ that delayed ``W``), then the last ``min(r, m v)`` W's.

    With ``v = 1`` this is ZB-H1: 1F1B whose W's trail their I's by ``r`` backwards.
    """
    p, v, m = inst.p, inst.v, inst.m
    g = pytorch_rounds(p, m)[1]
    table = chunk_table(m, v, g)
    return [one_f_one_b_family_rank(p, v, m, r, min((v - 1) * g + (p - 1 - r), m * v), table,
                                    weight_lag=r)
            for r in range(p)]


# ----------------------------------------------------------------------- ZB-V


def _zbv_rank(p: int, m: int, r: int) -> list[Step]:
    n = max(2 * p - 1, m)  # planned as if there were at least 2p - 1 microbatches
    down, up = r, 2 * p - 1 - r
    c = _Counters()
    ops: list[Action] = []

    def emit(*steps: tuple[Kind, int]) -> None:
        ops.extend(c.take(kind, stage) for kind, stage in steps)

    F, I, W = Kind.F, Kind.I, Kind.W  # noqa: N806
    # warm-up
    for _ in range(2 * (p - r) - 1):
        emit((F, down))
    for _ in range(r):
        emit((F, up), (F, down))
    for _ in range(p - r):
        emit((F, up), (I, up), (W, up))
    # steady: until both chunks have run n forwards
    while c.next[F, up] < c.next[F, down] or c.next[F, down] < n:
        if c.next[F, down] < n:
            emit((F, down))
        emit((I, down), (W, down), (F, up), (I, up), (W, up))
    # cool-down
    for _ in range(r):
        emit((I, down), (I, up))
    for _ in range(p - r):
        emit((I, down), (W, down))
    while c.next[W, up] < n:
        emit((W, up))
    while c.next[W, down] < n:
        emit((W, down))
    return [a for a in ops if a.microbatch < m]  # drop the planned-only microbatches


@register("zbv", summary="Zero Bubble V (ZB-V): V placement, split backward, W fills bubbles",
          preconditions='placement "v" (stages_per_device = 2); any microbatches (a fused '
                        "backward runs B for I and no W)",
          source="Zero Bubble Pipeline Parallelism, Qi et al. 2023 (arXiv:2401.10241) §6, ZB-V; "
                 "PyTorch ScheduleZBVZeroBubble",
          check=_check_zbv)
def zbv(inst: Instance) -> DeviceOrders:
    """ZB-V: zero bubble with the V placement (two chunks per rank).

    Source: Qi et al. 2023, arXiv:2401.10241 §6; PyTorch
    ``torch.distributed.pipelining.ScheduleZBVZeroBubble``.  Zero bubble when F = I = W.

    Rank r, chunk 0 = stage ``r`` (down), chunk 1 = stage ``2p - 1 - r`` (up); the order is
    planned for ``n = max(m, 2p - 1)`` microbatches and the microbatches ``>= m`` are then
    dropped (as PyTorch does), so any ``m >= 1`` works.  Counts for ``n``:

    * warm-up: ``2(p - r) - 1`` F0; ``r`` × (F1, F0); ``p - r`` × (F1, I1, W1);
    * steady: ``n - p`` × (F0 while fewer than ``n``, I0, W0, F1, I1, W1);
    * cool-down: ``r`` × (I0, I1); ``p - r`` × (I0, W0); the ``r`` remaining W1, then the
      ``r`` remaining W0.

    With a fused backward every ``I`` runs as ``B`` and no ``W`` runs
    (:func:`~cpsched.actions.fuse_backwards`).
    """
    orders = [_zbv_rank(inst.p, inst.m, r) for r in range(inst.p)]
    return orders if inst.split_backward else fuse_backwards(orders)


# ------------------------------------------------------------------ DualPipeV


def _dualpipev_rank(p: int, m: int, r: int) -> list[Step]:
    down, up = r, 2 * p - 1 - r
    c = _Counters()
    pending_w: deque[Action] = deque()
    ops: list[Step] = []

    def fwd(stage: int) -> Action:
        return c.take(Kind.F, stage)

    def bwd(stage: int, split: bool = False) -> Action:
        # B and I share one microbatch counter per stage
        if not split:
            return c.take(Kind.B, stage, counter_kind=Kind.I)
        a = c.take(Kind.I, stage)
        pending_w.append(Action(Kind.W, stage, a.microbatch))
        return a

    def weight() -> None:
        if pending_w:
            ops.append(pending_w.popleft())

    # 1. F0 only
    for _ in range(2 * (p - r - 1)):
        ops.append(fwd(down))
    # 2. F0 F1
    for _ in range(r + 1):
        ops += [fwd(down), fwd(up)]
    # 3. I1 W F1 (zero bubble)
    for _ in range(p - r - 1):
        ops.append(bwd(up, split=True))
        weight()
        ops.append(fwd(up))
    # 4. main: (F0;B1) (F1;B0) overlapped pairs
    for k in range(m - 2 * p + r + 1):
        if k == 0 and r == p - 1:  # the last rank runs its first pair back to back
            ops += [fwd(down), bwd(up)]
        else:
            ops.append(Overlap(fwd(down), bwd(up)))
        ops.append(Overlap(fwd(up), bwd(down)))
    # 5. B1 (F1;B0)
    for _ in range(p - r - 1):
        ops.append(bwd(up))
        ops.append(Overlap(fwd(up), bwd(down)))
    # 6. B1 B0; split backwards from the middle of this phase on
    split = False
    for k in range(r + 1):
        if k == (r + 1) // 2 and r % 2 == 1:
            split = True
        ops.append(bwd(up, split))
        if k == (r + 1) // 2 and r % 2 == 0:
            split = True
        ops.append(bwd(down, split))
    # 7. W B0
    for _ in range(p - r - 1):
        weight()
        ops.append(bwd(down, split))
    # 8. the remaining W's
    while pending_w:
        weight()
    return ops


@register("dualpipev",
          summary="DualPipe-V: V placement, overlapped F&B pairs, fused B and split I/W mixed",
          preconditions='placement "v" (stages_per_device = 2); microbatches >= 2 * devices '
                        "(a fused backward runs B for I and no W)",
          source="DeepSeek-V3 technical report (arXiv:2412.19437), DualPipe-V variant "
                 "(github.com/deepseek-ai/DualPipe); PyTorch ScheduleDualPipeV",
          check=_check_dualpipev)
def dualpipev(inst: Instance) -> DeviceOrders:
    """DualPipe-V ("cut-in-half" DualPipe): V placement, forward of one chunk overlapped with
    the backward of the other.

    Source: DeepSeek-AI 2024, arXiv:2412.19437 (DualPipe) and its V variant in
    github.com/deepseek-ai/DualPipe; PyTorch ``torch.distributed.pipelining.ScheduleDualPipeV``.

    Overlapped pairs are :class:`~cpsched.model.Overlap` steps (``(0F7;7B3)OVERLAP_F_B``) timed
    with ``overlap_forward_backward`` when the instance gives it.  Backwards are fused ``B``
    except where PyTorch splits them (steps 3, and 6-7 from the middle of step 6 on), whose
    W's run from a FIFO queue.  Rank r, chunk 0 = stage ``r``, chunk 1 = stage ``2p - 1 - r``:

    1. ``2(p - r - 1)`` × F0
    2. ``r + 1`` × (F0, F1)
    3. ``p - r - 1`` × (I1, W, F1)
    4. steady: ``m - 2p + r + 1`` × ((F0;B1), (F1;B0)); on the last rank the first (F0;B1)
       runs back to back, not overlapped
    5. ``p - r - 1`` × (B1, (F1;B0))
    6. ``r + 1`` × (B1, B0), switching to I1 / I0 half-way (odd r: before the B1 of step
       ``(r + 1) // 2``; even r: before its B0)
    7. ``p - r - 1`` × (W, B0 or I0)
    8. the remaining W's (``r + 1`` of them).

    With a fused backward every ``I`` runs as ``B`` and no ``W`` runs
    (:func:`~cpsched.actions.fuse_backwards`).
    """
    orders = [_dualpipev_rank(inst.p, inst.m, r) for r in range(inst.p)]
    return orders if inst.split_backward else fuse_backwards(orders)
