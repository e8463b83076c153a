"""The schedule registry: name → generator, preconditions, source."""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from cpsched.forked import ForkedCall, can_fork
from cpsched.instance import Instance
from cpsched.model import DeviceOrders, Schedule
from cpsched.simulate import OrderError, simulate
from cpsched.validate import exceeds_memory_limit, validate


class NotApplicable(ValueError):
    """A schedule's precondition fails on an instance; the message names the parameter, its
    value and the real requirement (e.g. ``pipeline.microbatches = 4: dualpipe needs >= 6``)."""


Generator = Callable[[Instance], DeviceOrders]
Check = Callable[[Instance], str | None]


@dataclass(frozen=True)
class ScheduleSpec:
    """A registered schedule.

    Attributes:
        name: registry name (``"1f1b"``).
        summary: one line for ``cpsched schedules``.
        preconditions: human-readable preconditions.
        source: paper / repository the order follows.
        check: returns None when applicable, else the reason (field, value, requirement).
        generate: the order generator (called only when ``check`` passes).
        expensive: a search rather than a closed-form order (e.g. the list-scheduling
            portfolio): :func:`run_all` runs it after the others and skips it past a deadline.
        min_seconds: for an expensive generator that only improves on another one (e.g.
            ``list-retimed``), the least time (seconds) worth starting it with: :func:`run_all`
            skips it when less is left before its deadline and a schedule so far is valid.
    """

    name: str
    summary: str
    preconditions: str
    source: str
    check: Check
    generate: Generator
    expensive: bool = False
    min_seconds: Callable[[Instance], float] | None = None

    def reason_not_applicable(self, instance: Instance) -> str | None:
        """None if the schedule applies to ``instance``, else why not."""
        return self.check(instance)

    def orders(self, instance: Instance) -> DeviceOrders:
        """Per-rank orders for ``instance``.  Raises :class:`NotApplicable`."""
        why = self.check(instance)
        if why is not None:
            raise NotApplicable(f"{self.name}: {why}")
        return self.generate(instance)


REGISTRY: dict[str, ScheduleSpec] = {}

#: the deadline (``time.perf_counter()`` value) of the :func:`run_all` call in progress
_DEADLINE: ContextVar[float | None] = ContextVar("cpsched_schedules_deadline", default=None)


def deadline() -> float | None:
    """The deadline of the :func:`run_all` call in progress (None: none): an expensive
    generator (a search) stops improving its result when it has passed."""
    return _DEADLINE.get()


def register(name: str, *, summary: str, preconditions: str, source: str,
             check: Check, expensive: bool = False,
             min_seconds: Callable[[Instance], float] | None = None
             ) -> Callable[[Generator], Generator]:
    """Decorator registering an order generator under ``name`` (see :class:`ScheduleSpec`)."""

    def deco(fn: Generator) -> Generator:
        if name in REGISTRY:
            raise ValueError(f"schedule {name!r} registered twice")
        REGISTRY[name] = ScheduleSpec(name, summary, preconditions, source, check, fn,
                                      expensive, min_seconds)
        return fn

    return deco


