"""The CP-SAT model of one window of the window search (docs/modelling.md §17).

:func:`window_model` builds it from the search's problem and incumbent
(:mod:`cpsched.solver.lns`): the actions starting before the window stay where they are, the
actions after it keep their device order and reach the makespan through their tails, and the
window's actions are re-scheduled.  With an overlap cost (docs/modelling.md §15) the window
may also form, keep or break overlapped F&B pairs among its own actions, as the full model
does (:class:`~cpsched.solver.overlap.OverlapTiming`): every action has a ``solo`` literal,
each candidate pair an optional interval of the pair's duration that both members start with,
and with split backward a paired ``I`` takes its ``W`` into the pair.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass, field
from typing import Any

from ortools.sat.python import cp_model

from cpsched.actions import Action, Kind
from cpsched.solver.lns_state import Incumbent, Problem
from cpsched.solver.overlap import pair_dominated


@dataclass
class WindowModel:
    """One window's model: ``start`` and ``end`` of each window action (variables or
    expressions), the ``makespan`` variable, and with an overlap cost the ``solo`` literal of
    each window action and the literal of each candidate pair ``(F, B or I)``."""

    model: cp_model.CpModel
    start: dict[Action, Any]
    end: dict[Action, Any]
    makespan: cp_model.IntVar
    solo: dict[Action, Any] = field(default_factory=dict)
    pair: dict[tuple[Action, Action], Any] = field(default_factory=dict)


def window_model(pb: Problem, inc: Incumbent, window: Set[Action], before: set[Action],
                 plateau: bool = False) -> WindowModel | None:
    """The CP-SAT model of one window (see :mod:`cpsched.solver.lns`).  None when the window
    cannot shorten the schedule or the incumbent does not fit the model's integer memory.

    With ``plateau`` the window's *boundary* actions — those with a successor in the later
    part, by dependency or device order — may not end later than in the incumbent, and the
    objective also counts their ends: a solution is then never later anywhere after the
    window, and may move it earlier at an equal makespan (docs/modelling.md §17, *Plateau
    sweeps*)."""
    window = _ordered(window)
    ub = inc.makespan
    dur, dev = pb.dur, pb.dev
    free = [0] * pb.inst.p  # when each device is free of the fixed part
    for a in before:
        free[dev[a]] = max(free[dev[a]], inc.end[a])
    first_after: dict[int, Action] = {}
    for a in window:
        d, k = inc.pos[a]
        row = inc.orders[d]
        if k + 1 < len(row) and row[k + 1][0] not in window:
            first_after[d] = row[k + 1][0]
    m = cp_model.CpModel()
    wm = WindowModel(m, {}, {}, m.new_int_var(0, ub, "makespan"))
    q: dict[Action, int] = {}
    boundary: list[Action] = []
    for a in window:
        lo = free[dev[a]]
        for b, lag in pb.pred[a]:
            if b not in window:
                lo = max(lo, inc.end[b] + lag)
        qa, hi = 0, ub
        for b, lag in pb.succ[a]:
            if b in before:  # a fixed successor (on a device outside the window)
                hi = min(hi, inc.start[b] - lag)
            elif b not in window:
                qa = max(qa, lag + inc.step_dur[b] + inc.tail[b])
        nxt = first_after.get(dev[a])
        if nxt is not None:
            qa = max(qa, inc.step_dur[nxt] + inc.tail[nxt])
        if any(b not in window and b not in before for b, _ in pb.succ[a]) or (
                nxt is not None and inc.pos[a][1] + 1 == inc.pos[nxt][1]):
            boundary.append(a)
        q[a] = qa
        hi = min(hi, ub - qa)
        if hi < inc.end[a] or lo > inc.start[a]:
            return None  # cannot happen for an ASAP incumbent; be safe
        if pb.overlap is None:
            wm.start[a] = m.new_int_var(lo, hi - dur[a], "")
            wm.end[a] = wm.start[a] + dur[a]
        else:
            wm.start[a], wm.end[a] = m.new_int_var(lo, hi, ""), m.new_int_var(lo, hi, "")
        m.add_hint(wm.start[a], inc.start[a])
    if pb.overlap is None:
        intervals = {a: m.new_fixed_size_interval_var(wm.start[a], dur[a], "") for a in window}
    else:
        intervals = _pairs(pb, inc, wm, window, before)
    _order(pb, wm, window, intervals)
    if pb.pool is not None and not _memory(pb, inc, wm, window, before):
        return None
    c0 = _avoiding(pb, inc, window, before, free)
    if c0 >= ub and not (plateau and c0 == ub and boundary):
        return None
    m.add(wm.makespan >= c0)
    for a in window:
        m.add(wm.makespan >= wm.end[a] + q[a])
    m.add_hint(wm.makespan, ub)
    if not plateau:
        m.minimize(wm.makespan)
        return wm
    for a in boundary:
        m.add(wm.end[a] <= inc.end[a])
    # a tick of makespan weighs as much as a tick on every boundary action
    m.minimize(len(boundary) * wm.makespan + sum(wm.end[a] for a in boundary))
    return wm


def _ordered(window: Set[Action]) -> Set[Action]:
    """``window`` as a set that iterates in a fixed order: a set of actions iterates by their
    string hashes, which change from process to process, and so would the model and what
    CP-SAT finds within a deterministic limit (docs/modelling.md §17)."""
    return dict.fromkeys(sorted(window)).keys()


def _pairs(pb: Problem, inc: Incumbent, wm: WindowModel, window: Set[Action],
           before: set[Action]) -> dict[Action | tuple[Action, Action], Any]:
    """Solo literals, candidate pairs and their optional intervals (module docstring), with
    the incumbent's choice as the hint; returns every interval by action or pair."""
    m, dur, dev = wm.model, pb.dur, pb.dev
    bk = Kind.I if pb.inst.split_backward else Kind.B
    fs = [a for a in window if a.kind == Kind.F]
    bs: dict[int, list[Action]] = {}
    for b in window:
        # an I pairs only with its W in the window (the pair takes the W in)
        if b.kind == bk and (bk != Kind.I or Action(Kind.W, b.stage, b.microbatch) in window):
            bs.setdefault(dev[b], []).append(b)
    for a in window:
        if a.kind != Kind.W:
            wm.solo[a] = m.new_bool_var("")
            m.add_hint(wm.solo[a], a not in inc.paired)
    members: dict[Action, list[tuple[Any, int]]] = {}
    intervals: dict[Action | tuple[Action, Action], Any] = {}
    for f in fs:
        p_dur = pb.overlap[f.stage]
        for b in bs.get(dev[f], ()):
            full = dur[b] + (dur[Action(Kind.W, b.stage, b.microbatch)] if bk == Kind.I else 0)
            known = inc.paired.get(f) == b
            if b.microbatch == f.microbatch or (pair_dominated(p_dur, dur[f], full)
                                                 and not known):
                continue
            x = m.new_bool_var("")
            m.add_hint(x, known)
            wm.pair[(f, b)] = x
            intervals[(f, b)] = m.new_optional_fixed_size_interval_var(wm.start[f], p_dur, x, "")
            m.add(wm.start[b] == wm.start[f]).only_enforce_if(x)
            for a in (f, b):
                members.setdefault(a, []).append((x, p_dur))
    for a in window:
        if a.kind == Kind.W:
            i = Action(Kind.I, a.stage, a.microbatch)
            solo = wm.solo[i] if i in window else True  # an I before the window stays alone
            wm.solo[a] = solo
            if solo is True:
                m.add(wm.end[a] == wm.start[a] + dur[a])
            else:
                m.add(wm.end[a] == wm.start[a] + dur[a] * solo)
                m.add(wm.start[a] == wm.end[i]).only_enforce_if(~solo)
            intervals[a] = (m.new_fixed_size_interval_var(wm.start[a], dur[a], "") if solo is True
                            else m.new_optional_fixed_size_interval_var(wm.start[a], dur[a],
                                                                       solo, ""))
            continue
        own = members.get(a, [])
        m.add_exactly_one([wm.solo[a]] + [x for x, _ in own])
        m.add(wm.end[a] == wm.start[a] + dur[a] * wm.solo[a] + sum(d * x for x, d in own))
        intervals[a] = m.new_optional_fixed_size_interval_var(wm.start[a], dur[a], wm.solo[a],
                                                              "")
    for a in window:
        m.add_hint(wm.end[a], inc.end[a])
    return intervals


