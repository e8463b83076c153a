"""The list scheduler's static data and priority rules (the scheduler itself, its admission
and portfolio: :mod:`cpsched.schedules.listsched`).

**Priority rules** are named functions (:data:`PRIORITY_RULES`; smaller key first).  A task's
key is ``(w_last, rule + jitter, ..., queue position)``: :func:`w_last` ranks ``W`` last, so it
fills bubbles, is postponed while forwards and input gradients can run, and runs as soon as a
forward waits for memory; the device's (stage, kind) order breaks the remaining ties.
:func:`dfs`: lowest microbatch, then furthest along its chain (``F`` of stage ``s`` has
progress ``s``, its backward ``2S - 1 - s``) — with the ``dfs`` window
(:func:`default_window`), 1F1B on ``v = 1``.
:func:`bfs`: forwards first, then least progress, then lowest microbatch — GPipe on ``v = 1``.
:func:`cp`: longest tail first.  :func:`due`: ``i * T - tail - duration``, a due date for
microbatch ``i`` when one enters every ``T = 0.4 x`` the largest per-microbatch work of a
device (``dueX``: ``X`` times it).  :func:`ilv`: the position in interleaved 1F1B's order
(Megatron-LM's schedule table, Narayanan et al. 2021, arXiv:2104.04473): after the warm-up one
forward, one backward — depth first over chunks in groups of microbatches, which ``dfs``
(depth first over single microbatches) is not once a device holds several stages.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import partial

from cpsched.actions import Action, Kind
from cpsched.engine import ADMIT, FINISH, START, TaskTable
from cpsched.instance import Instance
from cpsched.rules import default_tasks, released_fraction

#: Public rule names (``dueX`` with a number ``X`` is accepted too).
RULES = ("dfs", "bfs", "cp", "due", "ilv")

Key = tuple[float, ...]


class ListSchedulerError(RuntimeError):
    """The list scheduler got stuck (a bug: admission is designed never to deadlock)."""


def default_window(inst: Instance) -> tuple[int, ...]:
    """The ``dfs`` window per device: ``ceil((S - first stage of d) / v)``."""
    S, v = inst.num_stages, inst.v
    return tuple(math.ceil((S - min(inst.stages_of(d))) / v) for d in range(inst.p))


def group_size(inst: Instance) -> int:
    """Microbatches per group of interleaved 1F1B: PyTorch's ``microbatches_per_round =
    m // max(1, m // p)`` (Megatron's default ``p`` when ``m`` is a multiple of ``p``); see
    :func:`cpsched.schedules.basic.chunk_table`."""
    return inst.m // max(1, inst.m // inst.p)


def interleaved_warmup(inst: Instance, d: int) -> int:
    """Interleaved 1F1B's warm-up forwards on device ``d``: ``(v - 1) g + 2 (S - 1 - last
    stage of d)``, at most ``m v`` — Megatron's ``(v - 1) g + 2 (p - 1 - r)`` for ``loop``
    placement (Narayanan et al. 2021, arXiv:2104.04473; :func:`cpsched.schedules.basic.
    interleaved_1f1b`), the same count of later stages for ``v`` placement."""
    nv, g = len(inst.stages_of(d)), group_size(inst)
    return min((nv - 1) * g + 2 * (inst.num_stages - 1 - max(inst.stages_of(d))),
               inst.m * nv)


class Problem:
    """Static data shared by every run on one instance: the pipeline's default tasks
    (:func:`cpsched.rules.default_tasks`: ticks, tails, the lower bound) as the engine's
    :class:`~cpsched.engine.TaskTable`, and the memory needs of each device."""

    def __init__(self, inst: Instance) -> None:
        self.inst = inst
        tasks = default_tasks(inst)
        self.action = tasks.action
        #: a makespan no run can beat, where the portfolios stop: the default tasks' bound,
        #: which overlapped pairs can beat (then 0: they never stop early)
        self.bound = tasks.bound if inst.overlap_forward_backward is None else 0
        self.S, self.m, self.kinds, self.bk = inst.num_stages, inst.m, tasks.kinds, tasks.kinds[1]
        nk, S, m = len(tasks.kinds), self.S, self.m
        self.stages = [inst.stages_of(d) for d in range(inst.p)]
        self.table = TaskTable(tasks.duration, tasks.device, [1] * inst.p, tasks.succ,
                               [list(range(q * m, q * m + m)) for q in range(nk * S)],
                               [*([kk * S + s for s in st for kk in range(nk)]
                                  for st in self.stages), []])
        self.dev = [inst.device_of(s) for s in range(self.S)]
        self.first = [min(st) for st in self.stages]
        self.nstages = [len(st) for st in self.stages]
        self.dur, self.tail = tasks.dur, tasks.tail
        self.act = inst.activation
        self.need = [sum(self.act[s] for s in st) for st in self.stages]
        self.work = max(sum(self.dur[k][s] for s in st for k in self.kinds)
                        for st in self.stages)
        self._keys: dict[tuple[str, str], list[Key]] = {}
        #: the microbatch index the rules rank by (bidirectional: within its direction), the
        #: key parts after the rule's per microbatch, and whether the queue position of the
        #: (kind, stage) on its device breaks ties before them (:func:`task_keys`)
        self.rank_of: list[int] = list(range(m))
        self.tie_of: list[tuple[int, ...]] = [()] * m
        self.queue_tie = True
        g = group_size(inst)
        #: per stage: (stages on its device, its chunk there, interleaved warm-up, group size)
        self.chunks = [(len(self.stages[d]), sorted(self.stages[d]).index(s),
                        interleaved_warmup(inst, d), g) for s, d in enumerate(self.dev)]
        nf = S * m  # forwards are admitted and take memory, the rest release it
        self.hooked = [ADMIT | START] * nf + [FINISH] * (len(self.table.duration) - nf)
        act = partial(tuple.__new__, Action)  # Action((k, s, i)), C speed
        #: the action of every task, its stage, microbatch and device
        self.acts = [act((k, s, i)) for k in self.kinds for s in range(S) for i in range(m)]
        self.stage_of = [s for _ in self.kinds for s in range(S) for _ in range(m)]
        self.mb_of = list(range(m)) * (S * nk)
        self.dev_of = tasks.device
        #: activation taken (F) or given back (the rest) by each task; closes: B and W
        frac = [1.0 if k == Kind.F else released_fraction(inst, k) for k in self.kinds]
        self.release_of = [self.act[s] * frac[kk] for kk in range(nk) for s in range(S)
                           for _ in range(m)]
        self.closes = [k in (Kind.B, Kind.W) for k in self.kinds for _ in range(S * m)]


# ---------------------------------------------------------------------- priority rules
Rule = Callable[[Problem, Kind, int, int], tuple[float, ...]]


def w_last(pb: Problem, k: Kind, s: int, i: int) -> tuple[float, ...]:
    """``W`` after everything else (the Zero Bubble greedy placement of weight gradients)."""
    return (k == Kind.W,)


def _progress(pb: Problem, k: Kind, s: int) -> int:
    return s if k == Kind.F else 2 * pb.S - 1 - s


def dfs(pb: Problem, k: Kind, s: int, i: int) -> tuple[float, ...]:
    """Depth first: lowest microbatch, then furthest along its chain (→ 1F1B)."""
    return (i, -_progress(pb, k, s))


def bfs(pb: Problem, k: Kind, s: int, i: int) -> tuple[float, ...]:
    """Breadth first: forwards, then least progress, then lowest microbatch (→ GPipe)."""
    return (k != Kind.F, _progress(pb, k, s), i)


def cp(pb: Problem, k: Kind, s: int, i: int) -> tuple[float, ...]:
    """Critical path: longest tail first, then lowest microbatch."""
    return (-pb.tail[k][s], i)


def due(pb: Problem, k: Kind, s: int, i: int, fraction: float = 0.4) -> tuple[float, ...]:
    """Due date ``i * T - tail - duration`` with ``T = fraction x`` the largest work per
    microbatch of a device, then lowest microbatch."""
    return (i * (fraction * pb.work) - pb.tail[k][s] - pb.dur[k][s], i)


def ilv(pb: Problem, k: Kind, s: int, i: int) -> tuple[float, ...]:
    """Interleaved 1F1B's order as a priority (→ Megatron's interleaved 1F1B on ``loop``).

    Forward step ``n`` of device ``d`` (its chunk ``c``, microbatch ``i``, in Megatron's
    schedule table: groups of :func:`group_size` microbatches run chunk 0, 1, ...) gets key
    ``2 (n - w_d)`` with ``w_d`` = :func:`interleaved_warmup`; backward step ``n`` (chunk
    ``v - 1 - c``) gets ``2 n + 1``.  So after the warm-up a device alternates one forward,
    one backward, as the fixed order does, but never waits for a step that is not ready.
    """
    nv, c, w, g = pb.chunks[s]
    m = pb.m
    lo = (i // g) * g
    size = min(g, m - lo)
    if k == Kind.F:
        return (2 * (lo * nv + c * size + i - lo - w), i)
    return (2 * (lo * nv + (nv - 1 - c) * size + i - lo) + 1, i)


#: Named priority rules (``dueX`` is :func:`due` with ``fraction = X``).
PRIORITY_RULES: dict[str, Rule] = {"dfs": dfs, "bfs": bfs, "cp": cp, "due": due, "ilv": ilv}


def rule_function(name: str) -> Rule:
    """The rule called ``name`` (``dfs``, ``bfs``, ``cp``, ``due``, ``ilv`` or ``dueX``,
    X >= 0).

    Raises:
        ValueError: unknown name.
    """
    if name in PRIORITY_RULES:
        return PRIORITY_RULES[name]
    if name.startswith("due"):
        try:
            frac = float(name[3:])
        except ValueError:
            frac = -1.0
        if frac >= 0:
            return partial(due, fraction=frac)
    raise ValueError(f"tie_break = {name!r}: one of {', '.join(RULES)} (or dueX, X >= 0)")


def task_keys(pb: Problem, rule: str, w_policy: str = "lazy",
              jitter: Sequence[float] | None = None) -> list[Key]:
    """Key of every task: ``(w_last, rule (its first part + jitter[task]), queue position)``,
    the rule given :attr:`Problem.rank_of` as the microbatch index and the key ending with
    :attr:`Problem.tie_of` (bidirectional: no queue position, the direction instead).

    ``w_policy="eager"`` ranks ``W`` like its input gradient (so not last).  Keys without
    jitter are cached per (rule, policy).
    """
    cached = pb._keys.get((rule, w_policy)) if jitter is None else None
    if cached is not None:
        return cached
    fn = rule_function(rule)
    S, m, bk, rank, tie = pb.S, pb.m, pb.bk, pb.rank_of, pb.tie_of
    qpos = {(k, s): n for st in pb.stages for n, (s, k) in enumerate(
        (s, k) for s in st for k in pb.kinds)}
    keys: list[Key] = []
    for k in pb.kinds:
        rk = bk if (k == Kind.W and w_policy == "eager") else k
        for s in range(S):
            w, qp = w_last(pb, rk, s, 0), (qpos[(k, s)],) if pb.queue_tie else ()
            if jitter:
                t0 = len(keys)
                keys += [w + (kk[0] + jitter[t0 + i], *kk[1:]) + qp + tie[i]
                         for i, kk in enumerate(fn(pb, rk, s, rank[i]) for i in range(m))]
            else:
                keys += [w + fn(pb, rk, s, rank[i]) + qp + tie[i] for i in range(m)]
    if jitter is None:
        pb._keys[(rule, w_policy)] = keys
    return keys


def interleaved_cap(pb: Problem) -> float:
    """A memory cap (memory units) from interleaved 1F1B's in-flight count: on each device the
    most activation any :func:`interleaved_warmup` ``+ 1`` consecutive forward steps of
    Megatron's schedule table take (what that schedule holds once its warm-up is done), the
    largest over devices, and at least :meth:`~cpsched.instance.Instance.min_memory_limit`.
    """
    inst = pb.inst
    m, g, cap = pb.m, group_size(inst), inst.min_memory_limit()
    for d, st in enumerate(pb.stages):
        nv, order = len(st), sorted(st)
        acts: list[float] = []
        for lo in range(0, m, g):
            size = min(g, m - lo)
            acts += [pb.act[order[c]] for c in range(nv) for _ in range(size)]
        width = interleaved_warmup(inst, d) + 1
        run = sum(acts[:width])
        top = run
        for n in range(width, len(acts)):
            run += acts[n] - acts[n - width]
            top = max(top, run)
        cap = max(cap, top)
    return cap


__all__ = [
    "PRIORITY_RULES", "RULES", "Key", "ListSchedulerError", "Problem", "Rule", "bfs", "cp",
    "default_window", "dfs",
    "due", "group_size", "ilv", "interleaved_cap", "interleaved_warmup", "rule_function",
    "task_keys", "w_last",
]
