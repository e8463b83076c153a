"""The one validator: checks every constraint of docs/spec.md §1 on any timed schedule.

Independent **on purpose**.  Everything else that needs the pipeline's rules asks
:mod:`cpsched.rules` (the simulator, the list scheduler, the PyTorch import, the task graph,
the solver, the metrics); this module does not.  It re-derives the action set, placement,
durations, dependencies (with p2p lag), one-action-at-a-time per device (with overlapped F&B
pairs) and the memory limit directly from the instance, so that a mistake in the shared rules
cannot hide behind a check that shares it: heuristic output, solver output and files from
elsewhere are held to the rules as written in docs/spec.md, not as coded once.  Do not make it
import :mod:`cpsched.rules`, :mod:`cpsched.graph`, :mod:`cpsched.engine` or the simulator.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from cpsched.instance import Instance
from cpsched.metrics import memory_events, step_rows
from cpsched.model import Kind, Schedule, Status, TimedAction, gap

#: Absolute tolerance on times and memory, in the instance's units.
TOLERANCE = 1e-6

#: Tolerance on claimed fractions (bubble fraction, gap; files write them with 6 decimals).
FRACTION_TOLERANCE = 1e-5


_PLAIN = (int, float)


def _is_number(x: Any) -> bool:
    """A finite int or float (booleans and NaN/infinity are not times)."""
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _is_index(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _malformed(schedule: Schedule) -> list[str]:
    """Actions whose indices are not integers or whose times are not finite numbers: every
    other rule compares numbers, so these make the rest of the check meaningless."""
    out = []
    for a in schedule.actions:
        st, en = a.start, a.end  # fast path first: plain ints and finite floats
        if (type(a.device) is int and type(a.stage) is int and type(a.microbatch) is int
                and type(st) in _PLAIN and type(en) in _PLAIN and st - st == 0
                and en - en == 0):
            continue
        if not all(_is_index(x) for x in (a.device, a.stage, a.microbatch)):
            out.append(f"action {a.stage!r}{a.kind}{a.microbatch!r} on device {a.device!r}: "
                       "device, stage and microbatch must be integers")
        elif not (_is_number(a.start) and _is_number(a.end)):
            out.append(f"{a.stage}{a.kind}{a.microbatch}: start {a.start!r} and end {a.end!r} "
                       "must be finite numbers")
    return out


def _name(a: TimedAction) -> str:
    """An action's name in messages, e.g. ``3F7`` (stage, kind, microbatch)."""
    return f"{a.stage}{a.kind}{a.microbatch}"


def _durations(inst: Instance) -> dict[Kind, tuple[float, ...]]:
    """Per kind, the instance's durations by stage (time units)."""
    return {Kind.F: inst.forward, Kind.B: inst.backward, Kind.I: inst.backward_input,
            Kind.W: inst.backward_weight}


#: The ``durations`` modes of :func:`validate`.
DURATIONS = ("instance", "as-given")


