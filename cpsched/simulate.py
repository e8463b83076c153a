"""The one simulator: per-device action orders → a timed :class:`~cpsched.model.Schedule`.

Every heuristic emits per-device orders; this turns them into times.  Each step starts as soon
as its device is free and every predecessor (SPEC §1) has ended plus its p2p lag; an
overlapped F&B pair starts when both members are ready and lasts ``overlap_forward_backward``.
Orders that cannot run raise :class:`OrderError`; a deadlock names the waiting cycle.
"""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx

from cpsched.graph import dependencies, duration, fused_rule_from, overlap_duration
from cpsched.instance import Instance
from cpsched.model import (
    Action,
    Kind,
    Overlap,
    Schedule,
    Step,
    TimedAction,
    step_actions,
)


class OrderError(ValueError):
    """Per-device orders that are incomplete, inconsistent with the instance, or deadlock."""


def check_orders(instance: Instance, orders: Sequence[Sequence[Step]]) -> None:
    """Check that ``orders`` name every action of the instance exactly once, each on its
    device, with kinds the instance allows.

    Raises:
        OrderError: the first problem found, naming the action and rank.
    """
    p, S, m = instance.p, instance.num_stages, instance.m
    if len(orders) != p:
        raise OrderError(f"orders have {len(orders)} ranks; the instance has {p} devices")
    seen: dict[Action, int] = {}
    for d, steps in enumerate(orders):
        for step in steps:
            if isinstance(step, Overlap):
                if step.forward.kind != Kind.F or step.backward.kind not in (Kind.B, Kind.I):
                    raise OrderError(f"rank {d}: {step} must pair an F with a B or I")
            for a in step_actions(step):
                if not (0 <= a.stage < S and 0 <= a.microbatch < m):
                    raise OrderError(f"rank {d}: {a} is outside stages 0..{S - 1}, "
                                     f"microbatches 0..{m - 1}")
                if a.kind in (Kind.I, Kind.W) and not instance.split_backward:
                    raise OrderError(f"rank {d}: {a} needs split_backward = true")
                want = instance.device_of(a.stage, a.microbatch)
                if want != d:
                    raise OrderError(f"rank {d}: {a} belongs on rank {want} "
                                     f"({instance.placement} placement)")
                if a in seen:
                    raise OrderError(f"rank {d}: {a} appears twice")
                seen[a] = d
    for i in range(m):
        for s in range(S):
            if Action(Kind.F, s, i) not in seen:
                raise OrderError(f"{Action(Kind.F, s, i)} is missing")
            has_b = Action(Kind.B, s, i) in seen
            has_i = Action(Kind.I, s, i) in seen
            has_w = Action(Kind.W, s, i) in seen
            if has_b and (has_i or has_w):
                raise OrderError(f"stage {s} microbatch {i} has both B and I/W")
            if not has_b and not (has_i and has_w):
                miss = [str(Action(k, s, i)) for k, h in ((Kind.I, has_i), (Kind.W, has_w))
                        if not h] if instance.split_backward else [str(Action(Kind.B, s, i))]
                raise OrderError(f"{', '.join(miss)} missing")


def simulate(instance: Instance, orders: Sequence[Sequence[Step]], method: str = "custom",
             status: str = "HEURISTIC") -> Schedule:
    """Time per-device orders on ``instance``.

    Args:
        orders: ``orders[d]`` = rank d's steps in execution order (actions or overlapped pairs).
        method: name written into the schedule (e.g. the heuristic's registry name).

    Returns:
        The timed schedule (times in the instance's units).  Memory limits are not enforced
        here: an order whose peak exceeds the limit is timed anyway and fails validation.

    Raises:
        OrderError: incomplete or misplaced orders, or a deadlock (naming the waiting cycle).
    """
    check_orders(instance, orders)
    all_actions = [a for steps in orders for st in steps for a in step_actions(st)]
    rule = fused_rule_from(all_actions)
    end: dict[Action, int] = {}
    rows: list[TimedAction] = []
    ptr = [0] * instance.p
    free = [0] * instance.p
    next_overlap = 0
    progress = True
    while progress:
        progress = False
        for d in range(instance.p):
            steps = orders[d]
            while ptr[d] < len(steps):
                step = steps[ptr[d]]
                members = step_actions(step)
                ready = free[d]
                blocked = False
                for a in members:
                    for pred, lag in dependencies(instance, a, rule):
                        if pred in members:
                            raise OrderError(f"rank {d}: {step} overlaps {a} with its own "
                                             f"predecessor {pred}")
                        if pred not in end:
                            blocked = True
                            break
                        ready = max(ready, end[pred] + lag)
                    if blocked:
                        break
                if blocked:
                    break
                if isinstance(step, Overlap):
                    dur, ov = overlap_duration(instance, step), next_overlap
                    next_overlap += 1
                else:
                    dur, ov = duration(instance, step), None
                for a in members:
                    end[a] = ready + dur
                    rows.append(TimedAction(d, a.stage, a.microbatch, a.kind,
                                            instance.from_ticks(ready),
                                            instance.from_ticks(ready + dur), ov))
                free[d] = ready + dur
                ptr[d] += 1
                progress = True
    if any(ptr[d] < len(orders[d]) for d in range(instance.p)):
        raise OrderError(_deadlock_message(instance, orders, ptr, end, rule))
    return Schedule(instance, rows, method=method, status=status)


def _deadlock_message(instance: Instance, orders: Sequence[Sequence[Step]], ptr: list[int],
                      end: dict[Action, int], rule) -> str:  # noqa: ANN001
    owner = {a: d for d, steps in enumerate(orders) for st in steps for a in step_actions(st)}
    waits: dict[int, tuple[Step, Action]] = {}
    wg = nx.DiGraph()
    for d in range(instance.p):
        if ptr[d] >= len(orders[d]):
            continue
        step = orders[d][ptr[d]]
        for a in step_actions(step):
            for pred, _ in dependencies(instance, a, rule):
                if pred not in end:
                    waits[d] = (step, pred)
                    wg.add_edge(d, owner[pred])
                    break
            if d in waits:
                break
    try:
        cycle = [u for u, _ in nx.find_cycle(wg)]
    except nx.NetworkXNoCycle:  # pragma: no cover - every stuck rank waits on a stuck rank
        cycle = sorted(waits)
    parts = [f"rank {d} waits at {waits[d][0]} for {waits[d][1]} (rank {owner[waits[d][1]]})"
             for d in cycle]
    return "deadlock: " + "; ".join(parts)

