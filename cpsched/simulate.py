"""The one simulator: per-device action orders → a timed :class:`~cpsched.model.Schedule`.

Every heuristic emits per-device orders; this turns them into times with the event engine
(:func:`cpsched.engine.run_orders`).  Each step starts as soon as its device is free and every
predecessor (docs/spec.md §1, :mod:`cpsched.rules`) has ended plus its p2p lag; an overlapped
F&B pair starts when both members are ready and lasts ``overlap_forward_backward``.  Orders that
cannot run raise :class:`OrderError`; a deadlock names the waiting cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from cpsched.actions import Action, Overlap, Step, TimedAction, step_actions
from cpsched.engine import OrderError, OrderRun, paused_gc, run_orders, waiting_cycle
from cpsched.instance import Instance
from cpsched.model import Schedule
from cpsched.rules import Fault, action_fault, gaps, pair_kinds_ok


def check_orders(instance: Instance, orders: Sequence[Sequence[Step]]) -> None:
    """Check that ``orders`` name every action of the instance exactly once, each on its
    device, with kinds the instance allows (the completeness rule of :mod:`cpsched.rules`).

    Raises:
        OrderError: the first problem found, naming the action and rank.
    """
    p, S, m = instance.p, instance.num_stages, instance.m
    if len(orders) != p:
        raise OrderError(f"orders have {len(orders)} ranks; the instance has {p} devices")
    seen: dict[Action, int] = {}
    for d, steps in enumerate(orders):
        for step in steps:
            if isinstance(step, Overlap) and not pair_kinds_ok(step):
                raise OrderError(f"rank {d}: {step} must pair an F with a B or I")
            for a in step_actions(step):
                fault = action_fault(instance, a, d, seen)
                if fault in (Fault.STAGE, Fault.MICROBATCH):
                    raise OrderError(f"rank {d}: {a} is outside stages 0..{S - 1}, "
                                     f"microbatches 0..{m - 1}")
                if fault == Fault.KIND:
                    raise OrderError(f"rank {d}: {a} needs split_backward = true")
                if fault == Fault.DEVICE:
                    raise OrderError(f"rank {d}: {a} belongs on rank "
                                     f"{instance.device_of(a.stage, a.microbatch)} "
                                     f"({instance.placement} placement)")
                if fault == Fault.TWICE:
                    raise OrderError(f"rank {d}: {a} appears twice")
                seen[a] = d
    for gap in gaps(instance, seen):
        s, i = gap.stage, gap.microbatch
        if gap.forward_missing:
            raise OrderError(f"{s}F{i} is missing")
        if gap.mixed:
            raise OrderError(f"stage {s} microbatch {i} has both B and I/W")
        raise OrderError(", ".join(f"{s}{k}{i}" for k in gap.backward_missing) + " missing")


def simulate(instance: Instance, orders: Sequence[Sequence[Step]], method: str = "custom",
             status: str = "HEURISTIC") -> Schedule:
    """Time per-device orders on ``instance``.

    Args:
        orders: ``orders[d]`` = rank d's steps in execution order (actions or overlapped pairs).
        method: name written into the schedule (e.g. the heuristic's registry name).
        status: the schedule's status (a :class:`~cpsched.model.Status` name).

    Returns:
        The timed schedule (times in the instance's units).  Memory limits are not enforced
        here: an order whose peak exceeds the limit is timed anyway and fails validation.

    Raises:
        OrderError: incomplete or misplaced orders, a pair holding its own predecessor, or a
            deadlock (naming the waiting cycle).
    """
    run = run_orders(instance, orders)
    if run.suspect or run.stuck:
        check_orders(instance, orders)  # raises on any completeness problem
    if run.stuck:
        raise OrderError(deadlock_message(orders, run))
    if run.suspect:  # pragma: no cover - check_orders names every problem the run meets
        raise OrderError("orders break the completeness rule")
    with paused_gc():
        rows = timed_rows(instance, orders, run)
    return Schedule(instance, rows, method=method, status=status)


def timed_rows(instance: Instance, orders: Sequence[Sequence[Step]],
               run: OrderRun) -> list[TimedAction]:
    """The schedule rows of a complete :class:`~cpsched.engine.OrderRun` (instance units)."""
    conv = _converter(instance)
    rows: list[TimedAction] = []
    add = rows.append
    pair_ids = run.pair_ids
    for d, steps in enumerate(orders):
        for k, (step, t0, t1) in enumerate(zip(steps, run.starts[d], run.ends[d],
                                               strict=True)):
            a0, a1 = conv(t0), conv(t1)
            if type(step) is Action:
                kind, s, i = step
                add(TimedAction(d, s, i, kind, a0, a1, None))
            else:
                ov = pair_ids[(d, k)]
                for a in step_actions(step):
                    add(TimedAction(d, a.stage, a.microbatch, a.kind, a0, a1, ov))
    return rows


def _converter(instance: Instance) -> Callable[[int], float]:
    """Ticks → instance units, as :meth:`Instance.from_ticks` (memoised)."""
    if instance.time_scale == 1:
        return lambda t: t
    memo: dict[int, float] = {}

    def conv(t: int) -> float:
        x = memo.get(t)
        if x is None:
            x = memo[t] = instance.from_ticks(t)
        return x

    return conv


def deadlock_message(orders: Sequence[Sequence[Step]], run: OrderRun) -> str:
    """``deadlock: rank d waits at STEP for ACTION (rank e); ...`` along the waiting cycle."""
    parts = [f"rank {st.rank} waits at {st.step} for {st.waits_for} (rank {owner})"
             for st, owner in waiting_cycle(orders, run.stuck)]
    return "deadlock: " + "; ".join(parts)


__all__ = ["OrderError", "check_orders", "deadlock_message", "simulate", "timed_rows"]
