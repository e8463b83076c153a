"""The pipeline's rules, written once (docs/spec.md §1).

Every module that needs to know *how a pipeline step works* asks this one: the simulator, the
list scheduler, the PyTorch import, the task graph (:mod:`cpsched.graph`), the solver and the
metrics.  The validator (:mod:`cpsched.validate`) is the one exception, on purpose: it
re-derives these rules itself, so that a mistake here cannot hide behind a check that shares it.

* **Durations** (integer ticks, :meth:`Instance.ticks`): ``F``, ``B``, ``I``, ``W`` of stage
  ``s`` from the instance's per-stage costs; a fused ``B`` of a split instance lasts ``I + W``;
  an overlapped F&B pair lasts ``overlap_forward_backward`` of its F's stage, or ``F + B`` back
  to back without that cost (:func:`duration`, :func:`overlap_duration`).
* **Dependencies** with p2p lags (:func:`dependencies`): ``F(s-1) -> F(s)``,
  ``B/I(s+1) -> B/I(s)``, ``F(S-1) -> B/I(S-1)``, ``I -> W``; the lag is the p2p latency when
  the two actions run on different devices, else 0.  With split backward a (stage,
  microbatch) may run one fused ``B`` instead of ``I`` and ``W`` (the *fused rule*,
  :func:`fused_rule_from`): its successor then waits for that ``B``.
* **Release points** (:func:`release_actions`, :func:`released_fraction`): ``activation[s]``
  is taken at the start of ``F(s, i)`` and given back at the end of ``B(s, i)`` (all), or of
  ``I(s, i)`` (the fraction ``released_by_input``) and ``W(s, i)`` (the rest).
* **Completeness** of an action set (:func:`action_fault`, :func:`gaps`): every action exactly
  once, on its device, with a kind the instance allows; per (stage, microbatch) ``F`` and
  either ``B`` or ``I`` and ``W``.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum

from cpsched.actions import Action, Kind, Overlap
from cpsched.instance import Instance

#: ``fused(stage, microbatch)`` is True when that (stage, microbatch) runs one fused B.
FusedRule = Callable[[int, int], bool]


# ------------------------------------------------------------------------------ durations
def duration(instance: Instance, action: Action) -> int:
    """Duration of ``action`` in ticks (fused ``B`` lasts ``I + W`` with split backward)."""
    s = action.stage
    if action.kind == Kind.F:
        x = instance.forward[s]
    elif action.kind == Kind.B:
        x = instance.backward[s]
    elif action.kind == Kind.I:
        x = instance.backward_input[s]
    else:
        x = instance.backward_weight[s]
    return instance.ticks(x)


def overlap_duration(instance: Instance, pair: Overlap) -> int:
    """Duration in ticks of an overlapped F&B pair: ``overlap_forward_backward`` of the F's
    stage when given, else the two run back to back (sum of the durations)."""
    ov = instance.overlap_forward_backward
    if ov is None:
        return duration(instance, pair.forward) + duration(instance, pair.backward)
    return instance.ticks(ov[pair.forward.stage])


@dataclass(frozen=True)
class StageTicks:
    """The rules of one instance as per-stage integer tables (for the engine's inner loops).

    Attributes:
        duration: ``duration[kind][s]`` in ticks, shape ``(S,)`` per kind (``B`` is ``I + W``
            with split backward).
        overlap: ``overlap[s]``: ticks of an overlapped pair whose F is of stage ``s``, or
            None (then a pair lasts the sum of its members).
        device: ``device[direction][s]``; direction 1 only with ``bidirectional`` placement
            for microbatches ``m // 2 ..``, shape ``(2, S)``.
        forward_lag: ``forward_lag[direction][s]``: lag (ticks) of ``F(s-1) -> F(s)``.
        backward_lag: ``backward_lag[direction][s]``: lag of ``B/I(s+1) -> B/I(s)``.
        half: first microbatch of direction 1 (``m`` when there is one direction).
    """

    duration: dict[Kind, tuple[int, ...]]
    overlap: tuple[int, ...] | None
    device: tuple[tuple[int, ...], tuple[int, ...]]
    forward_lag: tuple[tuple[int, ...], tuple[int, ...]]
    backward_lag: tuple[tuple[int, ...], tuple[int, ...]]
    half: int


def stage_ticks(instance: Instance) -> StageTicks:
    """The per-stage tick tables of ``instance`` (see :class:`StageTicks`); O(S)."""
    S, m = instance.num_stages, instance.m
    t = instance.ticks
    dur = {Kind.F: tuple(t(x) for x in instance.forward),
           Kind.B: tuple(t(x) for x in instance.backward),
           Kind.I: tuple(t(x) for x in instance.backward_input),
           Kind.W: tuple(t(x) for x in instance.backward_weight)}
    ov = instance.overlap_forward_backward
    half = m // 2 if instance.placement == "bidirectional" else m
    mbs = (0, half if half < m else 0)
    dev = tuple(tuple(instance.device_of(s, i) for s in range(S)) for i in mbs)
    lat = t(instance.p2p_latency)
    fl = tuple(tuple(0 if s == 0 or d[s - 1] == d[s] else lat for s in range(S)) for d in dev)
    bl = tuple(tuple(0 if s == S - 1 or d[s + 1] == d[s] else lat for s in range(S))
               for d in dev)
    return StageTicks(dur, None if ov is None else tuple(t(x) for x in ov), dev,  # type: ignore[arg-type]
                      fl, bl, half)  # type: ignore[arg-type]


def default_kinds(instance: Instance) -> tuple[Kind, ...]:
    """Kinds of the default action set: ``F, B``, or ``F, I, W`` with split backward."""
    return (Kind.F, Kind.I, Kind.W) if instance.split_backward else (Kind.F, Kind.B)


def chain_heads_tails(instance: Instance) -> tuple[dict[Kind, list[int]], dict[Kind, list[int]]]:
    """Head (longest chain before the start) and tail (longest chain after the end) in
    ticks of the default action of each (kind, stage), ``head[kind][s]``: the same for every
    microbatch (devices of direction 0 with ``bidirectional`` placement)."""
    tk = stage_ticks(instance)
    S, kinds, F = instance.num_stages, default_kinds(instance), Kind.F
    bk, dur, fl, bl = kinds[1], tk.duration, tk.forward_lag[0], tk.backward_lag[0]
    head = {k: [0] * S for k in kinds}
    tail = {k: [0] * S for k in kinds}
    for s in range(1, S):
        head[F][s] = head[F][s - 1] + dur[F][s - 1] + fl[s]
    head[bk][S - 1] = head[F][S - 1] + dur[F][S - 1]
    for s in range(S - 2, -1, -1):
        head[bk][s] = head[bk][s + 1] + dur[bk][s + 1] + bl[s]
    for s in range(S):  # the backward chain runs towards stage 0
        t = dur[Kind.W][s] if bk == Kind.I else 0
        if s > 0:
            t = max(t, bl[s - 1] + dur[bk][s - 1] + tail[bk][s - 1])
        tail[bk][s] = t
        if bk == Kind.I:
            head[Kind.W][s] = head[bk][s] + dur[bk][s]
    tail[F][S - 1] = dur[bk][S - 1] + tail[bk][S - 1]
    for s in range(S - 2, -1, -1):
        tail[F][s] = fl[s + 1] + dur[F][s + 1] + tail[F][s + 1]
    return head, tail


@dataclass(frozen=True)
class DefaultTasks:
    """The default actions of a pipeline as integer arrays (for the event engine,
    :func:`cpsched.engine.dispatch`).

    Task ``(kind_index * S + s) * m + i`` is ``kinds[kind_index]`` of stage ``s`` for
    microbatch ``i``.  Per task: ``duration`` (ticks), ``device`` (of the microbatch's
    direction under ``bidirectional`` placement), ``succ`` (successor, lag).
    Per (kind, stage): ``dur``, ``head``, ``tail`` (ticks, as :func:`chain_heads_tails`).
    ``bound``: :func:`cpsched.graph.lower_bound`'s value (critical path; per device min head
    + work + min tail), computed from those without building a graph.
    """

    kinds: tuple[Kind, ...]
    S: int
    m: int
    duration: list[int]
    device: list[int]
    succ: list[list[tuple[int, int]]]
    dur: dict[Kind, list[int]]
    head: dict[Kind, list[int]]
    tail: dict[Kind, list[int]]
    bound: int

    def action(self, t: int) -> Action:
        """The action of task ``t``."""
        q, i = divmod(t, self.m)
        kk, s = divmod(q, self.S)
        return Action(self.kinds[kk], s, i)


def default_tasks(instance: Instance) -> DefaultTasks:
    """The :class:`DefaultTasks` of ``instance``.  Under ``bidirectional`` placement
    microbatches ``m // 2 ..`` run on direction 1's devices; both directions have the same
    durations and lags per stage (so the same heads and tails)."""
    S, m, kinds = instance.num_stages, instance.m, default_kinds(instance)
    tk = stage_ticks(instance)
    fl, bl, bk, half = tk.forward_lag[0], tk.backward_lag[0], kinds[1], tk.half
    groups = [(0, half, tk.device[0])] + ([(half, m, tk.device[1])] if half < m else [])
    ki = {k: n for n, k in enumerate(kinds)}
    durations, devices, succ = [], [], []
    for kk, k in enumerate(kinds):
        for s in range(S):
            nxt: list[tuple[int, int]] = []
            if k == Kind.F:
                nxt = [((s + 1) * m, fl[s + 1])] if s + 1 < S else [((ki[bk] * S + s) * m, 0)]
            elif k == bk:
                if bk == Kind.I:
                    nxt.append(((ki[Kind.W] * S + s) * m, 0))
                if s > 0:
                    nxt.append(((kk * S + s - 1) * m, bl[s - 1]))
            durations += [tk.duration[k][s]] * m
            for lo, hi, dev in groups:
                devices += [dev[s]] * (hi - lo)
            succ += [[(t + i, lag) for t, lag in nxt] for i in range(m)]
    dur = {k: list(tk.duration[k]) for k in kinds}
    head, tail = chain_heads_tails(instance)
    ks = [(k, s) for k in kinds for s in range(S)]
    bound = max(head[k][s] + dur[k][s] + tail[k][s] for k, s in ks)
    for d in range(instance.p):
        mine = [(k, s, hi - lo) for lo, hi, dev in groups for k, s in ks if dev[s] == d]
        bound = max(bound, min(head[k][s] for k, s, _ in mine)
                    + sum(n * dur[k][s] for k, s, n in mine)
                    + min(tail[k][s] for k, s, _ in mine))
    return DefaultTasks(kinds, S, m, durations, devices, succ, dur, head, tail, bound)


# --------------------------------------------------------------------------- dependencies
def fused_rule_from(actions: Iterable[Action]) -> FusedRule:
    """The fused rule implied by a set of actions (a (stage, mb) with a ``B`` is fused)."""
    fused = {(a.stage, a.microbatch) for a in actions if a.kind == Kind.B}
    return lambda s, i: (s, i) in fused


def dependencies(instance: Instance, action: Action, fused: FusedRule) -> list[tuple[Action, int]]:
    """Predecessors of ``action`` with their lags (ticks), per docs/spec.md §1.

    ``fused(s, i)`` tells which backward kind (s, i) runs when split backward is on
    (``B`` if fused, else ``I``); without split backward every backward is ``B``.  Every
    action has at most one predecessor.
    """
    S = instance.num_stages
    s, i, k = action.stage, action.microbatch, action.kind
    lat = instance.ticks(instance.p2p_latency)
    dev = instance.device_of(s, i)

    def lag(other_stage: int) -> int:
        return lat if instance.device_of(other_stage, i) != dev else 0

    def bwd(stage: int) -> Action:
        if not instance.split_backward or fused(stage, i):
            return Action(Kind.B, stage, i)
        return Action(Kind.I, stage, i)

    if k == Kind.F:
        return [(Action(Kind.F, s - 1, i), lag(s - 1))] if s > 0 else []
    if k == Kind.W:
        return [(Action(Kind.I, s, i), 0)]
    # B or I
    if s == S - 1:
        return [(Action(Kind.F, s, i), 0)]
    return [(bwd(s + 1), lag(s + 1))]


# ------------------------------------------------------------------------ release points
def released_fraction(instance: Instance, kind: Kind) -> float:
    """Fraction of ``activation[s]`` given back at the end of an action of ``kind``: ``B``
    all, ``I`` ``released_by_input``, ``W`` the rest, ``F`` none (``F`` takes it at its
    start)."""
    r = instance.released_by_input
    return {Kind.F: 0.0, Kind.B: 1.0, Kind.I: r, Kind.W: 1.0 - r}[kind]


def release_actions(instance: Instance, stage: int, microbatch: int
                    ) -> list[tuple[Action, float]]:
    """(action whose end releases memory, fraction released) for (stage, microbatch) with the
    default action set: ``B`` (all), or ``I`` (``released_by_input``) and ``W`` (the rest)."""
    if not instance.split_backward:
        return [(Action(Kind.B, stage, microbatch), 1.0)]
    r = instance.released_by_input
    return [(Action(Kind.I, stage, microbatch), r), (Action(Kind.W, stage, microbatch), 1.0 - r)]


# --------------------------------------------------------------------------- completeness
class Fault(StrEnum):
    """Why one action of a set cannot be there (checked in this order)."""

    STAGE = "stage out of range"
    MICROBATCH = "microbatch out of range"
    KIND = "kind needs split backward"
    DEVICE = "on another device"
    TWICE = "appears twice"


def action_fault(instance: Instance, action: Action, device: int,
                 seen: Container[Action]) -> Fault | None:
    """The first :class:`Fault` of ``action`` placed on ``device``, or None.

    ``seen`` holds the actions met before it (for :attr:`Fault.TWICE`).
    """
    if not 0 <= action.stage < instance.num_stages:
        return Fault.STAGE
    if not 0 <= action.microbatch < instance.m:
        return Fault.MICROBATCH
    if action.kind in (Kind.I, Kind.W) and not instance.split_backward:
        return Fault.KIND
    if instance.device_of(action.stage, action.microbatch) != device:
        return Fault.DEVICE
    if action in seen:
        return Fault.TWICE
    return None


def pair_kinds_ok(pair: Overlap) -> bool:
    """An overlapped pair holds one ``F`` (first) and one ``B`` or ``I``."""
    return pair.forward.kind == Kind.F and pair.backward.kind in (Kind.B, Kind.I)


@dataclass(frozen=True)
class Gap:
    """A (stage, microbatch) whose actions are not a complete set.

    Attributes:
        forward_missing: no ``F``.
        mixed: both a fused ``B`` and ``I``/``W``.
        backward_missing: the backward kinds absent when not mixed: ``(B,)`` without split
            backward; with it, those of ``(I, W)`` that are absent when there is no ``B``
            (both when the (stage, microbatch) has no backward at all).
    """

    stage: int
    microbatch: int
    forward_missing: bool
    mixed: bool
    backward_missing: tuple[Kind, ...]


def gaps(instance: Instance, present: Container[Action]) -> Iterator[Gap]:
    """The incomplete (stage, microbatch) of an action set, microbatch-major (then stage)."""
    split = instance.split_backward
    for i in range(instance.m):
        for s in range(instance.num_stages):
            f = Action(Kind.F, s, i) in present
            b, ii, w = (Action(k, s, i) in present for k in (Kind.B, Kind.I, Kind.W))
            mixed = b and (ii or w)
            if b or mixed:
                missing: tuple[Kind, ...] = ()
            elif split:
                missing = tuple(k for k, h in ((Kind.I, ii), (Kind.W, w)) if not h)
            else:
                missing = (Kind.B,)
            if not f or mixed or missing:
                yield Gap(s, i, not f, mixed, missing)


__all__ = [
    "DefaultTasks", "Fault", "FusedRule", "Gap", "StageTicks", "action_fault",
    "chain_heads_tails", "default_kinds", "default_tasks", "dependencies", "duration",
    "fused_rule_from", "gaps", "overlap_duration", "pair_kinds_ok", "release_actions",
    "released_fraction", "stage_ticks",
]
