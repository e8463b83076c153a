"""Schedule metrics (docs/spec.md §5): makespan, busy time, bubble fraction, memory over time.

Memory rule (docs/spec.md §1): stage ``s`` holds ``activation[s]`` per microbatch from the
*start* of ``F(s, i)`` until released: all at the end of ``B(s, i)``; with split backward
the fraction ``released_by_input`` at the end of ``I(s, i)`` and the rest at the end of ``W(s, i)``.
Intervals are half-open ``[start, end)``: at one instant, releases happen before allocations.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Protocol

from cpsched.actions import Kind, TimedAction

if TYPE_CHECKING:
    from cpsched.instance import Instance


class Timed(Protocol):
    """What the metrics need of a schedule: its instance and its timed actions (a
    :class:`cpsched.model.Schedule` is one; this module does not import it)."""

    @property
    def instance(self) -> Instance: ...

    @property
    def actions(self) -> Sequence[TimedAction]: ...

    @property
    def makespan(self) -> float: ...


def memory_events(instance: Instance, actions: Iterable[TimedAction]) -> list[list[tuple[float,
                                                                                         float]]]:
    """Memory deltas per device: ``events[d]`` = sorted ``(time, delta)``, releases first at
    equal times."""
    events: list[list[tuple[float, float]]] = [[] for _ in range(instance.p)]
    r = instance.released_by_input
    for a in actions:
        act = instance.activation[a.stage]
        if a.kind == Kind.F:
            delta, t = act, a.start
        elif a.kind == Kind.B:
            delta, t = -act, a.end
        elif a.kind == Kind.I:
            delta, t = -act * r, a.end
        else:
            delta, t = -act * (1 - r), a.end
        if delta:
            events[a.device].append((t, delta))
    for ev in events:
        ev.sort()
    return events


def memory_profile(schedule: Timed) -> list[list[tuple[float, float]]]:
    """Memory held per device as a step function: ``profile[d]`` = ``[(time, held after),
    ...]`` starting at ``(0, 0)``."""
    out = []
    for ev in memory_events(schedule.instance, schedule.actions):
        held, steps = 0.0, [(0.0, 0.0)]
        for t, delta in ev:
            held += delta
            if steps and steps[-1][0] == t:
                steps[-1] = (t, held)
            else:
                steps.append((t, held))
        out.append(steps)
    return out


def peak_memory(schedule: Timed) -> list[float]:
    """Peak memory held per device (max over time of the memory rule above)."""
    peaks = []
    for ev in memory_events(schedule.instance, schedule.actions):
        held = peak = 0.0
        for _, delta in ev:
            held += delta
            peak = max(peak, held)
        peaks.append(round(peak, 9))
    return peaks


def step_rows(actions: Iterable[TimedAction]) -> Iterator[TimedAction]:
    """One row per step of the devices' time: every action, but only the first member of
    each overlapped F&B pair (both share device, start and end)."""
    seen: set[int] = set()
    for a in actions:
        if a.overlap is not None:
            if a.overlap in seen:
                continue
            seen.add(a.overlap)
        yield a


def busy_time(schedule: Timed) -> list[float]:
    """Busy time per device; an overlapped F&B pair counts its duration once."""
    busy = [0.0] * schedule.instance.p
    for a in step_rows(schedule.actions):
        busy[a.device] += a.end - a.start
    return busy


def bubble_fraction(schedule: Timed) -> float:
    """``1 - busy / (p * makespan)`` (docs/spec.md §5); 0 for an empty schedule."""
    ms = schedule.makespan
    if ms <= 0:
        return 0.0
    return 1.0 - sum(busy_time(schedule)) / (schedule.instance.p * ms)
