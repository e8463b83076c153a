"""ZB's automatic scheduler: the Zero Bubble authors' greedy over per-stage costs and memory.

Source: Qi, Wan, Huang, Lin, "Zero Bubble (Almost) Pipeline Parallelism" (ICLR 2024,
arXiv:2401.10241) §3.2 (automatic scheduling) and the Zero Bubble repository's
``create_schedule`` (its heuristic ``initial_solution``; their ILP refinement is disabled in the
code; docs/references.md#zero-bubble).  Re-implemented in cpsched's terms; the tests check the
orders against orders recorded from the authors' code (tests/data/zb/).

Placement ``loop`` with one stage per device (stage ``j`` on device ``j``).  The greedy keeps
per stage the end of its last action, the memory held and the bubble so far, and places
microbatch by microbatch:

* microbatch 0: its forward on every stage; then, from the last stage back, as many extra
  forwards as fit under the memory cap and (``allow_bubble`` off) start before the first
  input gradient arrives, or (on) end by then; trimmed so that each stage has fewer than the
  one before; then the first input gradient on every stage from the last;
* microbatch ``i >= 1``: a forward on each stage that still has one, unless (with
  ``prioritize_b``) the stage is two forwards ahead of the next and would rather wait; a
  stage forwards only if every later stage does; before a forward or an input gradient,
  ``W`` go first while memory would exceed the cap, while they fit in the wait for the
  predecessor, and one more when the wait stays within the largest bubble so far (or always,
  if ``no_bubble_greedy`` is off and the wait is longer); then every stage's input gradient
  ``i`` from the last (stage 0 runs all its ``W`` first once it has run every forward);
* the remaining ``W``.

Of the eight variants the one with the shortest longest-stage span (first best kept) is the
schedule; each stage's order is its actions by completion time (ties: F, I, W, then
microbatch).

Inputs from the instance: F, I, W durations per stage and the latency ``p2p_latency`` in
integer ticks (:meth:`Instance.ticks`; the greedy is scale-free, so ticks only make ties
exact); memory per forward ``activation[s]``, per ``I`` ``-released_by_input * activation[s]``,
per ``W`` the rest; the per-stage cap is ``memory.limit`` (the device's limit, in activation
units: their runtime's ``max_pending_backward * mem_f`` is the limit ``max_pending_backward``
activations), or their default ``3 m * activation[s]`` (no cap) when unset.  Unlike their
runtime, which replaces the profiled costs by their median, the per-stage costs are used as
given (``create_schedule`` takes per-stage costs).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from cpsched.actions import Action, DeviceOrders, Kind, Step
from cpsched.instance import Instance
from cpsched.schedules.registry import register

F, B, W = 0, 1, 2  # kinds as the authors number them (their B is cpsched's I)


class CannotFit(ValueError):
    """The authors' greedy fails: memory cap exceeded with no ``W`` left, or a dependency
    broken (their final assertions)."""


@dataclass(frozen=True)
class AutoProblem:
    """Inputs of the automatic scheduler (the authors' ``GraphConfig``), per stage."""

    p: int
    m: int
    cost: tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]
    comm: float
    mem: tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]
    cap: tuple[float, ...] | None


@dataclass
class AutoRun:
    """One variant's result: completion times ``end[kind][stage][microbatch]`` and the
    longest stage span."""

    end: list[list[list[float]]]
    span: float


