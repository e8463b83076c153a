"""The counting bound: one device's relaxation as a time-indexed LP of counts
(docs/modelling.md §55).

Keep one device as the one-device relaxation does (docs/modelling.md §21: its actions, one
at a time, its memory limit; the other devices shrink to lags along the chains), and use
that every microbatch of a direction is the same and, by FIFO (§1), runs each of the
device's action types — ``(kind, stage, direction)`` — in microbatch order.  A schedule of
the device is then described by counts: ``N_k(t)``, how many actions of type ``k`` started
by slot ``t``.  On a grid of ``g`` ticks (slot ``t`` = ``[t·g, (t+1)·g)``) every constraint
is linear in the counts:

* precedence ``a → b`` of one microbatch with start-to-start lag ``L``:
  ``N_b(t) <= N_a(t − ⌊L/g⌋)``;
* one action at a time: ``Σ_k N_k(t) − N_k(t − ⌊d_k/g⌋) <= 1`` (actions in progress);
* memory: ``Σ amount · (N_F(t) − N_release(t − ⌊d_release/g⌋)) <= limit`` (buffers live);
* heads and tails: the ``j``-th action of a type starts no earlier than its head and early
  enough for its tail; with a makespan of ``T`` slots, ``N_k`` is bounded above by how many
  heads have passed and below by how many deadlines have.

**Soundness.** Map a schedule of makespan ``M`` to slots ``⌊s/g⌋``.  Since
``⌊x + y⌋ >= ⌊x⌋ + ⌊y⌋``, precedences, one-at-a-time and heads hold with the floored lags
and durations, the tails with ``T = ⌊M/g⌋``, and every buffer live in slot ``t`` on the
grid is live at ``(t + 1)·g − ε`` in the schedule (it starts before ``(t + 1)·g`` and ends
after it), so the grid's memory never exceeds the schedule's.  So the integer program is
feasible at ``T = ⌊M/g⌋``, and so is its LP relaxation; if the LP is infeasible at every
``T < K``, then ``⌊M/g⌋ >= K`` and ``M >= K·g``.  Any ``g`` gives a bound; a ``g`` that
divides the durations and lags loses nothing to the floors.

The LP sees what the interval model's relaxation does not: how the memory limit paces a
device that must keep its turns of many microbatches in flight (a seed-50 p16 loop v4
instance at V-Min's memory: 689 → 704, the interval relaxation nowhere near; §55).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import networkx as nx
from ortools.linear_solver import pywraplp

from cpsched.actions import Action
from cpsched.core import HeadsTails
from cpsched.graph import memory_buffers, nodes_by_device
from cpsched.instance import Instance
from cpsched.schedules.transforms import direction
from cpsched.solver.relaxation import kept_actions

#: Most LP variables (types × slots) of one device; the grid coarsens until it fits.
MAX_VARIABLES = 10_000
#: Least share of the device's work a coarse grid must keep (floored durations over the
#: durations), else the LP is not solved: it would lose more than it can gain (§55).
MIN_KEPT = 0.9
#: Most variables of the integer program that may follow the LP (docs/modelling.md §56: the
#: limit-24 row's device 0, 4 types × 464 slots, is decided in 17-500 s by HiGHS).
MAX_INTEGER_VARIABLES = 4_000
#: An integer program took 50-100 times one of its LPs (§56): with a time limit it runs only
#: when this many LPs' time is left
INTEGER_COST_FACTOR = 100

#: With the integer programs, the steps above the LP's bound stop growing once an infeasible
#: verdict takes this many times the one before it (docs/modelling.md §59: the limit-24 row's
#: device 0 refutes 2270, 2280 and 2285 in 18, 34 and about 100 s, and finds 2300 feasible
#: in 125 s, which proves nothing)
CREEP_SLOWER = 1.5

#: HiGHS options of the integer program, one ``name=value`` a line: no output of its own
HIGHS_OPTIONS = "output_flag=false"

TypeKey = tuple[str, int, int]  # (kind, stage, direction)
Told = Callable[[int], None] | None  # told each makespan (slots) a verdict refutes


@dataclass(frozen=True)
class CountBound:
    """Outcome of :func:`count_bound`: the ``bound`` (ticks, proven), the ``device``, the
    grid (``grid`` ticks a slot, ``slots`` of them at the upper end), the LPs solved, the
    ``seconds``, whether the search ended (``complete``) rather than ran out of time, and
    the integer programs solved after the LP (``programs``; docs/modelling.md §56) with the
    LP's own bound (``lp_bound``, ticks) and one LP's mean time (``lp_seconds``)."""

    bound: int
    device: int | None
    grid: int
    slots: int
    lps: int
    seconds: float
    complete: bool
    programs: int = 0
    lp_bound: int = 0
    lp_seconds: float = 0.0


def applies(inst: Instance) -> bool:
    """A memory limit and no overlap cost (with one, a device's F&B pair runs two actions
    at once; the relaxation with pairs covers that, docs/modelling.md §29)."""
    return inst.memory_limit is not None and inst.overlap_forward_backward is None


@dataclass
class _Type:
    """One action type of the kept device: its duration (ticks) and, in FIFO order, each
    microbatch's head and tail (ticks)."""

    dur: int
    heads: list[int]
    tails: list[int]


