"""Zero Bubble handcrafted schedules ZB-H1 and ZB-H2 as per-rank orders.

Source: Qi, Wan, Huang, Lin, "Zero Bubble Pipeline Parallelism" (ICLR 2024, arXiv:2401.10241),
section 3.1 and Figure 3 (handcrafted schedules, top ZB-H1, bottom ZB-H2).  The backward is
split into ``I`` (input gradient, "B" in the paper) and ``W`` (weight gradient); ``W`` has no
successor on other ranks, so it is moved to fill what would be bubbles.

* ``zb-h1`` (ZB-1P) follows the ZB-1P generator of the pipeline-schedule visualizer
  (``ppviz_strategies.py``): the 1F1B warm-up of ``p - r - 1`` forwards, a steady phase of
  ``F, I`` pairs in which rank ``r`` holds back its first ``r`` weight gradients, then an
  ``I, W`` cool-down and the remaining ``W``.  Peak memory ``p`` activations, as 1F1B on
  rank 0.  With ``B = I + W`` the bubble per rank is ``(p - 1)(F + B - 2W)`` (the paper's
  ``(p - 1)(T_F + T_B - T_W)`` with its ``T_B = I``): makespan
  ``m(F + I + W) + (p - 1)(F + I - W)``, exact whenever ``m >= p`` and ``W <= min(F, I)``.
* ``zb-h2`` follows the paper's Figure 3 (bottom): up to ``2(p - r) - 1`` warm-up forwards
  (the paper's "p - 1 more F passes"), so every rank may hold ``2p - 1`` activations; a ``W``
  runs in the steady phase only when the next forward would exceed that, and in the cool-down
  one ``W`` follows each ``I`` (then the remaining ``W``).  The result is the paper's
  "parallelogram": the only idle time is each rank's start-up ``r F``, i.e. makespan
  ``m(F + I + W) + (p - 1) F`` with ``2p - 1`` activations on rank 0, exact whenever
  ``m >= 2p - 1`` and ``I <= 2 min(F, W)`` (the paper draws ``F = I = W``).
"""

from __future__ import annotations

from collections.abc import Callable

from cpsched.instance import Instance
from cpsched.model import Action, DeviceOrders, Kind, Step
from cpsched.schedules.registry import register


def _zb_check(name: str) -> Callable[[Instance], str | None]:
    def check(inst: Instance) -> str | None:
        if not inst.split_backward:
            return f"pipeline.split_backward = false: {name} needs true"
        if inst.placement != "loop":
            return f'pipeline.placement = "{inst.placement}": {name} needs "loop"'
        if inst.v != 1:
            return f"pipeline.stages_per_device = {inst.v}: {name} needs 1"
        return None

    return check


@register("zb-h1", summary="Zero Bubble ZB-H1 (ZB-1P): 1F1B with W filling the bubbles",
          preconditions='split_backward = true, placement "loop", stages_per_device = 1',
          source="Qi et al. 2023, Zero Bubble Pipeline Parallelism (arXiv:2401.10241), ZB-H1; "
                 "ppviz ZB-1P generator",
          check=_zb_check("zb-h1"))
def zb_h1(inst: Instance) -> DeviceOrders:
    """ZB-H1 (ZB-1P) per rank ``r``.

    * warm-up: ``w = min(p - r - 1, m)`` forwards (as 1F1B);
    * steady, ``m - w`` times: ``F``, ``I`` and then the oldest ``W`` once rank ``r`` has run
      ``r`` more ``I`` than ``W`` (condition ``forwards issued - W issued >= p``);
    * cool-down, ``w`` times: ``I``, ``W``; then the remaining ``W``.

    The visualizer assumes ``m >= p - 1``; capping the warm-up at ``m`` extends the rule to
    every ``m`` (orders for ``m >= p - 1`` are the visualizer's exactly).
    """
    p, m = inst.p, inst.m
    orders: DeviceOrders = []
    for r in range(p):
        warm = min(p - r - 1, m)
        ops: list[Step] = [Action(Kind.F, r, i) for i in range(warm)]
        nf, ni, nw = warm, 0, 0
        for _ in range(m - warm):
            ops += [Action(Kind.F, r, nf), Action(Kind.I, r, ni)]
            if nf - nw >= p - 1:
                ops.append(Action(Kind.W, r, nw))
                nw += 1
            nf += 1
            ni += 1
        for _ in range(warm):
            ops += [Action(Kind.I, r, ni), Action(Kind.W, r, nw)]
            ni += 1
            nw += 1
        ops += [Action(Kind.W, r, i) for i in range(nw, m)]
        orders.append(ops)
    return orders


@register("zb-h2", summary="Zero Bubble ZB-H2: 2p - 1 in flight, near-zero bubble",
          preconditions='split_backward = true, placement "loop", stages_per_device = 1',
          source="Qi et al. 2023, Zero Bubble Pipeline Parallelism (arXiv:2401.10241), ZB-H2 "
                 "(Figure 3, bottom)",
          check=_zb_check("zb-h2"))
def zb_h2(inst: Instance) -> DeviceOrders:
    """ZB-H2 per rank ``r`` (cap ``c = 2p - 1`` activations in flight):

    * warm-up: ``w = min(2(p - r) - 1, m)`` forwards;
    * steady, ``m - w`` times: ``I`` (oldest), then ``W`` (oldest) only if ``c`` microbatches
      are in flight (forward run, ``W`` not yet), then the next ``F``;
    * cool-down: each remaining ``I`` followed by one ``W``; then the remaining ``W``.

    For ``p = 4, m = 8`` this is the paper's Figure 3: rank 0 runs ``F1..F7 B1 W1 F8 B2 W2 ..``,
    rank 3 ``F1 B1 .. F7 B7 W1 F8 B8 W2 .. W8``.
    """
    p, m = inst.p, inst.m
    cap = 2 * p - 1
    orders: DeviceOrders = []
    for r in range(p):
        warm = min(2 * (p - r) - 1, m)
        ops: list[Step] = [Action(Kind.F, r, i) for i in range(warm)]
        nf, ni, nw = warm, 0, 0
        while nf < m:
            ops.append(Action(Kind.I, r, ni))
            ni += 1
            if nf - nw >= cap:
                ops.append(Action(Kind.W, r, nw))
                nw += 1
            ops.append(Action(Kind.F, r, nf))
            nf += 1
        while ni < m:
            ops.append(Action(Kind.I, r, ni))
            ni += 1
            if nw < ni:
                ops.append(Action(Kind.W, r, nw))
                nw += 1
        ops += [Action(Kind.W, r, i) for i in range(nw, m)]
        orders.append(ops)
    return orders