class _Greedy:
    """State of one variant of the greedy (the authors' ``manual_order``)."""

    def __init__(self, pb: AutoProblem, allow_bubble: bool, prioritize_b: bool,
                 no_bubble_greedy: bool) -> None:
        self.pb = pb
        self.allow_bubble, self.prioritize_b = allow_bubble, prioritize_b
        self.no_bubble_greedy = no_bubble_greedy
        p, m = pb.p, pb.m
        self.n = [[0] * p for _ in range(3)]  # actions placed per kind and stage
        self.t = [[[0.0] * m for _ in range(p)] for _ in range(3)]  # completion times
        self.e = [0.0] * p  # end of each stage's last action
        self.held = [0.0] * p
        self.bubble = [0.0] * p
        self.cap = list(pb.cap) if pb.cap else [pb.mem[F][j] * m * 3 for j in range(p)]

    def largest_bubble(self) -> float:
        most = 0.0
        for x in self.bubble:
            most = max(most, x)
        return most

    def put(self, j: int, kind: int) -> None:
        """Place stage ``j``'s next ``kind`` as early as it can run."""
        pb = self.pb
        i = self.n[kind][j]
        cost = pb.cost[kind][j]
        end = no_bubble = self.e[j] + cost
        if j > 0 and kind == F:
            end = max(end, self.t[F][j - 1][i] + pb.comm + cost)
        if j < pb.p - 1 and kind == B:
            end = max(end, self.t[B][j + 1][i] + pb.comm + cost)
        if self.n[F][j] > 0:
            self.bubble[j] += end - no_bubble
        self.e[j] = end
        self.t[kind][j][i] = end
        self.held[j] += pb.mem[kind][j]
        self.n[kind][j] += 1

    def weights_before(self, j: int, kind: int, dep: float | None) -> None:
        """``W`` before stage ``j``'s next ``kind``: for memory, to fill the wait for ``dep``
        (its predecessor's completion), and one more by the bubble rule."""
        pb, n = self.pb, self.n
        while self.held[j] + pb.mem[kind][j] > self.cap[j]:
            if n[W][j] >= n[B][j]:
                raise CannotFit(f"stage {j}: memory cap {self.cap[j]:g} exceeded")
            self.put(j, W)
        if dep is None:
            return
        while n[W][j] < n[B][j] and self.e[j] + pb.cost[W][j] <= dep + pb.comm:
            self.put(j, W)
        if n[W][j] < n[B][j] and self.e[j] < dep + pb.comm:
            if dep + pb.comm - self.e[j] <= self.largest_bubble() - self.bubble[j]:
                if self.no_bubble_greedy:
                    self.put(j, W)
            else:
                self.put(j, W)

    def first_microbatch(self) -> None:
        """Microbatch 0 and the extra warm-up forwards (module docstring, first bullet)."""
        pb, n = self.pb, self.n
        p, m, comm = pb.p, pb.m, pb.comm
        for j in range(p):
            self.put(j, F)
        extra = [0] * p
        last_t = 0.0
        for j in range(p - 1, -1, -1):
            if j == p - 1:
                last_t = self.t[F][j][0] + pb.cost[B][j]
                continue
            mem, cost = self.held[j], self.e[j]
            while n[F][j] + extra[j] < m and mem + pb.mem[F][j] <= self.cap[j]:
                if self.allow_bubble:
                    if cost + pb.cost[F][j] > last_t + comm:
                        break
                elif cost >= last_t + comm:
                    break
                mem += pb.mem[F][j]
                cost += pb.cost[F][j]
                extra[j] += 1
            last_t = max(cost, last_t + comm) + pb.cost[B][j]
        for j in range(1, p):
            while extra[j] > 0 and extra[j] >= extra[j - 1] and n[F][j] + extra[j] < m:
                extra[j] -= 1
        for j in range(p):
            for _ in range(extra[j]):
                self.put(j, F)
        for j in range(p - 1, -1, -1):
            self.put(j, B)

    def wants_forward(self, j: int) -> bool:
        """Whether stage ``j`` takes a forward this microbatch (before the later-stage rule)."""
        pb, n = self.pb, self.n
        if n[F][j] >= pb.m:
            return False
        if not (j + 1 < pb.p and n[F][j] >= n[F][j + 1] + 2 and self.prioritize_b):
            return True
        ahead = self.e[j + 1] + pb.cost[F][j + 1] + pb.cost[B][j + 1] + pb.comm
        if self.e[j] >= ahead:
            return False
        w_cost, w_cnt = 0.0, 0
        mem = self.held[j] + pb.mem[F][j]
        while mem > self.cap[j] and n[W][j] + w_cnt < n[B][j]:
            w_cost += pb.cost[W][j]
            mem += pb.mem[W][j]
            w_cnt += 1
        if self.e[j] + pb.cost[F][j] + w_cost <= ahead:
            return True
        return not ahead - self.e[j] <= self.largest_bubble() - self.bubble[j]

    def next_microbatch(self, i: int) -> None:
        """Microbatch ``i >= 1`` (module docstring, second bullet)."""
        pb, n = self.pb, self.n
        p = pb.p
        go = [self.wants_forward(j) for j in range(p)]
        for j in range(p - 2, -1, -1):
            go[j] = go[j] and go[j + 1]
        for j in range(p):
            if go[j]:
                self.weights_before(j, F, self.t[F][j - 1][n[F][j]] if j > 0 else None)
                self.put(j, F)
        for j in range(p - 1, -1, -1):
            if n[B][j] != i:
                raise CannotFit(f"stage {j}: input gradient {n[B][j]} out of turn")
            self.weights_before(j, B, self.t[B][j + 1][i] if j + 1 < p else None)
            if j == 0 and n[F][j] == pb.m:
                while n[W][j] < n[B][j]:
                    self.put(j, W)
            self.put(j, B)

    def run(self) -> AutoRun:
        """The whole variant, checked as the authors check it."""
        pb = self.pb
        self.first_microbatch()
        for i in range(1, pb.m):
            self.next_microbatch(i)
        for j in range(pb.p):
            while self.n[W][j] < pb.m:
                self.put(j, W)
        self.verify()
        span = 0.0
        for j in range(pb.p):
            span = max(span, self.t[W][j][pb.m - 1] - self.t[F][j][0] + pb.cost[F][j])
        return AutoRun(self.t, span)

    def verify(self) -> None:
        """The authors' final dependency assertions."""
        pb, t = self.pb, self.t
        for j in range(pb.p):
            for i in range(pb.m):
                ok = t[B][j][i] >= t[F][j][i] + pb.cost[B][j] and \
                    t[W][j][i] >= t[B][j][i] + pb.cost[W][j]
                if j > 0:
                    ok = ok and t[F][j][i] >= t[F][j - 1][i] + pb.comm + pb.cost[F][j]
                if j < pb.p - 1:
                    ok = ok and t[B][j][i] >= t[B][j + 1][i] + pb.comm + pb.cost[B][j]
                if not ok:
                    raise CannotFit(f"stage {j}, microbatch {i}: a dependency is broken")


