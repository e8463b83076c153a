"""ZB-V greedy: the Zero Bubble authors' V-schedule search, as per-device orders.

Source: Qi, Wan, Huang, Lin, "Zero Bubble (Almost) Pipeline Parallelism" (ICLR 2024,
arXiv:2401.10241) §6 and the Zero Bubble repository's ZB-V scheduler (``try_v_schedule``, run
by their runtime for ``--zero-bubble-v-schedule``; docs/references.md#zero-bubble).
Re-implemented in cpsched's terms; the tests check the orders against orders recorded from the
authors' code (tests/data/zb/).

Placement ``v`` (device ``d`` holds stage ``d``, chunk 0, and ``2p - 1 - d``, chunk 1).  The
search simulates the devices with one F/I/W duration each, a latency, a memory delta per kind
and a memory cap, and places actions round by round:

* warm-up: one chunk-0 forward per device, then from the last device back to the first as
  many chunk-0 forwards (on that device and all before it) as fit in memory and in the wait
  for the chunk-1 forward coming back, then the chunk-1 forward; then forwards of alternate
  chunks until every device has as many as the one before;
* ``2m`` rounds, each: one input gradient per device (devices whose next one is on chunk 1
  — the way back — first, last device first), then at most one forward per device; before
  each, pending ``W`` fill the wait for the predecessor, and one more ``W`` goes first when
  the wait would exceed the largest bubble seen so far (always before a chunk-1 ``I``; before a
  chunk-0 ``I`` if ``fill_b``, before a forward if ``fill_f``); a ``W`` also goes first
  whenever memory would exceed the cap;
* the remaining ``W``.

A run is repeated with the previous run's per-device bubbles as "approved" bubbles while the
largest bubble shrinks; the best of the four ``fill_b``/``fill_f`` choices (first best kept)
is the schedule.  One quirk is kept: where a device has no predecessor, the authors' lookup
reads the end of the last device's last up-chunk ``W`` (or -1 before it runs).

Inputs from the instance (their runtime's V-schedule rule: average each device's two stages,
then take the median device, ``sorted(x)[p // 2]``): F, I, W durations in integer ticks
(:meth:`Instance.ticks`, so averages are exact halves), latency ``p2p_latency`` in ticks;
memory per forward ``f`` = that median of activations, per ``I`` ``-released_by_input * f``,
per ``W`` the rest; cap ``memory.limit`` per device, or their default ``2p * f`` when unset.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from functools import lru_cache

from cpsched.actions import Action, DeviceOrders, Kind, Step
from cpsched.instance import Instance
from cpsched.schedules.registry import register

F, B, W = 0, 1, 2  # kinds as the authors number them (their B is cpsched's I)
_NAMES = ("forward", "input gradient", "weight gradient")

#: One placed action: (kind, chunk as the search numbers it, microbatch).  For I and W the
#: search's chunk 0 is the up chunk (the backward starts there).
Placed = tuple[int, int, int]
Key = tuple[int, int, int, int]  # (kind, chunk, device, microbatch)


class GreedyFailure(ValueError):
    """The authors' search fails (an assertion of theirs): over the memory cap, no ``W`` left
    to free memory, or no progress."""


@dataclass(frozen=True)
class VProblem:
    """Inputs of the ZB-V search (the authors' ``PipelineGraph`` arguments)."""

    p: int
    m: int
    cost: tuple[float, float, float]
    comm: float
    mem: tuple[float, float, float]
    cap: float


@dataclass
class VRun:
    """Result of one run: per-device placed actions, per-device bubbles, largest bubble."""

    orders: list[list[Placed]]
    bubbles: list[float]
    max_bubble: float


class _Search:
    """State of one run of the search (``try_v_schedule`` without its repetition)."""

    def __init__(self, pb: VProblem, fill_f: bool, fill_b: bool,
                 approved: list[float] | None) -> None:
        self.pb, self.fill_f, self.fill_b = pb, fill_f, fill_b
        p = pb.p
        self.approved = approved if approved is not None else [-1.0] * p
        self.max_approved = max(self.approved)
        self.count = [[0] * 6 for _ in range(p)]  # per (kind, chunk): kind * 2 + chunk
        # end[kind * 2 + chunk][device][microbatch], -1 while not placed
        self.end = [[[-1.0] * pb.m for _ in range(p)] for _ in range(6)]
        self.cur = [0.0] * p
        self.mem = [0.0] * p
        self.bubble = [0.0] * p
        self.top = 0.0  # the largest bubble (bubbles only grow)
        self.pending: list[deque[int]] = [deque() for _ in range(p)]
        self.orders: list[list[Placed]] = [[] for _ in range(p)]

    def end_of(self, key: Key | None) -> float:
        """End time of ``key`` (-1 if not placed).  None, for a device without predecessor,
        reads what the authors' lookup at index -1 reads: the last device's last up-chunk
        ``W`` (the search's chunk 1)."""
        if key is None:
            return self.end[W * 2 + 1][self.pb.p - 1][self.pb.m - 1]
        kind, chunk, d, i = key
        return self.end[kind * 2 + chunk][d][i]

    def largest_bubble(self, d: int = -1) -> float:
        """Largest bubble so far (with device ``d``'s approved slack when ``d >= 0``)."""
        if d >= 0:
            return max(self.top, self.max_approved - self.approved[d])
        return self.top

    def put(self, kind: int, chunk: int, d: int) -> None:
        """Place the next ``kind`` of ``chunk`` on device ``d`` as early as it can run."""
        pb, end = self.pb, self.end
        cost = pb.cost[kind]
        slot = kind * 2 + chunk
        i = self.count[d][slot]
        t = no_bubble = self.cur[d] + cost
        if i >= pb.m:
            raise GreedyFailure(f"device {d} has no {_NAMES[kind]} left to place")
        if not self.mem[d] + pb.mem[kind] <= pb.cap:
            raise GreedyFailure(f"device {d} would hold more than {pb.cap:g}")
        if slot > 0 and end[B * 2 + chunk if kind == W else slot - 1][d][i] < 0:
            raise GreedyFailure(f"device {d} would run a {_NAMES[kind]} before its "
                                "predecessor on the same device")
        if kind < W and ((chunk == 1 and d < pb.p - 1) or (chunk == 0 and d > 0)):
            dep = end[slot][d + 1 if chunk else d - 1][i]
            if dep < 0:
                raise GreedyFailure(f"device {d} would run a {_NAMES[kind]} before its input "
                                    "arrives")
            t = max(t, dep + pb.comm + cost)
        if self.count[d][0] > 0:
            self.bubble[d] += t - no_bubble
            self.top = max(self.top, self.bubble[d])
        end[slot][d][i] = t
        self.cur[d] = t
        self.mem[d] += pb.mem[kind]
        self.orders[d].append((kind, chunk, i))
        if kind == B:
            self.pending[d].append(chunk)
        self.count[d][slot] += 1

    def put_w(self, d: int) -> None:
        """Place device ``d``'s oldest pending ``W``."""
        if not self.pending[d]:
            raise GreedyFailure(f"device {d} has no W left to free memory")
        self.put(W, self.pending[d].popleft(), d)

    def fill(self, d: int, dep: Key | None, extra: bool) -> None:
        """Pending ``W`` into the wait for ``dep``; one more first if the wait exceeds the
        bubble budget and ``extra``."""
        pb = self.pb
        while self.pending[d] and dep is not None and \
                self.end_of(dep) + pb.comm >= self.cur[d] + pb.cost[W]:
            self.put_w(d)
        if self.pending[d] and self.end_of(dep) + pb.comm - self.cur[d] > \
                self.largest_bubble(d) - self.bubble[d] and extra:
            self.put_w(d)

    def free_memory(self, d: int, kind: int) -> None:
        """``W`` first while the next ``kind`` would exceed the cap."""
        while self.mem[d] + self.pb.mem[kind] > self.pb.cap:
            self.put_w(d)

    def warm_up(self) -> None:
        """Forwards before the first input gradient (module docstring, first bullet)."""
        pb, count = self.pb, self.count
        p = pb.p
        for d in range(p):
            self.put(F, 0, d)
        for d in range(p - 1, -1, -1):
            if d < p - 1:
                back = self.end_of((F, 1, d + 1, 0)) + pb.comm
                while self.mem[d] + pb.mem[F] * (2 + d * 2) <= pb.cap and \
                        self.cur[d] + pb.cost[F] <= back and count[d][0] < pb.m:
                    for j in range(d + 1):
                        self.put(F, 0, j)
            self.put(F, 1, d)
        chunk = 0
        for d in range(1, p):
            idle = 0
            while count[d][0] + count[d][1] < count[d - 1][0] + count[d - 1][1] or \
                    count[d][1] <= count[d - 1][1] < pb.m:
                placed = False
                for j in range(p - 1, d - 1, -1):
                    if count[j][chunk] < pb.m:
                        self.put(F, chunk, j)
                        placed = True
                chunk = 1 - chunk
                idle = 0 if placed else idle + 1
                if idle >= 2:
                    raise GreedyFailure("warm-up makes no progress")

    def backward_round(self) -> None:
        """One input gradient per device (chunk-1 ones first, from the last device)."""
        pb, count = self.pb, self.count
        p = pb.p
        for d in range(p):
            self.free_memory(d, B)
        first, then = [], []
        for d in range(p):
            if count[d][3] >= count[d][2]:
                then.append(d)
            elif d == p - 1 or self.end_of((B, 1, d + 1, count[d][3])) >= 0 or \
                    count[d][2] >= pb.m:
                first.append(d)
            else:
                then.append(d)
        for d, chunk in [(d, 1) for d in reversed(first)] + [(d, 0) for d in then]:
            dep: Key | None = None
            if chunk == 1 and d < p - 1:
                dep = (B, 1, d + 1, count[d][3])
            if chunk == 0 and d > 0:
                dep = (B, 0, d - 1, count[d][2])
            self.fill(d, dep, chunk == 1 or self.fill_b)
            self.put(B, chunk, d)

    def forward_round(self) -> None:
        """At most one forward per device, where its input is ready."""
        pb, count = self.pb, self.count
        p = pb.p
        for d in range(p):
            if count[d][1] >= pb.m:
                continue
            chunk = None
            if count[d][1] >= count[d][0]:
                chunk = 0
            elif d == p - 1 or self.end_of((F, 1, d + 1, count[d][1])) >= 0:
                chunk = 1
            elif count[d][0] < pb.m and (d == 0 or self.end_of((F, 0, d - 1, count[d][0])) >= 0):
                chunk = 0
            if chunk is None:
                continue
            self.free_memory(d, F)
            dep: Key | None = None
            if chunk == 0 and d > 0:
                dep = (F, 0, d - 1, count[d][0])
            if chunk == 1 and d < p - 1:
                dep = (F, 1, d + 1, count[d][1])
            self.fill(d, dep, self.fill_f)
            self.put(F, chunk, d)

    def run(self) -> VRun:
        """The whole run."""
        self.warm_up()
        for _ in range(2 * self.pb.m):
            self.backward_round()
            self.forward_round()
        for d in range(self.pb.p):
            while self.pending[d]:
                self.put_w(d)
        return VRun(self.orders, self.bubble, self.largest_bubble())


def refine(pb: VProblem, fill_f: bool, fill_b: bool) -> VRun:
    """Runs repeated with the last run's bubbles approved while the largest bubble shrinks;
    going back up the chain, a later run replaces an earlier one only if strictly better."""
    chain = [_Search(pb, fill_f, fill_b, None).run()]
    while True:
        nxt = _Search(pb, fill_f, fill_b, chain[-1].bubbles).run()
        chain.append(nxt)
        if not nxt.max_bubble < chain[-2].max_bubble:
            break
    best = chain[-1]
    for run in reversed(chain[:-1]):
        if not best.max_bubble < run.max_bubble:
            best = run
    return best


@lru_cache(maxsize=64)
def zbv_greedy_search(pb: VProblem) -> VRun:
    """Best of ``fill_b``, ``fill_f`` in (True, False) (first best kept).

    Raises:
        GreedyFailure: where the authors' code fails.
    """
    best: VRun | None = None
    for fill_b in (True, False):
        for fill_f in (True, False):
            run = refine(pb, fill_f, fill_b)
            if best is None or run.max_bubble < best.max_bubble:
                best = run
    assert best is not None
    return best


# ------------------------------------------------------------- the schedule


def _median_device(inst: Instance, per_stage: tuple[float, ...]) -> float:
    """Their runtime's V rule: mean over a device's two stages, then ``sorted(..)[p // 2]``."""
    p = inst.p
    means = [(per_stage[d] + per_stage[2 * p - 1 - d]) / 2 for d in range(p)]
    return sorted(means)[p // 2]


def v_problem(inst: Instance) -> VProblem:
    """The search's inputs for ``inst`` (module docstring, last paragraph)."""

    def ticks(xs: tuple[float, ...]) -> tuple[float, ...]:
        return tuple(float(inst.ticks(x)) for x in xs)

    f = _median_device(inst, ticks(inst.forward))
    b = _median_device(inst, ticks(inst.backward_input))
    w = _median_device(inst, ticks(inst.backward_weight))
    mem_f = _median_device(inst, inst.activation)
    mem_b = -(inst.released_by_input * mem_f)
    cap = inst.memory_limit or mem_f * inst.p * 2
    return VProblem(inst.p, inst.m, (f, b, w), float(inst.ticks(inst.p2p_latency)),
                    (mem_f, mem_b, -(mem_f + mem_b)), cap)


def to_orders(p: int, placed: list[list[Placed]]) -> DeviceOrders:
    """The search's ``(kind, chunk, microbatch)`` per device as cpsched actions."""
    orders: DeviceOrders = []
    for d, ops in enumerate(placed):
        down, up = d, 2 * p - 1 - d
        row: list[Step] = []
        for kind, chunk, i in ops:
            if kind == F:
                row.append(Action(Kind.F, up if chunk else down, i))
            else:
                row.append(Action(Kind.I if kind == B else Kind.W, down if chunk else up, i))
        orders.append(row)
    return orders


def _check_zbv_greedy(inst: Instance) -> str | None:
    if inst.placement != "v":
        return (f'pipeline.placement = "{inst.placement}": zbv-greedy needs "v" '
                "(stages_per_device = 2, device d holds stages d and 2p - 1 - d)")
    if not inst.split_backward:
        return ("pipeline.split_backward = false: zbv-greedy needs true (it places the "
                "input-gradient I and weight-gradient W backwards separately)")
    pb = v_problem(inst)
    try:
        zbv_greedy_search(pb)
    except GreedyFailure as exc:
        if inst.memory_limit is not None:
            need = pb.mem[F] * inst.p * 2
            return (f"memory.limit = {inst.memory_limit:g}: zbv-greedy (the Zero Bubble "
                    f"authors' ZB-V search) cannot keep within it ({exc}); it runs with "
                    f"2 * devices * activation = {need:g}, its default when no limit is set")
        return f"pipeline = p={inst.p}, m={inst.m}: zbv-greedy (the Zero Bubble authors' " \
            f"ZB-V search) fails here ({exc})"
    return None


@register("zbv-greedy",
          summary="ZB-V greedy: the Zero Bubble authors' V-schedule search (best of four)",
          preconditions='placement "v" (stages_per_device = 2); split_backward = true; '
                        "memory.limit, if set, one the search can keep (about 2p activations)",
          source="Qi et al. 2023, Zero Bubble Pipeline Parallelism (arXiv:2401.10241) §6; "
                 "their repository's ZB-V greedy try_v_schedule; "
                 "docs/references.md#zero-bubble",
          check=_check_zbv_greedy)
def zbv_greedy(inst: Instance) -> DeviceOrders:
    """ZB-V greedy: the authors' ``try_v_schedule`` search, best of four, order for order.

    Source: docs/references.md#zero-bubble (Zero Bubble repository, ZB-V greedy).  Inputs as
    in the module docstring: median-device F/I/W ticks, latency, memory deltas and cap.

    Raises:
        GreedyFailure: where the authors' search fails (the check reports it first).
    """
    return to_orders(inst.p, zbv_greedy_search(v_problem(inst)).orders)