def _key(inst: Instance, a: Action) -> TypeKey:
    """The type of action ``a``: its kind, stage and direction."""
    return (a.kind.value, a.stage, direction(inst, a.microbatch))


def _types(inst: Instance, nodes: list[Action], dur: dict[Action, int],
           ht: HeadsTails) -> dict[TypeKey, _Type]:
    """The device's action types, each with its microbatches in FIFO (index) order."""
    head, tail = ht
    by: dict[TypeKey, list[Action]] = {}
    for a in nodes:
        by.setdefault(_key(inst, a), []).append(a)
    out = {}
    for k, acts in by.items():
        acts.sort(key=lambda a: a.microbatch)
        out[k] = _Type(min(dur[a] for a in acts), [head[a] for a in acts],
                       [tail[a] for a in acts])
    return out


def _lags(inst: Instance, lags: list[tuple[Action, Action, int]], dur: dict[Action, int]
          ) -> dict[tuple[TypeKey, TypeKey], int]:
    """Least start-to-start lag (ticks) per pair of types over the microbatches, then
    without the pairs another type already implies (``A → B → C`` at least as long)."""
    out: dict[tuple[TypeKey, TypeKey], int] = {}
    for a, b, lag in lags:
        ka, kb = _key(inst, a), _key(inst, b)
        if ka != kb:
            v = dur[a] + lag
            out[(ka, kb)] = min(out.get((ka, kb), v), v)
    keys = {k for pair in out for k in pair}
    return {(a, c): v for (a, c), v in out.items()
            if not any((a, b) in out and (b, c) in out and out[(a, b)] + out[(b, c)] >= v
                       for b in keys - {a, c})}


