"""Overlapped F&B pairs in the CP-SAT model (DualPipe-style, docs/modelling.md §15).

:class:`OverlapTiming` replaces :class:`~cpsched.solver.timing.FixedTiming` when the instance
gives ``overlap_forward_backward``:

* every action has a start and an end variable, and a literal ``solo`` (it runs alone: an
  optional interval of its own duration, present iff ``solo``); a ``W`` is present iff its
  ``I`` is solo;
* one literal per candidate pair ``(F(s, i), B/I(s', j))``: same device, ``i != j`` (same
  microbatch = a path in the task graph), ASAP/ALAP windows that meet, and not dominated (a
  pair lasting at least ``F`` + the full backward is never better than the two back to back);
  present iff an optional interval of ``overlap_forward_backward[s]`` on the device, both
  members start with it; ``solo + sum(pairs of the action) == 1`` and ``end == start +
  duration * solo + sum(pair duration * pair)``;
* with split backward a pair always takes the fused backward (``I`` and ``W`` inside the
  pair): that dominates pairing the ``I`` alone (same pair, no later ``W`` time, memory
  released no later); the ``W`` then starts and ends with the pair;
* windows come from :func:`~cpsched.graph.overlap_relaxed_durations`;
* FIFO order stays valid (pair durations depend on the stage of the F only); for ``W`` it
  only binds two consecutive microbatches that both run their ``W`` alone.

Above :data:`MAX_PAIRS` candidate pairs only pairs of microbatches at most ``pair_window``
apart are kept (plus the warm start's), and ``restricted`` is True: CP-SAT's own bound is
then not a bound over all schedules.  A ``pair_filter`` restricts the candidates the same
way, to a family the caller chooses (e.g. DualPipe's, :mod:`cpsched.solver.mirror`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ortools.sat.python import cp_model

from cpsched.actions import Action, Kind, TimedAction
from cpsched.core import ResourceGraph, Task
from cpsched.graph import overlap_heads_tails
from cpsched.instance import Instance

#: Above this many candidate F&B pairs the overlap model keeps only the pairs of the nearest
#: microbatches (and those of the warm start); its optimum is then over that restricted set.
MAX_PAIRS = 20_000

Pair = tuple[Action, Action]


def pair_dominated(pair: int, forward: int, full_backward: int) -> bool:
    """Whether an overlapped F&B pair lasting ``pair`` ticks is dominated: its forward
    (``forward`` ticks) and its full backward (``B``, or with split backward the ``I`` and its
    ``W``) back to back last no longer, so the pair is never worth forming
    (docs/modelling.md §15).  The full model and the window search skip such candidates
    unless the warm start already has the pair."""
    return pair >= forward + full_backward


def pair_candidates(inst: Instance, forwards: Iterable[Action], backwards: Sequence[Action],
                    duration: Callable[[Action], int], head: Mapping[Action, int],
                    tail: Mapping[Action, int], rel: Mapping[Action, int], horizon: int,
                    forced: Collection[Pair] = ()) -> dict[Pair, int]:
    """The candidate F&B pairs of one device, ``(F, B or I) -> pair ticks``: an ``F`` of
    ``forwards`` with a backward of ``backwards`` of another microbatch (same microbatch =
    a path in the task graph), not dominated (:func:`pair_dominated`; with split backward
    the full backward is ``I`` plus its ``W``), whose windows meet under ``horizon`` (ticks,
    heads and tails the pair-relaxed ones, ``rel`` the pair-relaxed durations).  ``forced``
    pairs are kept whatever their cost or windows (a warm start's)."""
    ov = inst.overlap_forward_backward
    if ov is None:
        raise ValueError("costs.overlap_forward_backward: needed for overlapped pairs")
    out: dict[Pair, int] = {}
    for f in forwards:
        dur = inst.ticks(ov[f.stage])
        for b in backwards:
            if f.microbatch == b.microbatch:
                continue  # F(s, i) precedes every backward of microbatch i
            if (f, b) not in forced:
                full = duration(b) + (duration(Action(Kind.W, b.stage, b.microbatch))
                                      if inst.split_backward else 0)
                if pair_dominated(dur, duration(f), full):
                    continue
                lo = max(head[f], head[b])
                hi = min(horizon - tail[f] - rel[f], horizon - tail[b] - rel[b])
                if lo > hi or lo + dur > horizon - max(tail[f], tail[b]):
                    continue
            out[(f, b)] = dur
    return out


@dataclass
class PairSolution:
    """A solution in the overlap model's terms (ticks): ``start`` and ``end`` of every default
    action (``F, B`` or ``F, I, W``) and the overlapped ``pairs`` ``(F, B)`` or, with split
    backward, ``(F, I)``: a *fused* pair, whose ``I`` and ``W`` both run inside the pair (the
    ``W`` then has ``start == end ==`` the pair's end and no device time)."""

    start: dict[Action, int]
    end: dict[Action, int]
    pairs: list[Pair]

    @property
    def makespan(self) -> int:
        """Latest end (ticks)."""
        return max(self.end.values(), default=0)


def pair_solution(inst: Instance, actions: Sequence[TimedAction]) -> PairSolution:
    """The :class:`PairSolution` of a valid schedule's rows (fused ``B`` outside pairs already
    split, :func:`~cpsched.schedules.transforms.split_fused`).  An overlapped ``I`` alone
    becomes a fused pair (its ``W`` dropped into the pair): never worse, as the pair's
    duration does not change and the memory of ``W`` is released no later."""
    start: dict[Action, int] = {}
    end: dict[Action, int] = {}
    pairs: list[Pair] = []
    groups: dict[int, list[TimedAction]] = defaultdict(list)
    for a in actions:
        if a.overlap is not None:
            groups[a.overlap].append(a)
    bk = Kind.I if inst.split_backward else Kind.B
    in_pair: set[tuple[int, int]] = set()
    for members in groups.values():
        f = next(x for x in members if x.kind == Kind.F)
        b = next(x for x in members if x is not f)
        fa, ba = f.action, Action(bk, b.stage, b.microbatch)
        pairs.append((fa, ba))
        t0, t1 = inst.ticks(f.start), inst.ticks(f.end)
        start[fa] = start[ba] = t0
        end[fa] = end[ba] = t1
        if inst.split_backward:
            w = Action(Kind.W, b.stage, b.microbatch)
            start[w] = end[w] = t1
            in_pair.add((b.stage, b.microbatch))
    for a in actions:
        if a.overlap is not None or (a.kind == Kind.W and (a.stage, a.microbatch) in in_pair):
            continue
        start[a.action], end[a.action] = inst.ticks(a.start), inst.ticks(a.end)
    return PairSolution(start, end, pairs)


class OverlapTiming:
    """Time variables with overlapped F&B pairs (see the module docstring).

    Args:
        model, rg, horizon: the CP-SAT model, the pipeline's resource graph, the horizon
            (ticks).
        instance: the pipeline instance (``overlap_forward_backward`` must be given).
        forced_pairs: pairs always kept as candidates (the warm start's).
        max_pairs: candidate limit (default :data:`MAX_PAIRS`).

    Raises:
        ValueError: the horizon is below the (relaxed) critical path.
    """

    pairs_possible = True

    def __init__(self, model: cp_model.CpModel, rg: ResourceGraph, horizon: int, *,
                 instance: Instance, forced_pairs: Iterable[Pair] = (),
                 max_pairs: int | None = None,
                 pair_filter: Callable[[Pair], bool] | None = None) -> None:
        self.rg, self.inst, self.horizon = rg, instance, horizon
        self.forced_pairs = set(forced_pairs)
        self.pair_filter = pair_filter
        self.max_pairs = MAX_PAIRS if max_pairs is None else max_pairs
        self.restricted = False
        self.pair_window: int | None = None
        self.candidate_pairs = 0
        self.start: dict[Task, cp_model.IntVar] = {}
        self.endv: dict[Task, cp_model.IntVar] = {}
        self.interval: dict[Task, cp_model.IntervalVar] = {}
        self.solo: dict[Task, Any] = {}
        self.pair: dict[Pair, Any] = {}
        self.pair_dur: dict[Pair, int] = {}
        self.pair_interval: dict[Pair, cp_model.IntervalVar] = {}
        rel, (head, tail) = overlap_heads_tails(instance, rg.graph)
        self._action_vars(model, head, tail, rel)
        self._pair_vars(model, self._candidates(head, tail, rel))

    def _action_vars(self, m: cp_model.CpModel, head: Mapping[Task, int],
                     tail: Mapping[Task, int], rel: Mapping[Task, int]) -> None:
        rg, H = self.rg, self.horizon
        for t in rg.graph:
            lo, end_hi = head[t], H - tail[t]
            # a fused W starts at the pair's end: no room to reserve for it
            hi = end_hi if t.kind == Kind.W else end_hi - rel[t]
            if hi < lo:
                raise ValueError(f"horizon {H} is below the critical path")
            self.start[t] = m.new_int_var(lo, hi, f"s_{t}")
            self.endv[t] = m.new_int_var(lo + rel[t], end_hi, f"e_{t}")
        for t in rg.graph:
            if t.kind != Kind.W:
                self.solo[t] = m.new_bool_var(f"solo_{t}")
        for t in rg.graph:
            if t.kind == Kind.W:
                self.solo[t] = self.solo[Action(Kind.I, t.stage, t.microbatch)]
            self.interval[t] = m.new_optional_fixed_size_interval_var(
                self.start[t], rg.duration(t), self.solo[t], f"i_{t}")

    def _pair_vars(self, m: cp_model.CpModel, candidates: Mapping[Pair, int]) -> None:
        members: dict[Action, list[tuple[Any, int]]] = defaultdict(list)
        for (f, b), dur in candidates.items():
            x = m.new_bool_var(f"x_{f}_{b}")
            self.pair[(f, b)] = x
            self.pair_dur[(f, b)] = dur
            self.pair_interval[(f, b)] = m.new_optional_fixed_size_interval_var(
                self.start[f], dur, x, f"p_{f}_{b}")
            m.add(self.start[b] == self.start[f]).only_enforce_if(x)
            members[f].append((x, dur))
            members[b].append((x, dur))
        for t in self.rg.graph:
            d = self.rg.duration(t)
            if t.kind == Kind.W:
                i = Action(Kind.I, t.stage, t.microbatch)
                m.add(self.endv[t] == self.start[t] + d * self.solo[t])
                m.add(self.start[t] == self.endv[i]).only_enforce_if(~self.solo[t])
                continue
            m.add_exactly_one([self.solo[t]] + [x for x, _ in members[t]])
            m.add(self.endv[t] == self.start[t] + d * self.solo[t]
                  + sum(dur * x for x, dur in members[t]))

    def _candidates(self, head: Mapping[Task, int], tail: Mapping[Task, int],
                    rel: Mapping[Task, int]) -> dict[Pair, int]:
        inst = self.inst
        bk = Kind.I if inst.split_backward else Kind.B
        fs: dict[Any, list[Action]] = defaultdict(list)
        bs: dict[Any, list[Action]] = defaultdict(list)
        for t in self.rg.graph:
            if t.kind in (Kind.F, bk):
                (fs if t.kind == Kind.F else bs)[self.rg.resource(t)].append(t)
        cands: dict[Pair, int] = {}
        for dev, flist in fs.items():
            cands |= pair_candidates(inst, flist, bs[dev], self.rg.duration, head, tail, rel,
                                     self.horizon, self.forced_pairs)
        self.candidate_pairs = len(cands)
        if self.pair_filter is not None:  # the caller's family: CP-SAT's bound is over it only
            kept = {fb: d for fb, d in cands.items()
                    if fb in self.forced_pairs or self.pair_filter(fb)}
            self.restricted = len(kept) < len(cands)
            cands = kept
        if len(cands) <= self.max_pairs:
            return cands
        self.restricted = True
        dist = sorted(abs(f.microbatch - b.microbatch) for f, b in cands)
        k = max(1, dist[self.max_pairs] - 1)  # the largest window that fits
        self.pair_window = k
        return {fb: d for fb, d in cands.items()
                if abs(fb[0].microbatch - fb[1].microbatch) <= k or fb in self.forced_pairs}

    # ------------------------------------------------------------- Timing API
    def end(self, t: Task) -> Any:
        """The end variable of ``t``."""
        return self.endv[t]

    def resource_intervals(self) -> dict[Hashable, list[cp_model.IntervalVar]]:
        """Every solo interval and every pair interval of positive duration, per device."""
        out: dict[Hashable, list[cp_model.IntervalVar]] = defaultdict(list)
        for t in self.rg.graph:
            if self.rg.duration(t) > 0:
                out[self.rg.resource(t)].append(self.interval[t])
        for fb, iv in self.pair_interval.items():
            if self.pair_dur[fb] > 0:
                out[self.rg.resource(fb[0])].append(iv)
        return out

    def fifo_guard(self, a: Task, b: Task) -> list[Any]:
        """A fused ``W`` is tied to its pair: only ``W``'s that run alone keep FIFO order."""
        return [self.solo[a], self.solo[b]] if a.kind == Kind.W else []

    def hint(self, model: cp_model.CpModel, sol: PairSolution) -> dict[Task, int]:
        """Hint starts, ends and every literal of ``sol``; returns the ends."""
        paired = {t for fb in sol.pairs for t in fb}
        chosen = set(sol.pairs)
        for t in self.start:
            model.add_hint(self.start[t], sol.start[t])
            model.add_hint(self.endv[t], sol.end[t])
            if t.kind != Kind.W:
                model.add_hint(self.solo[t], t not in paired)
        for fb, x in self.pair.items():
            model.add_hint(x, fb in chosen)
        return dict(sol.end)

    def read(self, solver: cp_model.CpSolver) -> PairSolution:
        """The solver's solution as a :class:`PairSolution`."""
        return PairSolution({t: solver.value(v) for t, v in self.start.items()},
                            {t: solver.value(v) for t, v in self.endv.items()},
                            [fb for fb, x in self.pair.items() if solver.boolean_value(x)])
