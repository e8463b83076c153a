"""The one simulator: per-device action orders → a timed :class:`~cpsched.model.Schedule`.

Every heuristic emits per-device orders; this turns them into times with the event engine
(:func:`cpsched.engine.run_orders`).  Each step starts as soon as its device is free and every
predecessor (docs/spec.md §1, :mod:`cpsched.rules`) has ended plus its p2p lag; an overlapped
F&B pair starts when both members are ready and lasts ``overlap_forward_backward``.  Orders that
cannot run raise :class:`OrderError`; a deadlock names the waiting cycle.

Large orders of plain actions (no pairs) that name every action once, on its device, take a
fast path to the same times (:func:`plain_run`): numpy compiles them into integer arrays (per
step: the step it waits for, lag, duration) that one lean loop runs, and the rows are built by
C-level maps.  Anything else, or a deadlock, goes through the engine (tests check that both
give the same schedules and errors).  When every step lasts at least one tick the rows come
out in the schedule's row order (:func:`in_row_order`), so the schedule keeps them unsorted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import chain, repeat
from typing import Any

from cpsched.actions import Action, Kind, Overlap, Step, TimedAction, step_actions
from cpsched.engine import OrderError, OrderRun, paused_gc, run_orders, waiting_cycle
from cpsched.instance import Instance
from cpsched.model import Schedule
from cpsched.rules import Fault, action_fault, gaps, pair_kinds_ok, stage_ticks

#: Orders of at least this many steps, all plain actions, try :func:`plain_run` first.
FAST_MIN_STEPS = 2000
#: Kinds, stages and microbatches of every step of some orders, device after device.
Columns = tuple[Sequence[Any], Sequence[Any], Sequence[Any]]
_KINDS = (Kind.F, Kind.B, Kind.I, Kind.W)


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
    with paused_gc():  # nothing cyclic here: the collector would only rescan the new rows
        large = sum(map(len, orders)) >= FAST_MIN_STEPS
        columns = plain_columns(orders) if large else None
        run = plain_run(instance, orders, columns) if columns is not None else None
        if run is None:
            run = run_orders(instance, orders)
            if run.suspect or run.stuck:
                check_orders(instance, orders)  # raises on any completeness problem
            if run.stuck:
                raise OrderError(deadlock_message(orders, run))
            if run.suspect:  # pragma: no cover - check_orders names every problem the run meets
                raise OrderError("orders break the completeness rule")
        schedule = Schedule(instance, timed_rows(instance, orders, run, columns), method=method,
                            status=status, presorted=in_row_order(instance))
        del columns, run  # freed before the collector resumes: it need not scan them
    return schedule


def timed_rows(instance: Instance, orders: Sequence[Sequence[Step]], run: OrderRun,
               columns: Columns | None = None) -> list[TimedAction]:
    """The schedule rows of a complete :class:`~cpsched.engine.OrderRun` (instance units),
    device after device in run order.  ``columns``: :func:`plain_columns` of ``orders``
    (then the rows are built by C-level maps, no Python code per row)."""
    if columns is not None:
        kinds, stages, microbatches = columns
        devices = chain.from_iterable(repeat(d, len(steps)) for d, steps in enumerate(orders))
        return list(map(tuple.__new__, repeat(TimedAction), zip(
            devices, stages, microbatches, kinds, _units(instance, run.starts),
            _units(instance, run.ends), repeat(None), strict=False)))
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


def in_row_order(instance: Instance) -> bool:
    """True when every step of ``instance`` lasts at least one tick: then a device's steps
    start strictly one after another, and :func:`timed_rows` lists the rows in the order of
    :class:`~cpsched.model.Schedule` (device, start; a pair's F first)."""
    costs = [instance.forward, instance.backward]  # as rules.stage_ticks: B is I + W if split
    if instance.split_backward:
        costs += [instance.backward_input, instance.backward_weight]
    if instance.overlap_forward_backward is not None:
        costs.append(instance.overlap_forward_backward)
    return all(instance.ticks(min(c)) > 0 for c in costs)  # ticks() is monotone


def plain_columns(orders: Sequence[Sequence[Step]]) -> Columns | None:
    """The kinds, stages and microbatches of every step of ``orders``, device after device;
    None unless every step is a plain :class:`~cpsched.actions.Action`."""
    steps = list(chain.from_iterable(orders))
    if not steps or list(map(type, steps)).count(Action) != len(steps):
        return None
    kinds, stages, microbatches = zip(*steps, strict=True)
    return kinds, stages, microbatches


def plain_run(instance: Instance, orders: Sequence[Sequence[Step]], columns: Columns
              ) -> OrderRun | None:
    """What :func:`~cpsched.engine.run_orders` finds for orders of plain actions
    (``columns``: their :func:`plain_columns`), by a vectorised path: None — the engine
    shall run them and say what is wrong — unless they name every action of the instance
    once, on its device, and run to the end."""
    compiled = _compile(instance, orders, columns)
    if compiled is None:
        return None
    pred, lag, dur, bounds = compiled
    n = len(pred)
    end: list[int | None] = [None] * n + [0]  # end[n]: what a first forward waits for
    start = [0] * n
    ptr, free = [a for a, _ in bounds], [0] * len(bounds)
    wait = [-1] * len(bounds)  # the step each device waits for (-1: none yet)
    progress = True
    while progress:  # rounds, as the engine's: every device in turn as far as it can go
        progress = False
        for d, (_, b) in enumerate(bounds):
            g, w = ptr[d], wait[d]
            if g >= b or (w >= 0 and end[w] is None):
                continue
            g0, t = g, free[d]
            while g < b:
                w = pred[g]
                ready = end[w]
                if ready is None:
                    break
                if lag is not None:  # else no p2p latency (the default): no lag to add
                    ready += lag[g]
                if ready < t:
                    ready = t
                start[g] = ready
                t = end[g] = ready + dur[g]
                g += 1
            wait[d] = w
            if g > g0:
                ptr[d], free[d], progress = g, t, True
    if any(g < b for g, (_, b) in zip(ptr, bounds, strict=True)):
        return None  # a deadlock: the engine names it
    return OrderRun([start[a:b] for a, b in bounds], [end[a:b] for a, b in bounds])


def _compile(instance: Instance, orders: Sequence[Sequence[Step]], columns: Columns
             ) -> tuple[list[int], list[int] | None, list[int], list[tuple[int, int]]] | None:
    """Per step (device after device): the step it waits for (``len(steps)``: none), the
    lag (None: all 0) and the duration in ticks (the engine's rules, from
    :func:`~cpsched.rules.stage_ticks`), and each device's ``[first, last + 1)`` steps; None
    unless the orders name every action of the instance exactly once, on its device."""
    import numpy as np  # only for large orders: keeps ``import cpsched`` light

    if len(orders) != instance.p:
        return None
    S, m, tk = instance.num_stages, instance.m, stage_ticks(instance)
    kinds = _KINDS if instance.split_backward else _KINDS[:2]
    lut = np.full(256, -1)
    lut[[ord(k) for k in kinds]] = range(len(kinds))
    try:
        code = lut[np.frombuffer("".join(columns[0]).encode("ascii"), dtype=np.uint8)]
    except (TypeError, ValueError):  # a kind that is not a one-letter string
        return None
    n = len(code)
    try:  # integers only (a float among them makes the sum a float; a string, an error)
        ints = type(sum(columns[1])) is int and type(sum(columns[2])) is int
        if n != len(columns[1]) or not ints:
            return None
        s, i = np.fromiter(columns[1], np.int64, n), np.fromiter(columns[2], np.int64, n)
    except (TypeError, OverflowError):
        return None
    if code.min() < 0 or s.min() < 0 or s.max() >= S or i.min() < 0 or i.max() >= m:
        return None
    lens = [len(steps) for steps in orders]
    row = (i >= tk.half) * S + s  # index into the (direction, stage) tables
    if (np.ravel(tk.device)[row] != np.repeat(np.arange(len(lens)), lens)).any():
        return None
    slot = (s * m + i) * 4 + code  # one slot per action: (stage, microbatch, kind)
    count = np.bincount(slot, minlength=4 * S * m).reshape(S * m, 4)
    f, b, i_, w = count.T
    if (f != 1).any() or (b + i_ != 1).any() or (w != i_).any():
        return None  # not every action exactly once (F; B, or I and W)
    step = np.full(4 * S * m, -1)
    step[slot] = np.arange(len(slot))
    fwd, wgt, last = code == 0, code == 3, s == S - 1
    nxt = (s + 1) * m + i  # the next stage's B or I (whichever it runs), for B/I not last
    nxt_step = step[4 * np.where(last, 0, nxt) + 1 + (b[np.where(last, 0, nxt)] == 0)]
    pred = np.where(fwd, np.where(s > 0, step[np.maximum(slot - 4 * m, 0)], len(slot)),
                    np.where(wgt, step[slot - 1], np.where(last, step[slot - code], nxt_step)))
    lag = np.where(fwd, np.ravel(tk.forward_lag)[row],
                   np.where(wgt | last, 0, np.ravel(tk.backward_lag)[row]))
    dur = np.array([tk.duration[k] for k in _KINDS])[code, s]
    bounds = np.cumsum([0, *lens]).tolist()
    return (pred.tolist(), lag.tolist() if lag.any() else None, dur.tolist(),
            list(zip(bounds, bounds[1:], strict=False)))


def _units(instance: Instance, ticks: list[list[int]]) -> Iterable[float]:
    """Every tick of ``ticks`` (device after device) in instance units, as
    :meth:`Instance.from_ticks` (each distinct tick converted once)."""
    flat = chain.from_iterable(ticks)
    if instance.time_scale == 1:
        return flat
    ts = list(flat)
    memo = {t: instance.from_ticks(t) for t in set(ts)}
    return map(memo.__getitem__, ts)


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


__all__ = ["FAST_MIN_STEPS", "OrderError", "check_orders", "deadlock_message", "in_row_order",
           "plain_columns", "plain_run", "simulate", "timed_rows"]
