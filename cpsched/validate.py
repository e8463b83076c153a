"""The one validator: checks every constraint of SPEC §1 on any timed schedule.

Independent of the task graph, the simulator and the CP-SAT model: it re-derives the action
set, placement, durations, dependencies (with p2p lag), one-action-at-a-time per device (with
overlapped F&B pairs), and the memory limit directly from the instance, so heuristic output,
solver output and files from elsewhere are held to the same rules.
"""

from __future__ import annotations

from collections import defaultdict

from cpsched.instance import Instance
from cpsched.metrics import memory_events, step_rows
from cpsched.model import Kind, Schedule, TimedAction

#: Absolute tolerance on times and memory, in the instance's units.
TOLERANCE = 1e-6


def _expected_duration(inst: Instance, a: TimedAction) -> float:
    s = a.stage
    return {Kind.F: inst.forward[s], Kind.B: inst.backward[s], Kind.I: inst.backward_input[s],
            Kind.W: inst.backward_weight[s]}[a.kind]


def validate(schedule: Schedule, instance: Instance | None = None,
             max_violations: int = 50) -> list[str]:
    """All violations of SPEC §1 in ``schedule`` (empty list = valid).

    Args:
        instance: check against this instance instead of the schedule's own.
        max_violations: stop listing after this many.

    Returns:
        Human-readable violations, e.g. ``"1F0 starts at 4 before 0F0 ends at 5 + lag 0"``.
    """
    inst = instance or schedule.instance
    eps = TOLERANCE
    out: list[str] = []
    S, m, p = inst.num_stages, inst.m, inst.p

    def bad(msg: str) -> bool:
        out.append(msg)
        return len(out) >= max_violations

    by_key: dict[tuple[Kind, int, int], TimedAction] = {}
    for a in schedule.actions:
        name = f"{a.stage}{a.kind}{a.microbatch}"
        if not (0 <= a.stage < S and 0 <= a.microbatch < m and 0 <= a.device < p):
            if bad(f"{name} on device {a.device}: outside devices 0..{p - 1}, stages "
                   f"0..{S - 1}, microbatches 0..{m - 1}"):
                return out
            continue
        key = (a.kind, a.stage, a.microbatch)
        if key in by_key:
            if bad(f"{name} appears more than once"):
                return out
            continue
        by_key[key] = a
        if a.kind in (Kind.I, Kind.W) and not inst.split_backward:
            if bad(f"{name}: kind {a.kind} needs split_backward = true"):
                return out
        want = inst.device_of(a.stage, a.microbatch)
        if a.device != want and bad(f"{name} runs on device {a.device}; "
                                    f"{inst.placement} placement puts it on {want}"):
            return out
        if a.start < -eps and bad(f"{name} starts at {a.start} < 0"):
            return out
        if a.overlap is None:
            exp = _expected_duration(inst, a)
            if abs((a.end - a.start) - exp) > eps and bad(
                    f"{name} lasts {a.end - a.start:g}; its duration is {exp:g}"):
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
        exp = ov[f.stage] if ov is not None else (_expected_duration(inst, f)
                                                  + _expected_duration(inst, b))
        if abs((f.end - f.start) - exp) > eps and bad(
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
    limit = inst.memory_limit
    if limit is not None:
        for d, ev in enumerate(memory_events(inst, schedule.actions)):
            held = 0.0
            for t, delta in ev:
                held += delta
                if held > limit + eps:
                    if bad(f"device {d} holds {held:g} > memory limit {limit:g} at time {t:g}"):
                        return out
                    break
    return out
