"""DualPipe (DeepSeek-V3) as per-rank orders on the ``bidirectional`` placement.

Source: DeepSeek-AI, "DeepSeek-V3 Technical Report" (arXiv:2412.19437), section 3.2.1, and
github.com/deepseek-ai/DualPipe (``DualPipe.step``); the orders follow the DualPipe generator
of the MIT-licensed pipeline-schedule visualizer (``ppviz_strategies.py``), which replays
DeepSeek's eight steps.

Microbatches ``0..m/2-1`` flow down ranks ``0..p-1`` and ``m/2..m-1`` flow up ranks
``p-1..0`` (``placement = "bidirectional"``).  On rank ``d`` with ``h = min(d, p - 1 - d)``
("half rank") and ``n = p / 2``, *phase 0* is the direction in which ``d`` is at depth ``h``
(down for the first half of the ranks, up for the second), *phase 1* the other one; ``M =
m / 2`` microbatches per direction.  ``F0``/``F1`` is the next forward of that phase, ``B`` a
fused backward, ``I``/``W`` a split one (``W`` pops the oldest pending weight gradient), and
``F&B`` an :class:`~cpsched.model.Overlap` of a forward with a fused backward:

====  =======================  ==================
step  per repetition           repetitions
====  =======================  ==================
1     ``F0``                   ``2(n - h - 1)``
2     ``F0 F1``                ``h + 1``
3     ``I1 W F1``              ``n - h - 1``
4     ``F0&B1 F1&B0``          ``M - p + h + 1``
5     ``B1 F1&B0``             ``n - h - 1``
6     ``B1 B0`` (second half   ``h + 1``
      of them split: ``I``)
7     ``W I0``                 ``n - h - 1``
8     ``W``                    ``h + 1``
====  =======================  ==================

Warm-up = steps 1-3, steady = step 4, cool-down = steps 5-8.  With a fused backward
(``split_backward = false``) every ``I`` is a ``B`` and no ``W`` runs: the times are those of
the split instance with ``I = B`` and ``W = 0`` (cpsched's extension; DeepSeek splits).
Like the visualizer, the first step-4 pair of the two middle ranks is overlapped too
(DeepSeek's code runs those two chunks back to back).  Step 4 needs ``M - p + 1 >= 0``:
``m >= 2p - 2`` (DeepSeek asserts ``m >= 2p``; the visualizer's ``m >= p`` is not enough and it
crashes below ``2p - 2``).
docs/spec.md §6: bubble ``(p/2 - 1)(F&B + B - 3W)``, ``p + 1`` activations on the busiest rank.
"""

from __future__ import annotations

from collections import deque

from cpsched.instance import Instance
from cpsched.model import Action, DeviceOrders, Kind, Overlap, Step
from cpsched.schedules.registry import register


def _dualpipe_check(inst: Instance) -> str | None:
    if inst.placement != "bidirectional":
        return f'pipeline.placement = "{inst.placement}": dualpipe needs "bidirectional"'
    need = max(2 * inst.p - 2, 2)
    if inst.m < need:
        return f"pipeline.microbatches = {inst.m}: dualpipe needs >= 2p - 2 = {need}"
    return None


class _Rank:
    """Order builder for one rank (counters per phase, pending weight gradients)."""

    def __init__(self, inst: Instance, d: int) -> None:
        p, half = inst.p, inst.m // 2
        second = d >= p // 2
        # phase 0: the direction in which d is in the first half of the pipeline
        self.stage = (p - 1 - d, d) if second else (d, p - 1 - d)
        base = (half, 0) if second else (0, half)  # microbatch ids start per phase
        self.fwd = list(base)
        self.bwd = list(base)
        self.pending: deque[tuple[int, int]] = deque()
        self.ops: list[Step] = []
        self.split = inst.split_backward

    def f(self, phase: int) -> Action:
        a = Action(Kind.F, self.stage[phase], self.fwd[phase])
        self.fwd[phase] += 1
        return a

    def b(self, phase: int, split: bool = False) -> Action:
        split = split and self.split
        a = Action(Kind.I if split else Kind.B, self.stage[phase], self.bwd[phase])
        self.bwd[phase] += 1
        if split:
            self.pending.append((a.stage, a.microbatch))
        return a

    def w(self) -> list[Step]:
        """The oldest pending weight gradient (none with a fused backward)."""
        if not self.pending:
            return []
        s, i = self.pending.popleft()
        return [Action(Kind.W, s, i)]


@register("dualpipe", summary="DeepSeek DualPipe: bidirectional, overlapped F&B, split W",
          preconditions='placement "bidirectional", microbatches >= 2p - 2 (a fused '
                        "backward runs B for I and no W)",
          source="DeepSeek-V3 report (arXiv:2412.19437) and deepseek-ai/DualPipe; "
                 "ppviz DualPipe generator",
          check=_dualpipe_check)
def dualpipe(inst: Instance) -> DeviceOrders:
    """DualPipe per rank: steps 1-8 of the module docstring."""
    p, half_m = inst.p, inst.m // 2
    n = p // 2
    orders: DeviceOrders = []
    for d in range(p):
        h = min(d, p - 1 - d)
        r = _Rank(inst, d)
        ops = r.ops
        for _ in range(2 * (n - h - 1)):                    # 1: nF0
            ops.append(r.f(0))
        for _ in range(h + 1):                              # 2: nF0F1
            ops += [r.f(0), r.f(1)]
        for _ in range(n - h - 1):                          # 3: nI1W1F1
            ops.append(r.b(1, split=True))
            ops += [*r.w(), r.f(1)]
        for _ in range(half_m - p + h + 1):                 # 4: n(F0&B1)(F1&B0)
            ops.append(Overlap(r.f(0), r.b(1)))
            ops.append(Overlap(r.f(1), r.b(0)))
        for _ in range(n - h - 1):                          # 5: nB1(F1&B0)
            ops.append(r.b(1))
            ops.append(Overlap(r.f(1), r.b(0)))
        steps6 = h + 1                                      # 6: nB1B0, second half split
        split = False
        for k in range(steps6):
            if k == steps6 // 2 and h % 2 == 1:
                split = True
            ops.append(r.b(1, split))
            if k == steps6 // 2 and h % 2 == 0:
                split = True
            ops.append(r.b(0, split))
        for _ in range(n - h - 1):                          # 7: nWI0
            ops += r.w()
            ops.append(r.b(0, split=True))
        while r.pending:                                    # 8: nW
            ops += r.w()
        orders.append(ops)
    return orders