def choose_grid(durations: list[int], upper: int, n_types: int,
                most: int = MAX_VARIABLES) -> int:
    """Ticks per slot: the greatest common divisor of the ``durations`` (ticks) when
    ``n_types`` × slots up to ``upper`` fits in ``most`` variables, else the coarser grid
    (up to twice the least that fits) that keeps the largest share of the durations."""
    g = math.gcd(*durations) if durations else 1
    g = max(g, 1)
    least = max(1, math.ceil(upper * n_types / most))
    if g >= least:
        return g
    positive = [d for d in durations if d > 0] or [1]

    def kept(c: int) -> float:
        return sum((d // c) * c / d for d in positive)

    return max(range(least, 2 * least + 1), key=lambda c: (kept(c), -c))


class _CountLP:
    """The LP of one device on a grid of ``g`` ticks with ``slots`` slots; :meth:`feasible`
    sets the makespan ``T`` (slots) through the variables' bounds and re-solves.  With
    ``integer`` the counts are integers and HiGHS solves the integer program (§56)."""

    def __init__(self, types: dict[TypeKey, _Type], lags: dict[tuple[TypeKey, TypeKey], int],
                 buffers: dict[tuple[TypeKey, TypeKey], int], pool: int, g: int,
                 slots: int, integer: bool = False) -> None:
        self.types, self.g, self.slots = types, g, slots
        self.args = (types, lags, buffers, pool, g, slots)
        self.abnormal = False  # the last solve ended without a verdict, not by the time limit
        name = "HIGHS" if integer else "GLOP"
        lp = pywraplp.Solver.CreateSolver(name)
        if lp is None:
            raise LookupError(f"this OR-Tools build has no {name} solver")
        if integer:
            # HiGHS writes its banner to the process's stdout (a CLI's output, a JSON
            # stream) unless told not to; OR-Tools 9.15 returns False here even when the
            # option is applied (checked by tests/test_count_bound.py)
            lp.SetSolverSpecificParametersAsString(HIGHS_OPTIONS)
        self.lp = lp
        var = lp.IntVar if integer else lp.NumVar
        self.n = {k: [var(0.0, float(len(ty.heads)), "") for _ in range(slots)]
                  for k, ty in types.items()}
        self._heads()
        inf = lp.infinity()
        for col in self.n.values():
            for t in range(1, slots):
                c = lp.Constraint(0.0, inf)
                c.SetCoefficient(col[t], 1.0)
                c.SetCoefficient(col[t - 1], -1.0)
        for (ka, kb), lag in lags.items():
            shift = lag // g
            for t in range(slots):
                if t < shift:
                    self.n[kb][t].SetUb(0.0)
                    continue
                c = lp.Constraint(-inf, 0.0)
                c.SetCoefficient(self.n[kb][t], 1.0)
                c.SetCoefficient(self.n[ka][t - shift], -1.0)
        # one action at a time: the actions in progress; memory: the buffers live
        self._rows([(k, k, ty.dur // g, 1) for k, ty in types.items()], 1.0)
        self._rows([(f, rel, types[rel].dur // g, amount)
                    for (f, rel), amount in buffers.items()], float(pool) + 1e-6)

    def _heads(self) -> None:
        """Each count at most the number of its type's heads passed (FIFO: a prefix)."""
        for k, ty in self.types.items():
            col, j, prefix = self.n[k], 0, 0
            passed = [0] * self.slots
            for h in ty.heads:
                prefix = max(prefix, h // self.g)
                if prefix < self.slots:
                    passed[prefix] += 1
            for t in range(self.slots):
                j += passed[t]
                col[t].SetUb(float(j))

    def _rows(self, terms: list[tuple[TypeKey, TypeKey, int, int]], rhs: float) -> None:
        """Per slot ``Σ w · (N_plus(t) − N_minus(t − shift)) <= rhs`` over ``terms``
        ``(plus, minus, shift, w)``."""
        inf = self.lp.infinity()
        for t in range(self.slots):
            c = self.lp.Constraint(-inf, rhs)
            for plus, minus, shift, w in terms:
                var = self.n[plus][t]
                c.SetCoefficient(var, c.GetCoefficient(var) + w)
                if t - shift >= 0:
                    var = self.n[minus][t - shift]
                    c.SetCoefficient(var, c.GetCoefficient(var) - w)

    def feasible(self, makespan: int, seconds: float | None) -> bool | None:
        """Whether the LP has a solution with every action ended within ``makespan`` slots
        (None: not decided within ``seconds``, or ended abnormally: :attr:`abnormal`)."""
        for k, ty in self.types.items():
            col, need = self.n[k], [0] * (self.slots + 1)
            for j, tl in enumerate(ty.tails):
                due = makespan - (ty.dur + tl) // self.g
                if due < 0:
                    return False
                if due < self.slots:
                    need[due] = max(need[due], j + 1)
            level = 0
            for t in range(self.slots):
                level = max(level, need[t])
                col[t].SetLb(float(level))
        if seconds is not None:
            self.lp.SetTimeLimit(max(1, int(seconds * 1000)))
        code = self.lp.Solve()
        self.abnormal = code not in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE,
                                     pywraplp.Solver.INFEASIBLE, pywraplp.Solver.NOT_SOLVED)
        if code in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE):
            return True
        return False if code == pywraplp.Solver.INFEASIBLE else None

    def variables(self) -> int:
        """Counts in the program: types × slots."""
        return len(self.types) * self.slots

    def integer_twin(self) -> _CountLP:
        """The same program with integer counts (HiGHS; docs/modelling.md §56).

        Raises:
            LookupError: this OR-Tools build has no HiGHS."""
        return _CountLP(*self.args, integer=True)


def device_lp(inst: Instance, g: nx.DiGraph, ht: HeadsTails, d: int, upper: int,
              most: int = MAX_VARIABLES, min_kept: float = MIN_KEPT) -> _CountLP | None:
    """The counting LP of device ``d`` against ``upper`` (a known makespan, ticks), on the
    grid of :func:`choose_grid` for at most ``most`` variables; None when the device holds no
    memory buffer or the grid keeps less than ``min_kept`` of its work."""
    dur: dict[Action, int] = nx.get_node_attributes(g, "duration")
    nodes = nodes_by_device(g)[d]
    types = _types(inst, nodes, dur, ht)
    # a grid too coarse for the durations alone: known before the buffers and lags
    if _kept(types, choose_grid([ty.dur for ty in types.values()], upper, len(types),
                                most)) < min_kept:
        return None
    pool, bufs = memory_buffers(inst)
    kept = set(nodes)
    buffers: dict[tuple[TypeKey, TypeKey], int] = {}
    for f, rel, amount in bufs:
        if f in kept and rel in kept:
            pair = (_key(inst, f), _key(inst, rel))
            buffers[pair] = min(buffers.get(pair, amount), amount)
    if pool is None or not buffers:
        return None
    # live buffers are whole: divide by the amounts' gcd and round the limit down
    unit = math.gcd(*buffers.values())
    buffers = {pair: amount // unit for pair, amount in buffers.items()}
    lags = _lags(inst, kept_actions(inst, g, d).lags, dur)
    grid = choose_grid([ty.dur for ty in types.values()] + list(lags.values()), upper,
                       len(types), most)
    if _kept(types, grid) < min_kept:
        return None
    return _CountLP(types, lags, buffers, pool // unit, grid, upper // grid + 1)


def _kept(types: dict[TypeKey, _Type], grid: int) -> float:
    """Share of the device's work (ticks) that durations floored to ``grid`` keep."""
    work = sum(ty.dur * len(ty.heads) for ty in types.values())
    return sum(ty.dur // grid * grid * len(ty.heads) for ty in types.values()) / max(work, 1)


def _least_slots(lp: _CountLP, lo: int, hi: int, left: Callable[[], float | None],
                 stopped: Callable[[], bool], on_refuted: Told = None, *, creep: bool = False,
                 clock: Callable[[], float] = time.perf_counter) -> tuple[int, int, bool]:
    """The least makespan (slots) in ``[lo, hi]`` at which ``lp`` is feasible, ``hi`` known
    feasible: first ``lo``, then ever larger steps above it (a small gain costs few LPs),
    then bisection.  Returns ``(slots, LPs solved, complete)``; when time runs out, the
    least makespan not yet refuted (every LP found infeasible proves its makespan short,
    and so every shorter one).  A program that ends without a verdict (GLOP's numerics at
    a makespan near the bound: *abnormal*) proves nothing; the search steps past it and the
    result is then not complete (§56).  ``on_refuted`` is told each new least makespan not
    refuted (slots) as an infeasible verdict raises it.

    With ``creep`` (the integer programs, docs/modelling.md §59) the steps stop growing once
    an infeasible verdict takes more than :data:`CREEP_SLOWER` times the one before it (by
    ``clock``, seconds): near its threshold a program gets slow on both sides, and a
    feasible verdict above the threshold proves nothing, so from there it goes one slot at
    a time."""
    step, lps, bisect, low, complete, creeping = 1, 0, False, lo, True, False
    last: float | None = None  # seconds of the last infeasible verdict
    while low < hi:
        seconds = left()
        if stopped() or (seconds is not None and seconds <= 0):
            return lo, lps, False
        probe = (low + hi) // 2 if bisect else min(low + step - 1, hi - 1)
        t0 = clock()
        ok = lp.feasible(probe, seconds)
        took = clock() - t0
        lps += 1
        if ok is None:
            if not lp.abnormal:
                return lo, lps, False  # out of time
            low, complete = probe + 1, False
            step = 1 if creeping else 2 * step
        elif ok:
            hi, bisect = probe, True
        else:
            lo = low = probe + 1
            creeping = creeping or (creep and last is not None and took > CREEP_SLOWER * last)
            step = 1 if creeping else 2 * step
            last = took
            if on_refuted is not None:
                on_refuted(lo)
    return lo, lps, complete


def count_bound(inst: Instance, g: nx.DiGraph, ht: HeadsTails, lower: int, upper: int,
                devices: list[int], *, time_limit: float | None = None,
                stopped: Callable[[], bool] = lambda: False,
                most: int = MAX_VARIABLES, integer: bool = False) -> CountBound:
    """The counting bound (module docstring) over ``devices``: per device the least
    makespan (slots) at which its LP is feasible (:func:`_least_slots`), between ``lower``
    and ``upper`` (ticks: a proven bound and a known makespan), within ``time_limit``
    seconds, each LP of at most ``most`` variables (:func:`choose_grid`).  With
    ``integer``, then the least makespan at which the same program with integer counts is
    feasible, from the LP's (:func:`_integer_slots`, docs/modelling.md §56).

    Returns:
        :class:`CountBound` with ``bound`` in ``[lower, upper]`` (ticks): the best device's
        ``grid × slots`` when above ``lower``.
    """
    t0 = time.perf_counter()

    def left() -> float | None:
        return None if time_limit is None else time_limit - (time.perf_counter() - t0)

    best, best_dev, grid, slots, lps, complete = lower, None, 0, 0, 0, True
    programs, lp_best, lp_seconds = 0, lower, 0.0
    for d in devices:
        seconds = left()
        if stopped() or (seconds is not None and seconds <= 0):
            complete = False
            break
        lp = device_lp(inst, g, ht, d, upper, most)
        if lp is None:
            continue
        r = _device_search(lp, lower // lp.g, upper // lp.g, left, stopped, lp_seconds,
                           integer=integer)
        lps, programs, complete = lps + r.lps, programs + r.programs, complete and r.complete
        lp_best = max(lp_best, r.lp_slots * lp.g)
        lp_seconds = max(lp_seconds, r.lp_seconds)
        if r.slots * lp.g > best:
            best, best_dev, grid, slots = r.slots * lp.g, d, lp.g, lp.slots
    return CountBound(min(best, upper), best_dev, grid, slots, lps,
                      time.perf_counter() - t0, complete, programs, min(lp_best, upper),
                      lp_seconds)


def _integer_slots(lp: _CountLP, least: int, hi: int, left: Callable[[], float | None],
                   stopped: Callable[[], bool], lp_seconds: float,
                   on_refuted: Told = None) -> tuple[int, int, bool]:
    """The least makespan (slots) in ``[least, hi]`` at which ``lp``'s integer twin is
    feasible (``least``: the LP's), as :func:`_least_slots`; ``(least, 0, True)`` when it
    has over :data:`MAX_INTEGER_VARIABLES` counts, HiGHS is missing, or under
    :data:`INTEGER_COST_FACTOR` × ``lp_seconds`` (one LP's time) is left."""
    seconds = left()
    if lp.variables() > MAX_INTEGER_VARIABLES or least >= hi or (
            seconds is not None and seconds < INTEGER_COST_FACTOR * lp_seconds):
        return least, 0, True
    try:
        ip = lp.integer_twin()
    except LookupError:  # no HiGHS in this OR-Tools build
        return least, 0, True
    return _least_slots(ip, least, hi, left, stopped, on_refuted, creep=True)


class _Searched(NamedTuple):
    """Outcome of :func:`_device_search`: where the LP search and then the programs ended
    (slots), the LPs and programs solved, whether it ended, one LP's mean seconds."""

    lp_slots: int
    slots: int
    lps: int
    programs: int
    complete: bool
    lp_seconds: float


def _device_search(lp: _CountLP, lo: int, hi: int, left: Callable[[], float | None],
                   stopped: Callable[[], bool], lp_seconds: float = 0.0, *,
                   lp_done: bool = False, integer: bool = True, on_lp: Told = None,
                   on_program: Told = None) -> _Searched:
    """One device's counting search in ``[lo, hi]`` (slots, ``hi`` known feasible): the
    LP's least feasible makespan (:func:`_least_slots`; skipped with ``lp_done``, ``lo``
    then being where an earlier LP search ended), then, with ``integer`` and when the LP
    search ended, the integer programs' (:func:`_integer_slots`, guarded by one LP's time).
    ``on_lp`` / ``on_program`` are told each makespan (slots) an LP / a program refutes."""
    lp_slots, lps, done = lo, 0, True
    if not lp_done:
        t_lp = time.perf_counter()
        lp_slots, lps, done = _least_slots(lp, lo, hi, left, stopped, on_lp)
        lp_seconds = max(lp_seconds, (time.perf_counter() - t_lp) / max(lps, 1))
    slots, programs = lp_slots, 0
    if integer and done:
        slots, programs, done = _integer_slots(lp, lp_slots, hi, left, stopped, lp_seconds,
                                               on_program)
    return _Searched(lp_slots, slots, lps, programs, done, lp_seconds)


class IntegerBound(NamedTuple):
    """Outcome of :func:`integer_bound`: the ``bound`` (ticks, proven), the integer
    programs decided, whether the search ended, its ``seconds``, the ``grid`` (ticks a
    slot; 0 when no program was built) and the LPs solved first (``lps``)."""

    bound: int
    programs: int
    complete: bool
    seconds: float
    grid: int
    lps: int = 0


def integer_bound(inst: Instance, g: nx.DiGraph, ht: HeadsTails, device: int, least: int,
                  upper: int, time_limit: float, lp_seconds: float,
                  on_refuted: Callable[[int, int, bool], None] | None = None, *,
                  lp_done: bool = True) -> IntegerBound:
    """The integer stage of :func:`count_bound` alone (:func:`_device_search`), for
    ``device`` whose LP search ended at ``least`` (ticks; ``upper`` as there), within
    ``time_limit`` seconds, ``lp_seconds`` one LP's time (the program's cost guard).
    Without ``lp_done`` (the LP search was cut off by its share of the time, ``least`` the
    least makespan it had not refuted) the LP search goes on from ``least`` first
    (docs/modelling.md §61).  Run in a forked child beside the window search
    (:mod:`cpsched.solver.count_beside`, §57); the same grid as the LP's, since
    :func:`device_lp` is built from the same arguments.  ``on_refuted(bound, grid,
    integer)`` is told each bound (ticks) as an LP (``integer`` False) or a program raises
    it, so a caller that cannot wait for the end keeps what is proven.

    Returns:
        :class:`IntegerBound` with ``bound`` in ``[least, upper]``.
    """
    t0 = time.perf_counter()
    lp = device_lp(inst, g, ht, device, upper)
    if lp is None:
        return IntegerBound(least, 0, True, time.perf_counter() - t0, 0)
    grid = lp.g

    def ticks(slots: int) -> int:
        return max(least, min(slots * grid, upper))

    def told(integer: bool) -> Callable[[int], None]:
        return lambda slots: None if on_refuted is None else on_refuted(ticks(slots), grid,
                                                                        integer)

    def left() -> float:
        return time_limit - (time.perf_counter() - t0)

    r = _device_search(lp, least // grid, upper // grid, left, lambda: False, lp_seconds,
                       lp_done=lp_done, on_lp=told(False), on_program=told(True))
    return IntegerBound(ticks(r.slots), r.programs, r.complete, time.perf_counter() - t0,
                        grid, r.lps)