def _order(pb: Problem, wm: WindowModel, window: Set[Action],
           intervals: Mapping[Action | tuple[Action, Action], Any]) -> None:
    """Dependencies with their lags, FIFO order (a ``W`` only when both run alone, as in
    the full model) and ``NoOverlap`` per device inside the window."""
    m, dev = wm.model, pb.dev
    for a in window:
        for b, lag in pb.succ[a]:
            if b in window:
                m.add(wm.start[b] >= wm.end[a] + lag)
        nxt = pb.fifo_next.get(a)
        if nxt is not None and nxt in window:
            c = m.add(wm.start[nxt] >= wm.end[a])
            guard = [wm.solo[x] for x in (a, nxt)] if a.kind == Kind.W and wm.solo else []
            if any(g is not True for g in guard):
                c.only_enforce_if([g for g in guard if g is not True])
    by_dev: dict[int, list[Any]] = {}
    for key, iv in intervals.items():
        by_dev.setdefault(dev[key if isinstance(key, Action) else key[0]], []).append(iv)
    for ivs in by_dev.values():
        m.add_no_overlap(ivs)


def _memory(pb: Problem, inc: Incumbent, wm: WindowModel, window: Set[Action],
            before: set[Action]) -> bool:
    """Each device's memory over the window: what the fixed part still holds is a constant
    or lasts until a window release; False if the incumbent does not fit the integer units."""
    m, horizon = wm.model, inc.makespan
    devices = {pb.dev[a] for a in window}
    for d in devices:
        held = 0
        ivs, amounts = [], []
        for f, rel, amount in pb.buffers.get(d, ()):
            if f in before:
                if rel in before:
                    continue
                if rel in window:
                    ivs.append(m.new_interval_var(0, wm.end[rel], wm.end[rel], ""))
                    amounts.append(amount)
                else:
                    held += amount
            elif f in window:
                if rel in window:
                    size = m.new_int_var(0, horizon, "")
                    m.add(size == wm.end[rel] - wm.start[f])
                    ivs.append(m.new_interval_var(wm.start[f], size, wm.end[rel], ""))
                else:
                    ivs.append(m.new_interval_var(wm.start[f], horizon - wm.start[f], horizon,
                                                  ""))
                amounts.append(amount)
        cap = pb.pool - held
        if cap < 0:
            return False
        if sum(amounts) > cap:
            m.add_cumulative(ivs, amounts, cap)
    return True


def _avoiding(pb: Problem, inc: Incumbent, window: Set[Action], before: set[Action],
              free: list[int]) -> int:
    """The longest path that avoids the window: from the fixed part straight into the later
    part (ticks)."""
    c0 = 0
    for a in inc.start:
        if a in before or a in window:
            continue
        for b, lag in pb.pred[a]:
            if b in before:
                c0 = max(c0, inc.end[b] + lag + inc.step_dur[a] + inc.tail[a])
    devices = {pb.dev[a] for a in window}
    for d in range(pb.inst.p):
        row = inc.orders[d]
        if d not in devices:  # a device without window actions: its later part follows on
            nxt = next((s[0] for s in row if s[0] not in before), None)
            if nxt is not None:
                c0 = max(c0, free[d] + inc.step_dur[nxt] + inc.tail[nxt])
    return c0


__all__ = ["WindowModel", "window_model"]
