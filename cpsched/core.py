"""The general core: a task graph with resources of any capacity and memory buffers, its
bounds and a list scheduler (no solver code; the CP-SAT model of it is
:class:`cpsched.solver.GraphModel`).  Pipelines are one builder
(:func:`cpsched.graph.pipeline_resource_graph`); the article's HLS example is another
(:func:`hls_example`).

A :class:`ResourceGraph` holds

* **tasks** with an integer ``duration`` and an optional ``resource``;
* **resources** with a ``capacity`` (1 = one task at a time → ``NoOverlap``; k → ``Cumulative``
  with demand 1 per task);
* **edges** ``u -> v`` with a ``lag``: ``start(v) >= end(u) + lag``;
* **memory pools** with an optional ``limit`` and **buffers**: ``amount`` units held in a pool
  from the *start* of an ``alloc`` task to the *end* of a ``free`` task (memory deltas).

All times are integers (ticks).  Sources: list scheduling as in high-level synthesis (priority
rule + lexicographic tie-breakers, run by the event engine :func:`cpsched.engine.dispatch`) and
the four-ingredient CP-SAT model (windows, dependencies, NoOverlap, Cumulative) of the
pipeline-scheduling article (docs/references.md#pipeline-scheduling-article).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import networkx as nx

from cpsched.engine import PriorityRule, TaskTable, dispatch, lexicographic, paused_gc

Task = Hashable


def digraph_from(nodes: Iterable[tuple[Task, dict[str, Any]]],
                 edges: Iterable[tuple[Task, Task, dict[str, Any]]],
                 **graph_attr: Any) -> nx.DiGraph:
    """A ``networkx.DiGraph`` with these nodes (and attribute dicts) and edges, built
    straight into networkx's adjacency dicts: what ``add_nodes_from`` / ``add_edges_from``
    give, about three times faster, for graphs that are valid by construction (every edge
    end is a listed node; no duplicates).  The attribute dicts are taken over, not copied:
    pass fresh ones.

    Raises:
        KeyError: an edge names a node that is not listed.
    """
    g = nx.DiGraph(**graph_attr)
    node, succ, pred = g._node, g._succ, g._pred  # noqa: SLF001 - bulk construction
    for t, attr in nodes:
        node[t] = attr
        succ[t] = {}
        pred[t] = {}
    for u, v, attr in edges:
        succ[u][v] = pred[v][u] = attr
    nx._clear_cache(g)  # noqa: SLF001
    return g


#: ``(head, tail)`` of :func:`heads_and_tails`: ticks per task.
HeadsTails = tuple[dict[Task, int], dict[Task, int]]


def heads_and_tails(g: nx.DiGraph, durations: Mapping[Task, int] | None = None,
                    extra: Iterable[tuple[Task, Task]] = ()) -> HeadsTails:
    """ASAP start (``head``) and ``tail`` of every node of a DAG whose nodes carry
    ``duration`` and edges ``lag`` (ticks).

    ``head[t]``: longest chain of durations + lags that must run before ``t`` starts.
    ``tail[t]``: longest chain that must run after ``t`` ends (0 for a sink).
    Both dicts are in a topological order of ``g`` (with ``extra``, of ``g`` and it).

    Args:
        durations: used instead of the nodes' ``duration`` (e.g. the pair-relaxed ones,
            :func:`cpsched.graph.overlap_relaxed_durations`); every node must have one.
        extra: more edges ``(u, v)`` of lag 0 (``start(v) >= end(u)``), e.g. the implied
            orders of :func:`cpsched.solver.constraints.ordered_heads_tails`, taken into
            account without copying ``g``; an edge of ``g`` keeps its own lag.

    Raises:
        networkx.NetworkXUnfeasible: the graph (with ``extra``) has a cycle.
        KeyError: a node without ``duration``, an edge without ``lag``, or an ``extra``
            edge whose end is not a node of ``g``.
    """
    pred, succ = g._pred, g._succ  # noqa: SLF001 - read-only, 4x faster than the views
    dur = (durations if durations is not None
           else {t: a["duration"] for t, a in g.nodes(data=True) if "duration" in a})
    more_succ: dict[Task, list[Task]] = defaultdict(list)
    more_pred: dict[Task, list[Task]] = defaultdict(list)
    for u, v in extra:
        if v not in succ[u] and u not in pred[v]:  # KeyError for an unknown node
            more_succ[u].append(v)
            more_pred[v].append(u)
    indeg = {t: len(ps) + len(more_pred.get(t, ())) for t, ps in pred.items()}
    order = [t for t, k in indeg.items() if k == 0]
    for t in order:  # Kahn's algorithm (the list grows while it is read)
        for w in chain(succ[t], more_succ.get(t, ())):
            indeg[w] -= 1
            if indeg[w] == 0:
                order.append(w)
    if len(order) < len(indeg):
        raise nx.NetworkXUnfeasible("Graph contains a cycle or graph changed during iteration")
    head: dict[Task, int] = {}
    for t in order:
        h = 0
        for u, e in pred[t].items():
            x = head[u] + dur[u] + e["lag"]
            if x > h:
                h = x
        for u in more_pred.get(t, ()):
            x = head[u] + dur[u]
            if x > h:
                h = x
        head[t] = h
    tail: dict[Task, int] = {}
    for t in reversed(order):
        h = 0
        for w, e in succ[t].items():
            x = e["lag"] + dur[w] + tail[w]
            if x > h:
                h = x
        for w in more_succ.get(t, ()):
            x = dur[w] + tail[w]
            if x > h:
                h = x
        tail[t] = h
    return head, tail


@dataclass(frozen=True)
class Buffer:
    """``amount`` units of ``pool`` held from the start of ``alloc`` to the end of ``free``."""

    pool: Hashable
    alloc: Task
    free: Task
    amount: int


@dataclass
class ResourceGraph:
    """Tasks, resources of any capacity, precedences with lags, memory pools and buffers.

    Raises:
        ValueError: on an unknown resource/task/pool, a negative duration, lag or amount, or a
            cycle (checked by :meth:`check`).
    """

    graph: nx.DiGraph = field(default_factory=nx.DiGraph)
    capacity: dict[Hashable, int] = field(default_factory=dict)
    pools: dict[Hashable, int | None] = field(default_factory=dict)
    buffers: list[Buffer] = field(default_factory=list)

    def add_resource(self, name: Hashable, capacity: int = 1) -> None:
        """A resource running at most ``capacity`` tasks at once."""
        if capacity < 1:
            raise ValueError(f"resource {name!r}: capacity = {capacity}, must be >= 1")
        self.capacity[name] = capacity

    def add_task(self, name: Task, duration: int, resource: Hashable | None = None) -> None:
        """A task of ``duration`` ticks on ``resource`` (None: needs no resource)."""
        if duration < 0:
            raise ValueError(f"task {name!r}: duration = {duration}, must be >= 0")
        if resource is not None and resource not in self.capacity:
            raise ValueError(f"task {name!r}: unknown resource {resource!r}")
        self.graph.add_node(name, duration=int(duration), resource=resource)

    def add_edge(self, u: Task, v: Task, lag: int = 0) -> None:
        """``start(v) >= end(u) + lag``."""
        for t in (u, v):
            if t not in self.graph:
                raise ValueError(f"edge {u!r} -> {v!r}: unknown task {t!r}")
        if lag < 0:
            raise ValueError(f"edge {u!r} -> {v!r}: lag = {lag}, must be >= 0")
        self.graph.add_edge(u, v, lag=int(lag))

    def add_pool(self, name: Hashable, limit: int | None = None) -> None:
        """A memory pool with an optional limit."""
        self.pools[name] = limit

    def add_buffer(self, pool: Hashable, alloc: Task, free: Task, amount: int) -> None:
        """Hold ``amount`` of ``pool`` from the start of ``alloc`` to the end of ``free``."""
        if pool not in self.pools:
            raise ValueError(f"buffer: unknown pool {pool!r}")
        for t in (alloc, free):
            if t not in self.graph:
                raise ValueError(f"buffer: unknown task {t!r}")
        if amount < 0:
            raise ValueError(f"buffer {alloc!r}..{free!r}: amount = {amount}, must be >= 0")
        if amount:
            self.buffers.append(Buffer(pool, alloc, free, int(amount)))

    def duration(self, t: Task) -> int:
        return self.graph.nodes[t]["duration"]

    def resource(self, t: Task) -> Hashable | None:
        return self.graph.nodes[t]["resource"]

    def check(self) -> None:
        """Raise ValueError if the precedences have a cycle."""
        if not nx.is_directed_acyclic_graph(self.graph):
            cyc = nx.find_cycle(self.graph)
            raise ValueError("precedence cycle: " + " -> ".join(repr(u) for u, _ in cyc))

    # ------------------------------------------------------------ bounds
    def heads_and_tails(self) -> tuple[dict[Task, int], dict[Task, int]]:
        """Earliest start (head) and the longest chain after the end (tail), per task."""
        return heads_and_tails(self.graph)

    def lower_bound(self) -> int:
        """``max(critical path, max over resources of min head + ceil(work / capacity) + min
        tail)``: no schedule is shorter."""
        head, tail = self.heads_and_tails()
        best = max((head[t] + self.duration(t) + tail[t] for t in self.graph), default=0)
        by_res: dict[Hashable, list[Task]] = defaultdict(list)
        for t in self.graph:
            if self.resource(t) is not None:
                by_res[self.resource(t)].append(t)
        for r, ts in by_res.items():
            work = math.ceil(sum(self.duration(t) for t in ts) / self.capacity[r])
            best = max(best, min(head[t] for t in ts) + work + min(tail[t] for t in ts))
        return best


# --------------------------------------------------------------- validation
def check_starts(rg: ResourceGraph, starts: Mapping[Task, int]) -> list[str]:
    """Violations of ``starts`` against ``rg`` (precedences, capacities, pool limits)."""
    out: list[str] = []
    end = {t: starts[t] + rg.duration(t) for t in rg.graph}
    for u, v, d in rg.graph.edges(data=True):
        if starts[v] < end[u] + d["lag"]:
            out.append(f"{v!r} starts at {starts[v]} before {u!r} ends at {end[u]} + {d['lag']}")
    events: dict[Hashable, list[tuple[int, int]]] = defaultdict(list)
    for t in rg.graph:
        r = rg.resource(t)
        if r is not None and rg.duration(t) > 0:
            events[r] += [(starts[t], 1), (end[t], -1)]
    for r, ev in events.items():
        load = 0
        for time, delta in sorted(ev, key=lambda x: (x[0], x[1])):
            load += delta
            if load > rg.capacity[r]:
                out.append(f"resource {r!r} runs {load} > capacity {rg.capacity[r]} at {time}")
                break
    mem: dict[Hashable, list[tuple[int, int]]] = defaultdict(list)
    for b in rg.buffers:
        mem[b.pool] += [(starts[b.alloc], b.amount), (end[b.free], -b.amount)]
    for pool, ev in mem.items():
        limit, held = rg.pools[pool], 0
        for time, delta in sorted(ev, key=lambda x: (x[0], x[1])):
            held += delta
            if limit is not None and held > limit:
                out.append(f"pool {pool!r} holds {held} > limit {limit} at {time}")
                break
    return out


# ------------------------------------------------------------ list scheduling
PriorityKey = Callable[[Task], Any]


def latest_start(rg: ResourceGraph) -> PriorityRule:
    """Priority rule: latest start (ALAP against the critical path) first."""
    head, tail = rg.heads_and_tails()
    cp = max((head[t] + rg.duration(t) + tail[t] for t in rg.graph), default=0)
    return lambda t: cp - tail[t] - rg.duration(t)


def by_name(t: Task) -> str:
    """Tie-breaker: the task's ``repr``."""
    return repr(t)