def validate(schedule: Schedule, instance: Instance | None = None,
             max_violations: int = 50, *, durations: str = "instance") -> list[str]:
    """All violations of docs/spec.md §1 in ``schedule`` (empty list = valid).

    Args:
        instance: check against this instance instead of the schedule's own.
        max_violations: stop listing after this many.
        durations: ``"instance"`` (default): every action and pair lasts the instance's
            duration (§3.3 rule 3 and 5); ``"as-given"``: durations are taken as they are
            (a measured run, docs/trace.md) and every other rule is checked.

    Raises:
        ValueError: ``durations`` is neither of those.

    Returns:
        Human-readable violations, e.g. ``"1F0 starts at 4 before 0F0 ends at 5 + lag 0"``.
    """
    inst = instance or schedule.instance
    eps = TOLERANCE
    if durations not in DURATIONS:
        raise ValueError(f"durations = {durations!r}: 'instance' or 'as-given'")
    timed = durations == "instance"
    out: list[str] = []
    S, m, p = inst.num_stages, inst.m, inst.p

    def bad(msg: str) -> bool:
        out.append(msg)
        return len(out) >= max_violations

    malformed = _malformed(schedule)
    if malformed:
        return malformed[:max_violations]

    by_key: dict[tuple[Kind, int, int], TimedAction] = {}
    # the durations looked up once, not per action; an action's name is formatted only for
    # a violation (36 864 actions: 0.1 s a schedule)
    expected = _durations(inst)
    for a in schedule.actions:
        if not (0 <= a.stage < S and 0 <= a.microbatch < m and 0 <= a.device < p):
            if bad(f"{_name(a)} on device {a.device}: outside devices 0..{p - 1}, stages "
                   f"0..{S - 1}, microbatches 0..{m - 1}"):
                return out
            continue
        key = (a.kind, a.stage, a.microbatch)
        if key in by_key:
            if bad(f"{_name(a)} appears more than once"):
                return out
            continue
        by_key[key] = a
        if a.kind in (Kind.I, Kind.W) and not inst.split_backward:
            if bad(f"{_name(a)}: kind {a.kind} needs split_backward = true"):
                return out
        want = inst.device_of(a.stage, a.microbatch)
        if a.device != want and bad(f"{_name(a)} runs on device {a.device}; "
                                    f"{inst.placement} placement puts it on {want}"):
            return out
        if a.start < -eps and bad(f"{_name(a)} starts at {a.start} < 0"):
            return out
        if a.overlap is None and timed:
            exp = expected[a.kind][a.stage]
            if abs((a.end - a.start) - exp) > eps and bad(
                    f"{_name(a)} lasts {a.end - a.start:g}; its duration is {exp:g}"):
                return out

    # every action exactly once
    def backward_of(s: int, i: int) -> TimedAction | None:
        return by_key.get((Kind.B, s, i)) or by_key.get((Kind.I, s, i))

    for i in range(m):
        for s in range(S):
            if (Kind.F, s, i) not in by_key and bad(f"{s}F{i} is missing"):
                return out
            b, ii, w = (by_key.get((k, s, i)) for k in (Kind.B, Kind.I, Kind.W))
            if b is not None and (ii is not None or w is not None):
                if bad(f"stage {s} microbatch {i} has both a fused B and I/W"):
                    return out
            elif b is None and (ii is None or w is None):
                miss = [f"{s}{k}{i}" for k, x in ((Kind.I, ii), (Kind.W, w)) if x is None] \
                    if inst.split_backward else [f"{s}B{i}"]
                if bad(", ".join(miss) + " missing"):
                    return out

    # dependencies with lag
    lat = inst.p2p_latency
    for a in by_key.values():
        s, i = a.stage, a.microbatch
        preds: list[TimedAction | None] = []
        if a.kind == Kind.F and s > 0:
            preds = [by_key.get((Kind.F, s - 1, i))]
        elif a.kind in (Kind.B, Kind.I):
            preds = [by_key.get((Kind.F, s, i))] if s == S - 1 else [backward_of(s + 1, i)]
        elif a.kind == Kind.W:
            preds = [by_key.get((Kind.I, s, i))]
        for q in preds:
            if q is None:
                continue
            lag = lat if q.device != a.device else 0.0
            if a.start + eps < q.end + lag and bad(
                    f"{a.stage}{a.kind}{a.microbatch} starts at {a.start:g} before "
                    f"{q.stage}{q.kind}{q.microbatch} ends at {q.end:g} + lag {lag:g}"):
                return out

    # overlapped pairs
    groups: dict[int, list[TimedAction]] = defaultdict(list)
    for a in schedule.actions:
        if a.overlap is not None:
            groups[a.overlap].append(a)
    ov = inst.overlap_forward_backward
    for gid, members in groups.items():
        kinds = sorted(str(x.kind) for x in members)
        if len(members) != 2 or kinds[0] not in ("B", "I") or kinds[1] != "F":
            if bad(f"overlap {gid}: must pair one F with one B or I, has {kinds}"):
                return out
            continue
        f, b = (members[0], members[1]) if members[0].kind == Kind.F else (members[1],
                                                                           members[0])
        if f.device != b.device or abs(f.start - b.start) > eps or abs(f.end - b.end) > eps:
            if bad(f"overlap {gid}: {f.stage}F{f.microbatch} and {b.stage}{b.kind}"
                   f"{b.microbatch} must share device, start and end"):
                return out
            continue
        exp = ov[f.stage] if ov is not None else (expected[f.kind][f.stage]
                                                  + expected[b.kind][b.stage])
        if timed and abs((f.end - f.start) - exp) > eps and bad(
                f"overlap {gid} lasts {f.end - f.start:g}; an overlapped F&B pair lasts {exp:g}"):
            return out

    # one step at a time per device
    per_dev: dict[int, list[tuple[float, float, str]]] = defaultdict(list)
    for a in step_rows(schedule.actions):
        if a.end - a.start > eps:  # an empty interval occupies no device time
            per_dev[a.device].append((a.start, a.end, f"{a.stage}{a.kind}{a.microbatch}"))
    for d, ivs in per_dev.items():
        ivs.sort()
        s1, e1, n1 = ivs[0]
        for s2, e2, n2 in ivs[1:]:  # compare with the interval reaching furthest so far
            if s2 + eps < e1 and bad(f"device {d}: {n1} [{s1:g}, {e1:g}) overlaps "
                                     f"{n2} [{s2:g}, {e2:g})"):
                return out
            if e2 > e1:
                s1, e1, n1 = s2, e2, n2

    # memory limit
    for d, held, t in _over_memory_limit(inst, schedule.actions):
        if bad(f"device {d} holds {held:g} > memory limit {inst.memory_limit:g} at time {t:g}"):
            return out
    return out