def get_schedule(name: str) -> ScheduleSpec:
    """The registered schedule ``name``.  Raises :class:`KeyError`-free ``ValueError``
    listing the known names."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"schedule = {name!r}: unknown; known schedules: "
                         + ", ".join(sorted(REGISTRY))) from None


def applicable_schedules(instance: Instance) -> list[ScheduleSpec]:
    """Registered schedules whose preconditions hold on ``instance`` (registry order)."""
    return [s for s in REGISTRY.values() if s.check(instance) is None]


def run_schedule(name: str, instance: Instance) -> Schedule:
    """Generate and time the named schedule on ``instance`` (status ``HEURISTIC``).

    Raises:
        ValueError: unknown name; NotApplicable: preconditions fail.
    """
    spec = get_schedule(name)
    return simulate(instance, spec.orders(instance), method=name)


def run_all(instance: Instance, deadline: float | None = None,
            failed: dict[str, str] | None = None, processes: int = 1,
            timing: dict[str, float] | None = None) -> dict[str, Schedule]:
    """Every applicable schedule, timed: ``{name: schedule}`` (registry order).

    Args:
        deadline: a ``time.perf_counter()`` value; expensive schedules (searches such as the
            list-scheduling portfolio, :attr:`ScheduleSpec.expensive`) run after the
            closed-form ones and only while it has not passed (and, for one with
            :attr:`ScheduleSpec.min_seconds`, while that much is left), so a caller's time limit
            bounds this too without losing any closed-form schedule — unless no schedule so
            far is valid (e.g. none fits the memory limit): then they still run, and cut
            short by the same deadline (:func:`deadline`) they make their first, cheapest
            run only (one list-scheduling pass), so that the warm start is not the
            sequential schedule.
        failed: when given, a generator whose orders cannot run (:class:`OrderError`, a bug
            in that generator) is left out and recorded here as ``{name: message}``, and
            the others still run; when None the error propagates.
        processes: at most this many expensive generators run at once: the first in this
            process, the next ``processes - 1`` side by side in forked children
            (:class:`cpsched.forked.ForkedCall`; where this process cannot fork, one at a
            time).  The schedules are the same as one at a time — each generator is the same
            deterministic computation, and a child's result is dropped (the child killed)
            where one at a time would have skipped it: a schedule so far meets the lower
            bound, or too little time is left after the first and one is valid
            (docs/modelling.md §45).
        timing: when given, ``timing["waited"]`` is set to the seconds this process waited
            for its children (0 without them): the rest of the wall time was its own work.

    Raises:
        OrderError: a generator's orders cannot run and ``failed`` is None.
        Exception: what a generator raises (a bug), also when it ran in a child.
    """
    out: dict[str, Schedule] = {}
    specs = applicable_schedules(instance)
    token = _DEADLINE.set(deadline)
    side: dict[str, ForkedCall] = {}
    waited = 0.0
    try:
        for spec in specs:
            if not spec.expensive:
                _time(spec, instance, out, failed, spec.generate)
        expensive = [s for s in specs if s.expensive]
        if processes > 1 and len(expensive) > 1 and can_fork():
            side = {s.name: ForkedCall(s.generate, instance) for s in expensive[1:processes]
                    if not _skip(s, instance, out, deadline)}
        for spec in expensive:
            call = side.pop(spec.name, None)
            if _skip(spec, instance, out, deadline):  # as one at a time: its child killed
                if call is not None:
                    call.cancel()
                continue
            if call is None:
                _time(spec, instance, out, failed, spec.generate)
                continue
            t = time.perf_counter()
            orders = call.result()
            waited += time.perf_counter() - t
            _time(spec, instance, out, failed, lambda _inst, o=orders: o)
    finally:
        for call in side.values():
            call.cancel()
        _DEADLINE.reset(token)
        if timing is not None:
            timing["waited"] = waited
    return {s.name: out[s.name] for s in specs if s.name in out}  # registry order


def _skip(spec: ScheduleSpec, instance: Instance, out: dict[str, Schedule],
          deadline: float | None) -> bool:
    """Whether the expensive ``spec`` is not run: a schedule in ``out`` already meets the
    lower bound, or ``deadline`` leaves too little time and a schedule in ``out`` is valid
    (:func:`run_all`)."""
    return _optimal_among(instance, out) or (
        deadline is not None and _out_of_time(spec, instance, deadline)
        and _valid_among(instance, out))


def _time(spec: ScheduleSpec, instance: Instance, out: dict[str, Schedule],
          failed: dict[str, str] | None, generate: Generator) -> None:
    """Time ``generate(instance)`` (the orders of ``spec``) into ``out[spec.name]``; orders
    that cannot run are recorded in ``failed`` when given (else :class:`OrderError`)."""
    try:
        out[spec.name] = simulate(instance, generate(instance), method=spec.name)
    except OrderError as exc:
        if failed is None:
            raise
        failed[spec.name] = str(exc)


def _out_of_time(spec: ScheduleSpec, instance: Instance, deadline: float) -> bool:
    """Whether too little is left before ``deadline`` to start ``spec``: nothing, or less
    than its :attr:`ScheduleSpec.min_seconds`."""
    need = 0.0 if spec.min_seconds is None else spec.min_seconds(instance)
    return time.perf_counter() >= deadline - need


def _valid_among(instance: Instance, schedules: dict[str, Schedule]) -> bool:
    """Whether one of ``schedules`` is valid (fits the memory limit, among the rest); those
    over the limit are passed over without a full validation.  The latest first: a search's
    schedule (the list scheduler's) fits by construction, so one validation (kept for the
    warm-start choice, :func:`validated`) usually decides."""
    return any(not over_memory_limit(s, instance) and not validated(s, instance)
               for s in reversed(schedules.values()))


def _optimal_among(instance: Instance, schedules: dict[str, Schedule]) -> bool:
    """Whether a valid schedule among ``schedules`` already meets the plain lower bound (then
    no search can do better, and expensive generators are skipped)."""
    fitting = [s for s in schedules.values() if not over_memory_limit(s, instance)]
    if not fitting:  # no bound needed (building the task graph for it takes 0.5-1 s at 32k)
        return False
    bound = _plain_bound(instance)
    return any(instance.ticks(s.makespan) <= bound and not validated(s, instance)
               for s in fitting)


#: the plain lower bound (ticks) of the last instance asked for (:func:`_plain_bound`)
_LAST_BOUND: list[tuple[Instance, int]] = []


def _plain_bound(instance: Instance) -> int:
    """The plain lower bound (ticks; :func:`cpsched.graph.lower_bound`, with an overlap cost
    :func:`cpsched.graph.overlap_lower_bound`) of ``instance``, kept for the last instance
    asked for: :func:`run_all` asks before each expensive generator, and at 36 864 actions
    each computation (heads and tails over the task graph) takes about 0.2 s.  Reused only
    for the same instance object (instances are frozen)."""
    with _VALIDATED_LOCK:
        if _LAST_BOUND and _LAST_BOUND[0][0] is instance:
            return _LAST_BOUND[0][1]
    from cpsched.graph import lower_bound, overlap_lower_bound

    bound = (overlap_lower_bound(instance) if instance.overlap_forward_backward is not None
             else lower_bound(instance).value)
    with _VALIDATED_LOCK:
        _LAST_BOUND[:] = [(instance, bound)]
    return bound


# ------------------------------------------------------------- validation, once per schedule
#: id(schedule) -> (weak reference, instance, the actions checked, {check: its answer})
_VALIDATED: dict[int, tuple[weakref.ref[Schedule], Instance, list, dict[str, Any]]] = {}
_VALIDATED_LOCK = threading.RLock()  # re-entrant: the collector may call _forget


def _once(schedule: Schedule, check: str, compute: Callable[[Schedule], Any]) -> Any:
    """``compute(schedule)``, computed once per schedule object and ``check`` name (the
    known schedules of :func:`run_all` are checked for the lower-bound skip, by the warm
    start and for the results table, and each check after the first is a look-up).

    The answer is reused only while the schedule still has the same instance and the same
    actions (compared element by element: an action list changed in place, or replaced, is
    checked again), so a stale answer is impossible; an entry goes when its schedule is
    garbage-collected."""
    key = id(schedule)
    with _VALIDATED_LOCK:
        hit = _VALIDATED.get(key)
    if hit is not None and hit[0]() is schedule and hit[1] is schedule.instance \
            and hit[2] == schedule.actions:
        if check in hit[3]:
            return hit[3][check]
        answers = hit[3]
    else:
        answers = {}
        ref = weakref.ref(schedule, lambda _r, k=key: _forget(k, _r))
        with _VALIDATED_LOCK:
            _VALIDATED[key] = (ref, schedule.instance, list(schedule.actions), answers)
    value = compute(schedule)
    with _VALIDATED_LOCK:
        answers[check] = value
    return value


def validated(schedule: Schedule, instance: Instance | None = None) -> list[str]:
    """:func:`cpsched.validate.validate` of ``schedule`` (default limits), computed once per
    schedule object (:func:`_once`).  A copy is returned (callers may change it).

    Args:
        instance: check against this instance instead of the schedule's own (cached only
            when it is the schedule's own).
    """
    return list(_own(schedule, instance, "violations", validate))


def over_memory_limit(schedule: Schedule, instance: Instance | None = None) -> bool:
    """:func:`cpsched.validate.exceeds_memory_limit` of ``schedule``, computed once per
    schedule object as :func:`validated` (``instance`` as there): :func:`run_all` asks it of
    every schedule so far before each expensive generator, at 36 864 actions 0.04 s each."""
    return bool(_own(schedule, instance, "over memory limit", exceeds_memory_limit))


def _own(schedule: Schedule, instance: Instance | None, check: str,
         compute: Callable[[Schedule, Instance | None], Any]) -> Any:
    """``compute`` against another ``instance`` as it is; against the schedule's own, once
    (:func:`_once`)."""
    if instance is not None and instance is not schedule.instance:
        return compute(schedule, instance)
    return _once(schedule, check, compute)


def _forget(key: int, ref: weakref.ref[Schedule]) -> None:
    """Drop the entry of a collected schedule (unless the id was reused meanwhile)."""
    with _VALIDATED_LOCK:
        if key in _VALIDATED and _VALIDATED[key][0] is ref:
            del _VALIDATED[key]