@lru_cache(maxsize=64)
def zb_auto_search(pb: AutoProblem) -> AutoRun:
    """The best of the eight variants (``allow_bubble``, ``prioritize_b``,
    ``no_bubble_greedy`` each True then False; first best kept).

    Raises:
        CannotFit: where the authors' code fails.
    """
    best: AutoRun | None = None
    for allow_bubble in (True, False):
        for prioritize_b in (True, False):
            for no_bubble_greedy in (True, False):
                run = _Greedy(pb, allow_bubble, prioritize_b, no_bubble_greedy).run()
                if best is None or run.span < best.span:
                    best = run
    assert best is not None
    return best


def auto_problem(inst: Instance) -> AutoProblem:
    """The scheduler's inputs for ``inst`` (module docstring, last paragraph)."""

    def ticks(xs: tuple[float, ...]) -> tuple[float, ...]:
        return tuple(float(inst.ticks(x)) for x in xs)

    act = inst.activation
    rel = tuple(-(inst.released_by_input * a) for a in act)
    rest = tuple(-(a + r) for a, r in zip(act, rel, strict=True))
    cap = None if inst.memory_limit is None else (inst.memory_limit,) * inst.p
    return AutoProblem(inst.p, inst.m, (ticks(inst.forward), ticks(inst.backward_input),
                                        ticks(inst.backward_weight)),
                       float(inst.ticks(inst.p2p_latency)), (act, rel, rest), cap)


def _check_zb_auto(inst: Instance) -> str | None:
    if inst.placement != "loop":
        return (f'pipeline.placement = "{inst.placement}": zb-auto needs "loop" '
                "(stage s on device s)")
    if inst.v != 1:
        return f"pipeline.stages_per_device = {inst.v}: zb-auto needs 1"
    if not inst.split_backward:
        return ("pipeline.split_backward = false: zb-auto needs true (it places the "
                "input-gradient I and weight-gradient W backwards separately)")
    try:
        zb_auto_search(auto_problem(inst))
    except CannotFit as exc:
        if inst.memory_limit is not None:
            return (f"memory.limit = {inst.memory_limit:g}: zb-auto (ZB's automatic scheduler) "
                    f"fails under it ({exc}); raise it or leave it unset")
        return f"pipeline = p={inst.p}, m={inst.m}: zb-auto (ZB's automatic scheduler) fails " \
            f"here ({exc})"
    return None


@register("zb-auto",
          summary="ZB's automatic scheduler: greedy over per-stage F/I/W, latency, memory cap",
          preconditions='placement "loop", stages_per_device = 1; split_backward = true; '
                        "memory.limit, if set, one the greedy can keep",
          source="Qi et al. 2023, Zero Bubble Pipeline Parallelism (arXiv:2401.10241) §3.2; "
                 "their repository's create_schedule (heuristic initial_solution); "
                 "docs/references.md#zero-bubble",
          check=_check_zb_auto)
def zb_auto(inst: Instance) -> DeviceOrders:
    """ZB's automatic scheduler (``create_schedule``), order for order.

    Source: docs/references.md#zero-bubble.  Each device's order is its actions by the
    greedy's completion times (ties: F, I, W, then microbatch).

    Raises:
        CannotFit: where the authors' code fails (the check reports it first).
    """
    end = zb_auto_search(auto_problem(inst)).end
    kinds = (Kind.F, Kind.I, Kind.W)
    orders: DeviceOrders = []
    for j in range(inst.p):
        keyed = sorted((end[k][j][i], k, i) for k in range(3) for i in range(inst.m))
        row: list[Step] = [Action(kinds[k], j, i) for _, k, i in keyed]
        orders.append(row)
    return orders
