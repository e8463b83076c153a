"""The one-device relaxation with overlapped F&B pairs (docs/modelling.md §29).

The relaxation of :mod:`cpsched.solver.relaxation` keeps one device exactly and turns what the
others do into fixed lags.  With an overlap cost the kept device may also run an ``F`` and a
backward (``B``, or with split backward ``I`` and its ``W`` fused) of another microbatch
together, as one pair of ``overlap_forward_backward[s_F]`` ticks — as in the full model
(:mod:`cpsched.solver.overlap`, docs/modelling.md §15).  What the other devices do is relaxed
with the durations no pair can beat (:func:`cpsched.graph.overlap_relaxed_durations`): their
heads, tails and the lags between the kept device's actions are lower bounds in every schedule
with pairs.

This sees what the fluid bounds of docs/modelling.md §16.1 and §28 cannot: whole actions and
whole pairs on the device, each microbatch's backward a round trip after its forward, and
whole activations held under the limit.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ortools.sat.python import cp_model

from cpsched.actions import Action, Kind
from cpsched.core import HeadsTails
from cpsched.instance import Instance
from cpsched.solver.constraints import fifo_pairs
from cpsched.solver.overlap import pair_candidates


@dataclass(frozen=True)
class DeviceActions:
    """One device's actions for the relaxation: ``nodes``; ``dur`` their own durations
    (ticks, an action alone); ``rel`` the durations no schedule can beat along a chain (the
    pair-relaxed ones with an overlap cost, else ``dur``); ``lags`` ``(a, b, lag)``: ``b``
    starts at least ``lag`` ticks after ``a`` ends (the longest chain between them through
    the other devices); ``device``: with a group of devices kept (docs/modelling.md §31),
    each node's device (one ``NoOverlap`` and one memory limit per device), else None."""

    nodes: list[Action]
    dur: Mapping[Action, int]
    rel: Mapping[Action, int]
    lags: list[tuple[Action, Action, int]]
    device: Mapping[Action, int] | None = None

    def owner(self, a: Action) -> int:
        """The kept device of node ``a`` (0 when one device is kept: a key, not its index)."""
        return 0 if self.device is None else self.device[a]

    def per_device(self) -> list[list[Action]]:
        """The nodes of each kept device (one list for one device), in node order."""
        groups: dict[int, list[Action]] = {}
        for a in self.nodes:
            groups.setdefault(self.owner(a), []).append(a)
        return list(groups.values())


@dataclass
class RelaxedModel:
    """A relaxation as a CP-SAT model: ``start`` and ``end`` of each action (variables or
    expressions) and the ``makespan`` variable."""

    model: cp_model.CpModel
    start: dict[Action, Any]
    end: dict[Action, Any]
    makespan: cp_model.IntVar


def pair_relaxed_model(inst: Instance, ht: HeadsTails, dev: DeviceActions, lower: int,
                       upper: int) -> RelaxedModel:
    """The device's relaxation with overlapped pairs (module docstring) as a CP-SAT model
    whose makespan lies in ``[lower, upper]`` (ticks); no objective.  Memory (the live
    intervals, end at the release's end) is added by the caller."""
    if dev.device is not None:
        raise ValueError("the relaxation with pairs keeps one device (no group)")
    head, tail = ht
    m = cp_model.CpModel()
    start: dict[Action, Any] = {}
    end: dict[Action, Any] = {}
    solo: dict[Action, Any] = {}
    intervals: list[cp_model.IntervalVar] = []
    for a in dev.nodes:
        end_hi = max(head[a] + dev.rel[a], upper - tail[a])
        start_hi = end_hi if a.kind == Kind.W else end_hi - dev.rel[a]
        start[a] = m.new_int_var(head[a], max(head[a], start_hi), "")
        end[a] = m.new_int_var(head[a] + dev.rel[a], end_hi, "")
        if a.kind != Kind.W:
            solo[a] = m.new_bool_var("")
    for a in dev.nodes:
        if a.kind == Kind.W:
            solo[a] = solo.get(Action(Kind.I, a.stage, a.microbatch), True)
        if dev.dur[a] > 0:
            intervals.append(m.new_optional_fixed_size_interval_var(
                start[a], dev.dur[a], solo[a], ""))
    members: dict[Action, list[tuple[Any, int]]] = defaultdict(list)
    bk = Kind.I if inst.split_backward else Kind.B
    candidates = pair_candidates(inst, [a for a in dev.nodes if a.kind == Kind.F],
                                 [a for a in dev.nodes if a.kind == bk], dev.dur.__getitem__,
                                 head, tail, dev.rel, upper)
    for (f, b), dur in candidates.items():
        x = m.new_bool_var("")
        if dur > 0:
            intervals.append(m.new_optional_fixed_size_interval_var(start[f], dur, x, ""))
        m.add(start[b] == start[f]).only_enforce_if(x)
        members[f].append((x, dur))
        members[b].append((x, dur))
    for a in dev.nodes:
        d = dev.dur[a]
        if a.kind == Kind.W:
            i = Action(Kind.I, a.stage, a.microbatch)
            m.add(end[a] == start[a] + d * solo[a])
            if i in end:
                m.add(start[a] == end[i]).only_enforce_if(~solo[a])
            continue
        m.add_exactly_one([solo[a]] + [x for x, _ in members[a]])
        m.add(end[a] == start[a] + d * solo[a] + sum(dur * x for x, dur in members[a]))
    m.add_no_overlap(intervals)
    for a, b, lag in dev.lags:
        m.add(start[b] >= end[a] + lag)
    for a, nxt in fifo_pairs(inst, start):  # FIFO: docs/modelling.md §1, §15
        c = m.add(start[nxt] >= end[a])
        if a.kind == Kind.W:
            c.only_enforce_if([solo[a], solo[nxt]])
    makespan = m.new_int_var(lower, upper, "makespan")
    for a in dev.nodes:
        m.add(makespan >= end[a] + tail[a])
    return RelaxedModel(m, start, end, makespan)


__all__ = ["DeviceActions", "RelaxedModel", "pair_relaxed_model"]