def _over_memory_limit(inst: Instance, actions: Iterable[TimedAction]
                       ) -> Iterator[tuple[int, float, float]]:
    """The memory rule: per device over the limit, in device order, ``(device, held, time)``
    at the first instant it holds more than ``limit + TOLERANCE`` (none without a limit)."""
    limit = inst.memory_limit
    if limit is None:
        return
    for d, ev in enumerate(memory_events(inst, actions)):
        held = 0.0
        for t, delta in ev:
            held += delta
            if held > limit + TOLERANCE:
                yield d, held, t
                break


def exceeds_memory_limit(schedule: Schedule, instance: Instance | None = None) -> bool:
    """Whether some device of ``schedule`` holds more than the memory limit at some instant:
    then :func:`validate` reports it (both run :func:`_over_memory_limit`).  It runs that
    rule alone, so a schedule that cannot be valid is passed over without the other checks
    (a full validation costs 0.1-0.5 s at 32 768 actions, this 0.03 s).  False for a malformed
    schedule or actions outside the instance (:func:`validate` says why) and without a
    limit.

    Args:
        instance: check against this instance instead of the schedule's own.
    """
    inst = instance or schedule.instance
    if inst.memory_limit is None or _malformed(schedule) or not all(
            0 <= a.device < inst.p and 0 <= a.stage < inst.num_stages
            for a in schedule.actions):
        return False
    return next(_over_memory_limit(inst, schedule.actions), None) is not None


def _close(x: float, y: float, tol: float = TOLERANCE) -> bool:
    return abs(x - y) <= tol + 1e-9 * max(abs(x), abs(y))


def validate_claims(schedule: Schedule, claims: Mapping[str, Any] | None = None) -> list[str]:
    """Where what a schedule (file) says about itself disagrees with what its actions give.

    Checks ``schedule.status`` and ``schedule.lower_bound`` (a bound can never exceed the
    makespan of a schedule it bounds; ``OPTIMAL`` needs a bound equal to the makespan;
    ``INFEASIBLE`` cannot come with actions) and, when present in ``claims`` (a schedule
    file's fields, docs/spec.md §3.1), ``makespan``, ``gap`` and ``peak_memory`` (tolerance
    :data:`TOLERANCE`, plus 1e-9 relative) and ``bubble_fraction`` (tolerance
    :data:`FRACTION_TOLERANCE`, as ``gap``).  Meant for a schedule :func:`validate` found
    valid; one with non-finite times or actions outside the instance gives no message here.

    Returns:
        One message per false claim (empty: every claim holds).
    """
    claims = claims or {}
    out: list[str] = []
    inst = schedule.instance
    if _malformed(schedule) or not all(
            0 <= a.device < inst.p and 0 <= a.stage < inst.num_stages
            and 0 <= a.microbatch < inst.m for a in schedule.actions):
        return out  # no metrics of actions outside the instance: validate() reports them
    ms, lb, status = schedule.makespan, schedule.lower_bound, schedule.status
    if lb is not None and not _is_number(lb):
        return [f"lower_bound = {lb!r}: must be a finite number or null"]
    if lb is not None and lb > ms + TOLERANCE + 1e-9 * abs(ms):
        out.append(f"lower_bound {lb:g} is above the makespan {ms:g} of the schedule it "
                   "bounds: it is not a lower bound")
    if status == Status.OPTIMAL and (lb is None or not _close(lb, ms)):
        out.append(f"status OPTIMAL needs lower_bound == makespan ({ms:g}); the file's "
                   f"lower_bound is {'null' if lb is None else f'{lb:g}'}")
    if status == Status.INFEASIBLE and schedule.actions:
        out.append("status INFEASIBLE, yet the file holds a schedule")
    out += _metric_claims(schedule, claims)
    return out


def _metric_claims(schedule: Schedule, claims: Mapping[str, Any]) -> list[str]:
    """The claimed makespan, gap, bubble fraction and peak memory against the actions."""
    out: list[str] = []
    ms = schedule.makespan
    derived: dict[str, Any] = {"makespan": ms, "bubble_fraction": schedule.bubble_fraction,
                               "gap": gap(ms, schedule.lower_bound)}
    for key, tol in (("makespan", TOLERANCE), ("gap", FRACTION_TOLERANCE),
                     ("bubble_fraction", FRACTION_TOLERANCE)):
        if key not in claims:
            continue
        said, actual = claims[key], derived[key]
        if said is None and actual is None:
            continue
        if said is None or actual is None or not _is_number(said) or not _close(said, actual,
                                                                                 tol):
            out.append(f"{key} in the file is {said!r}; the actions give "
                       f"{'null' if actual is None else f'{actual:.6g}'}")
    said = claims.get("peak_memory")
    if said is not None:
        peaks = schedule.peak_memory
        if (not isinstance(said, list | tuple) or len(said) != len(peaks)
                or not all(_is_number(x) and _close(x, y) for x, y in zip(said, peaks,
                                                                           strict=False))):
            out.append(f"peak_memory in the file is {said!r}; the actions give "
                       f"{[round(x, 6) for x in peaks]}")
    return out
