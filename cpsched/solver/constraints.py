"""The constraint families of the CP-SAT model, one function each (docs/modelling.md).

A family is a function ``family(m: GraphModel) -> None`` that adds its constraints through
the model's timing (``m.timing.start``, ``m.timing.end(t)``), so it works unchanged with or
without overlapped F&B pairs.  :data:`CORE_FAMILIES` make the general model of a
:class:`~cpsched.core.ResourceGraph`; :data:`PIPELINE_FAMILIES` add the pipeline's symmetry
breaking and implied memory constraints.  Adding a family = one function here, appended to
the tuple it belongs to, plus its test.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Collection, Hashable, Iterator, Mapping
from itertools import chain
from typing import Any, Protocol

import networkx as nx
from ortools.sat.python import cp_model

from cpsched.actions import Action, Kind
from cpsched.core import HeadsTails, ResourceGraph, heads_and_tails
from cpsched.graph import release_actions
from cpsched.instance import Instance
from cpsched.schedules.transforms import direction


class GraphModel(Protocol):
    """What a family may use of the model it adds to
    (:class:`cpsched.solver.graph_model.GraphModel` is one)."""

    model: cp_model.CpModel
    rg: ResourceGraph
    horizon: int
    instance: Instance | None
    timing: Any
    aux_hint: list


Family = Callable[[GraphModel], None]
_EPS = 1e-9


def precedences(m: GraphModel) -> None:
    """``start(v) >= end(u) + lag`` for every edge of the task graph (docs/spec.md §1)."""
    t = m.timing
    for u, v, d in m.rg.graph.edges(data=True):
        m.model.add(t.start[v] >= t.end(u) + d["lag"])


def resources(m: GraphModel) -> None:
    """``NoOverlap`` per resource of capacity 1, ``Cumulative`` (demand 1) for capacity k
    (docs/modelling.md §13)."""
    for r, ivs in m.timing.resource_intervals().items():
        cap = m.rg.capacity[r]
        if cap == 1:
            m.model.add_no_overlap(ivs)
        elif len(ivs) > cap:
            m.model.add_cumulative(ivs, [1] * len(ivs), cap)


def memory_pools(m: GraphModel) -> None:
    """One ``Cumulative`` per limited pool over the live intervals ``[start alloc, end free)``
    of its buffers (docs/modelling.md §2, §3: cumulative, not reservoir)."""
    t = m.timing
    by_pool: dict[Hashable, tuple[list, list]] = defaultdict(lambda: ([], []))
    for k, b in enumerate(m.rg.buffers):
        if m.rg.pools[b.pool] is None:
            continue
        size = m.model.new_int_var(0, m.horizon, f"live_{k}")
        m.model.add(size == t.end(b.free) - t.start[b.alloc])
        iv = m.model.new_interval_var(t.start[b.alloc], size, t.end(b.free), f"buf_{k}")
        m.aux_hint.append((size, lambda st, en, b=b: en[b.free] - st[b.alloc]))
        by_pool[b.pool][0].append(iv)
        by_pool[b.pool][1].append(b.amount)
    for pool, (ivs, amounts) in by_pool.items():
        limit = m.rg.pools[pool]
        if limit is not None and sum(amounts) > limit:
            m.model.add_cumulative(ivs, amounts, limit)


def fifo_order(m: GraphModel) -> None:
    """FIFO microbatch order per (kind, stage), per direction under bidirectional placement:
    ``start(k, s, i + 1) >= end(k, s, i)`` — valid symmetry breaking (docs/modelling.md §1)."""
    inst, t = m.instance, m.timing
    assert inst is not None
    for a, nxt in fifo_pairs(inst, t.start):
        c = m.model.add(t.start[nxt] >= t.end(a))
        guard = t.fifo_guard(a, nxt)
        if guard:
            c.only_enforce_if(guard)


def fifo_pairs(inst: Instance, actions: Collection[Action]) -> Iterator[tuple[Action, Action]]:
    """``(a, next)``: ``a`` and the same (kind, stage) of the next microbatch, both in
    ``actions`` and in one direction — the pairs FIFO order binds (docs/modelling.md §1)."""
    for a in actions:
        nxt = Action(a.kind, a.stage, a.microbatch + 1)
        if nxt in actions and direction(inst, a.microbatch) == direction(inst, nxt.microbatch):
            yield a, nxt


def memory_precedence_pairs(inst: Instance, pairs_possible: bool = False
                            ) -> Iterator[tuple[Action, Action]]:
    """``(F, release)`` with ``start F >= end release`` implied by the memory limit and FIFO
    (docs/modelling.md §2): when ``F(s, j)`` starts on device d, microbatch j already holds
    the stages of d before s; each earlier microbatch still live on s holds its activation
    (or, after its ``I``, the part ``W`` releases) — so at most k of them can be live:
    ``start F(s, i + k) >= end release(s, i)``.  ``pairs_possible``: overlapped pairs may fuse
    a backward (then W ends are not in FIFO order and only the first release is used)."""
    limit = inst.memory_limit
    if limit is None:
        return
    for s in range(inst.num_stages):
        a = inst.activation[s]
        if a <= 0:
            continue
        for d in ((0, 1) if inst.placement == "bidirectional" else (0,)):
            mbs = [i for i in range(inst.m) if direction(inst, i) == d]
            dev = inst.device_of(s, mbs[0])
            earlier = sum(inst.activation[u] for u in inst.stages_of(dev)
                          if u < s and inst.device_of(u, mbs[0]) == dev)
            room = limit - earlier
            rels = release_actions(inst, s, mbs[0])
            # live until the first release: holds a; until the last: at least that part
            bounds = [(rels[0][0].kind, math.floor(room / a + _EPS))]
            # (W ends are not in FIFO order when a pair may fuse the backward)
            if len(rels) == 2 and rels[1][1] > _EPS and not pairs_possible:
                # others past their I hold at least a * (1 - r) each
                bounds.append((Kind.W, math.floor((room - a) / (a * rels[1][1]) + _EPS) + 1))
            for kind, k in bounds:
                k = max(k, 1)
                for idx in range(k, len(mbs)):
                    j, i = mbs[idx], mbs[idx - k]
                    yield Action(Kind.F, s, j), Action(kind, s, i)


def memory_precedences(m: GraphModel) -> None:
    """Implied memory precedences (:func:`memory_precedence_pairs`)."""
    inst, t = m.instance, m.timing
    if inst is None:
        return
    for f, rel in memory_precedence_pairs(inst, t.pairs_possible):
        m.model.add(t.start[f] >= t.end(rel))


def footprint_precedence_pairs(inst: Instance) -> Iterator[tuple[Action, Action]]:
    """``(F, release)`` with ``start F >= end release``, implied for devices with several
    stages ``s_1 < ... < s_v`` (docs/modelling.md §14): from the start of ``F(s_t, i)`` to
    the end of the first release of ``s_t``, microbatch i holds ``a[s_1] + ... + a[s_t]`` on
    the device (its earlier stages release later).  Every later microbatch that has entered
    the device by then holds at least ``a[s_1]`` until after that moment (FIFO), so at most
    ``K_t = floor((limit - footprint_t) / a[s_1])`` can have entered:
    ``start F(s_1, i + K_t + 1) >= end firstrel(s_t, i)``."""
    if inst.memory_limit is None or inst.placement == "bidirectional":
        return
    limit = inst.memory_limit
    for d in range(inst.p):
        stages = inst.stages_of(d)
        first = stages[0]
        a1 = inst.activation[first]
        if len(stages) < 2 or a1 <= 0:
            continue
        footprint = 0.0
        for st in stages:
            footprint += inst.activation[st]
            if st == first:
                continue  # memory_precedence_pairs covers it
            k = math.floor((limit - footprint) / a1 + _EPS) + 1
            rel_kind = release_actions(inst, st, 0)[0][0].kind
            for i in range(inst.m - k):
                yield Action(Kind.F, first, i + k), Action(rel_kind, st, i)


def footprint_precedences(m: GraphModel) -> None:
    """Implied footprint precedences (:func:`footprint_precedence_pairs`)."""
    inst, t = m.instance, m.timing
    if inst is None:
        return
    for f, rel in footprint_precedence_pairs(inst):
        m.model.add(t.start[f] >= t.end(rel))


def ordered_heads_tails(inst: Instance, g: nx.DiGraph,
                        dur: Mapping[Action, int] | None = None) -> HeadsTails:
    """Heads and tails (ticks) of ``g``'s actions in every FIFO schedule: the longest chains
    through the dependencies *and* the implied order — FIFO (:func:`fifo_pairs`), the memory
    precedences (:func:`memory_precedence_pairs`) and the footprint precedences
    (:func:`footprint_precedence_pairs`), each ``start >= end`` (docs/modelling.md §30).

    Args:
        g: the task graph (:func:`cpsched.graph.build_task_graph`): ``duration`` per node,
            ``lag`` per edge.
        dur: the durations along chains (with an overlap cost the pair-relaxed ones,
            :func:`cpsched.graph.overlap_relaxed_durations`); default the graph's.

    Returns:
        ``(head, tail)`` as :func:`cpsched.core.heads_and_tails`, each at least the plain
        one.  Since some optimal schedule is FIFO (§1) and every FIFO schedule keeps these
        orders (§2, §14), bounds built from them are lower bounds on the optimum.  With an
        overlap cost ``W``'s FIFO is left out (a fused ``W`` ends with its pair), so nothing
        but its ``I`` precedes a ``W`` and ``end(W) >= head(W) + dur(W)`` holds along it.

    Raises:
        networkx.NetworkXUnfeasible: the orders form a cycle (:func:`cpsched.core.heads_and_tails`;
            the memory limit cannot hold).
    """
    pairs = inst.overlap_forward_backward is not None
    implied = chain(((a, nxt) for a, nxt in fifo_pairs(inst, g)
                     if not (pairs and a.kind == Kind.W)),
                    ((rel, f) for f, rel in chain(memory_precedence_pairs(inst, pairs),
                                                  footprint_precedence_pairs(inst))
                     if f in g and rel in g))
    return heads_and_tails(g, dur, implied)


#: The general model of a resource graph (docs/modelling.md §13).
CORE_FAMILIES: tuple[Family, ...] = (precedences, resources, memory_pools)
#: The pipeline model: the core plus symmetry breaking and implied memory constraints.
PIPELINE_FAMILIES: tuple[Family, ...] = CORE_FAMILIES + (
    fifo_order, memory_precedences, footprint_precedences)
