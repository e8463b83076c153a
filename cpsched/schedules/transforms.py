"""Schedule transforms that keep a schedule valid and never make it worse.

Used to turn any known schedule into a warm start the CP-SAT model accepts
(docs/modelling.md §6, §1), and to build the fallback schedule:

* :func:`split_fused` — a fused ``B`` outside an overlapped pair → ``I`` then ``W``;
* :func:`serialise_overlaps` — overlapped pairs of an instance without an overlap cost → the
  backward then the forward;
* :func:`fifo_relabel` — microbatches relabelled so each (kind, stage, direction) runs them in
  index order (docs/modelling.md §1);
* :func:`sequential_schedule` — one microbatch at a time: valid under any accepted memory
  limit.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from cpsched.actions import Action, Kind, Overlap, Step, TimedAction, step_actions
from cpsched.engine import OrderError
from cpsched.instance import Instance
from cpsched.model import Schedule
from cpsched.rules import released_fraction
from cpsched.simulate import simulate
from cpsched.validate import TOLERANCE


def direction(instance: Instance, microbatch: int) -> int:
    """0, or 1 for the second half of the microbatches under ``bidirectional`` placement
    (they run the stages on the devices in reverse, docs/spec.md §1)."""
    return 1 if instance.placement == "bidirectional" and microbatch >= instance.m // 2 else 0


def split_fused(schedule: Schedule) -> list[TimedAction]:
    """A schedule's rows with every fused ``B`` of a split instance that is not part of an
    overlapped F&B pair turned into ``I`` then ``W`` back to back (never worse: memory is
    released no later).  Overlapped pairs are kept as they are."""
    inst = schedule.instance
    out: list[TimedAction] = []
    for a in schedule.actions:
        if a.kind == Kind.B and inst.split_backward and a.overlap is None:
            mid = inst.from_ticks(inst.ticks(a.start) + inst.ticks(inst.backward_input[a.stage]))
            out.append(TimedAction(a.device, a.stage, a.microbatch, Kind.I, a.start, mid))
            out.append(TimedAction(a.device, a.stage, a.microbatch, Kind.W, mid, a.end))
        else:
            out.append(a)
    return out


def serialise_overlaps(schedule: Schedule) -> Schedule | None:
    """The schedule with every overlapped F&B pair run as its backward then its forward.

    Only for instances without ``overlap_forward_backward`` (a pair then lasts ``F + B``):
    the backward runs first from the pair's start, the forward ends at the pair's end, so
    every dependency still holds, memory is allocated later and released earlier (never
    higher), and the makespan is unchanged.  Returns None when the instance has an overlap
    cost (the model then covers pairs itself) or the schedule has no pairs.
    """
    inst = schedule.instance
    if inst.overlap_forward_backward is not None:
        return None
    if all(a.overlap is None for a in schedule.actions):
        return None
    pairs: dict[int, list[TimedAction]] = {}
    out: list[TimedAction] = []
    for a in schedule.actions:
        if a.overlap is None:
            out.append(a)
        else:
            pairs.setdefault(a.overlap, []).append(a)
    for members in pairs.values():
        f = next(a for a in members if a.kind == Kind.F)
        b = next(a for a in members if a.kind != Kind.F)
        t = inst.ticks(b.start)
        dur_b = inst.ticks(inst.backward[b.stage] if b.kind == Kind.B
                           else inst.backward_input[b.stage])
        mid = t + dur_b
        end = mid + inst.ticks(inst.forward[f.stage])
        out.append(TimedAction(b.device, b.stage, b.microbatch, b.kind, b.start,
                               inst.from_ticks(mid)))
        out.append(TimedAction(f.device, f.stage, f.microbatch, f.kind, inst.from_ticks(mid),
                               inst.from_ticks(end)))
    return Schedule(inst, out, method=schedule.method)


def fifo_relabel(inst: Instance, actions: Sequence[TimedAction]) -> list[TimedAction]:
    """Relabel microbatches so that each (kind, stage, direction) runs them in index order
    (docs/modelling.md §1): the k-th start takes microbatch k.  Keeps makespan, validity,
    the memory profile and overlapped pairs (the ``overlap`` ids stay on the same rows).

    The backward of a (stage, microbatch) is one group whatever its form (``B``, fused or not,
    or ``I``): a fused ``B`` keeps its weight gradient with it, and the ``W`` rows are
    relabelled among the microbatches whose backward is an ``I``, in start order."""
    groups: dict[tuple, list[TimedAction]] = defaultdict(list)
    ws: dict[tuple, list[TimedAction]] = defaultdict(list)
    for a in actions:
        d = direction(inst, a.microbatch)
        if a.kind == Kind.W:
            ws[(a.stage, d)].append(a)
        else:
            groups[(a.kind == Kind.F, a.stage, d)].append(a)
    out = []
    unfused: dict[tuple, list[int]] = defaultdict(list)
    for (_, stage, d), acts in groups.items():
        mbs = sorted(a.microbatch for a in acts)
        for a, i in zip(sorted(acts, key=lambda x: (x.start, x.microbatch)), mbs, strict=True):
            out.append(TimedAction(a.device, a.stage, i, a.kind, a.start, a.end, a.overlap))
            if a.kind == Kind.I:
                unfused[(stage, d)].append(i)
    for key, acts in ws.items():
        mbs = sorted(unfused[key]) if len(unfused[key]) == len(acts) else sorted(
            a.microbatch for a in acts)  # not a complete schedule: keep the W labels' set
        for a, i in zip(sorted(acts, key=lambda x: (x.start, x.microbatch)), mbs, strict=True):
            out.append(TimedAction(a.device, a.stage, i, a.kind, a.start, a.end, a.overlap))
    return out


def sequential_schedule(inst: Instance) -> Schedule:
    """Microbatches one at a time (all forwards, then all backwards): valid under any memory
    limit that one microbatch fits in; the fallback warm start."""
    orders: list[list[Action]] = [[] for _ in range(inst.p)]
    bk = (Kind.I, Kind.W) if inst.split_backward else (Kind.B,)
    for i in range(inst.m):
        for s in range(inst.num_stages):
            orders[inst.device_of(s, i)].append(Action(Kind.F, s, i))
        for s in reversed(range(inst.num_stages)):
            for k in bk:
                orders[inst.device_of(s, i)].append(Action(k, s, i))
    return simulate(inst, orders, method="sequential")


def pairs_within_limit(schedule: Schedule) -> Schedule | None:
    """``schedule`` with every overlapped F&B pair that would take its device over the
    memory limit run as its backward, then its forward — on each device, in its order (what
    a device holds at each point of its order is fixed by the order itself: a forward takes
    its activation at its start, a backward gives its part back at its end, docs/spec.md
    §1) — timed by the simulator.  DualPipe holds ``p + 1`` activations in its steady state,
    each pair taking its forward's activation before its backward frees one; under a limit
    of ``p`` this runs those pairs' halves one after the other (docs/modelling.md §62).

    Returns:
        The timed schedule (method ``"<method>-fitted"``), or None: no memory limit, no pair
        over it, a plain forward over it (left as it is, so the result would not fit), or
        orders that cannot run.
    """
    inst = schedule.instance
    if inst.memory_limit is None:
        return None
    limit, act = inst.memory_limit + TOLERANCE, inst.activation  # the validator's rule

    def taken(step: Step) -> float:
        return sum(act[a.stage] for a in step_actions(step) if a.kind == Kind.F)

    def given(step: Step) -> float:
        return sum(act[a.stage] * released_fraction(inst, a.kind) for a in step_actions(step))

    orders, broken = [], 0
    for row in schedule.orders():
        held, out = 0.0, []
        for step in row:
            parts: list[Step] = [step]
            if held + taken(step) > limit:
                if not isinstance(step, Overlap):
                    return None
                parts, broken = [step.backward, step.forward], broken + 1
            for part in parts:
                out.append(part)
                held += taken(part) - given(part)
        orders.append(out)
    if not broken:
        return None
    try:
        return simulate(inst, orders, method=f"{schedule.method}-fitted")
    except OrderError:
        return None