def list_schedule(rg: ResourceGraph, key: PriorityKey | None = None) -> dict[Task, int]:
    """Non-delay list scheduling: at each event time, start ready tasks in ``key`` order
    (smallest first; a tuple = priority rule then lexicographic tie-breakers) while their
    resource has free capacity and their buffers fit the pool limits.  Runs on the event
    engine (:func:`cpsched.engine.dispatch`); the pipeline's own list scheduler is
    :func:`cpsched.schedules.listsched.pipeline_list_schedule`.

    Default key: ``lexicographic(latest_start(rg), by_name)``.

    Returns:
        ``{task: start}`` in start order.

    Raises:
        ValueError: the graph has a cycle, or no task can start while some remain (a pool
            limit blocks every ready task).
    """
    rg.check()
    if key is None:
        key = lexicographic(latest_start(rg), by_name)
    tasks = list(rg.graph)
    index = {t: n for n, t in enumerate(tasks)}
    res_index = {r: n for n, r in enumerate(rg.capacity)}
    allocs: list[list[Buffer]] = [[] for _ in tasks]
    frees: list[list[Buffer]] = [[] for _ in tasks]
    for b in rg.buffers:
        allocs[index[b.alloc]].append(b)
        frees[index[b.free]].append(b)
    held: dict[Hashable, int] = defaultdict(int)

    def admit(n: int) -> bool:
        return not any(rg.pools[b.pool] is not None and held[b.pool] + b.amount > rg.pools[b.pool]
                       for b in allocs[n])

    def start(n: int, now: int) -> None:
        for b in allocs[n]:
            held[b.pool] += b.amount

    def finish(n: int, end: int) -> None:
        for b in frees[n]:
            held[b.pool] -= b.amount

    res = [-1 if rg.resource(t) is None or rg.duration(t) == 0 else res_index[rg.resource(t)]
           for t in tasks]
    rq: list[list[int]] = [[] for _ in range(len(res_index) + 1)]
    for n, r in enumerate(res):
        rq[r].append(n)
    table = TaskTable([rg.duration(t) for t in tasks], res, list(rg.capacity.values()),
                      [[(index[w], e["lag"]) for w, e in rg.graph.succ[t].items()] for t in tasks],
                      [[n] for n in range(len(tasks))], rq)
    with paused_gc():
        out = dispatch(table, [key(t) for t in tasks], admit=admit, on_start=start,
                       on_finish=finish, local=False)
    if out.waiting:
        raise ValueError("list scheduling is stuck: every ready task waits for memory "
                         f"({', '.join(repr(tasks[n]) for n in out.waiting[:3])} ...)")
    return {tasks[n]: out.starts[n] for n in out.sequence}


# ---------------------------------------------------------------- HLS example
def hls_example(multiplier_latency: int = 1) -> ResourceGraph:
    """The article's high-level-synthesis example: ``(a+b)*(c+d) + (e+f)*(g+h)`` with one
    multiplier and two adders (every operation ``1`` cycle, multiplications
    ``multiplier_latency``).  Tasks: ``"a+b"``, ``"c+d"``, ``"e+f"``, ``"g+h"``, ``"m1"``
    (= (a+b)*(c+d)), ``"m2"``, ``"sum"``.

    Pairing the two additions that feed the same multiplication first lets the multiplier
    start one cycle earlier than pairing additions that feed different ones.
    """
    rg = ResourceGraph()
    rg.add_resource("adder", 2)
    rg.add_resource("multiplier", 1)
    for t in ("a+b", "c+d", "e+f", "g+h", "sum"):
        rg.add_task(t, 1, "adder")
    for t in ("m1", "m2"):
        rg.add_task(t, multiplier_latency, "multiplier")
    for a, mlt in (("a+b", "m1"), ("c+d", "m1"), ("e+f", "m2"), ("g+h", "m2")):
        rg.add_edge(a, mlt)
    rg.add_edge("m1", "sum")
    rg.add_edge("m2", "sum")
    return rg


def makespan_of(rg: ResourceGraph, starts: Mapping[Task, int]) -> int:
    """Latest end of ``starts`` on ``rg``."""
    return max((starts[t] + rg.duration(t) for t in starts), default=0)
