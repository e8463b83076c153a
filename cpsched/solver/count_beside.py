"""The counting bound's integer program beside the window search (docs/modelling.md §57),
and the rest of its LP search when the counting step's share cut it off (§61).

The integer program (docs/modelling.md §56) raises the counting LP's bound where memory
paces a device (the limit-24 row: 2270 → 2285 in about 50 s), but one program takes 50-100
LPs' time, more than the counting step's share of a `solve -t 120`.  With a time limit and
more than one search worker it runs instead in a forked child (:class:`cpsched.forked.
ForkedCall`) from the end of the counting step until the search's end, on the second core
while the search goes on; its bound joins the others when the schedule is certified.  The
search then shares the cores with it: on the limit-24 row the window search reached the
same 2315 beside it (§57).

Where the counting step's share (12 % of the time left) ended the LP search before its
end — on uniform costs at a fine grid, e.g. an unseen p24 instance whose LPs take 1.8 s
each — the child first goes on with the LP search from the least makespan not refuted, then
the integer program if the LP search ends.

The child ends by its own time limit; it also writes each bound an LP or a program proves
into memory shared with the parent, so a child that has not answered when the schedule is
certified (or a Ctrl-C) is killed and what it proved is still used.
"""

from __future__ import annotations

import functools
import multiprocessing as mp
import time
from typing import Any

from cpsched.forked import ForkedCall, can_fork
from cpsched.instance import Instance
from cpsched.solver.count_bound import CountBound, IntegerBound, integer_bound
from cpsched.solver.search_run import seconds_left

#: Least seconds worth starting the child for (one integer program of the limit-24 row's
#: device takes 17 s alone, §56).
MIN_SECONDS = 10.0
#: Seconds the child ends before the search does (HiGHS may overrun its time limit a little).
MARGIN_SECONDS = 1.0
#: Most seconds the certification waits for a child that has not answered yet.
WAIT_SECONDS = 2.0
#: Key of the handle in ``Result.stats["count"]`` until :func:`collect` replaces it.
KEY = "beside"


def applies(deadline: float | None, workers: int) -> bool:
    """With a time limit, more than one search worker and a platform that forks."""
    return deadline is not None and workers > 1 and can_fork()


def _child(shared: Any, *args: Any, lp_done: bool = True,
           ) -> IntegerBound:  # pragma: no cover - in the child
    """:func:`~cpsched.solver.count_bound.integer_bound` writing each bound it proves, its
    grid and the programs and LPs that refuted a makespan so far into ``shared``
    (``[bound, grid, programs, lps]``)."""

    def refuted(bound: int, grid: int, integer: bool) -> None:
        shared[2 if integer else 3] += 1  # the bound last: a parent that sees it sees the rest
        shared[1] = grid
        shared[0] = bound

    return integer_bound(*args, on_refuted=refuted, lp_done=lp_done)


class Beside:
    """The child running :func:`~cpsched.solver.count_bound.integer_bound` for ``device``
    from ``least`` (ticks) with ``seconds``, started at construction (the other arguments
    as there); ``stop`` is the solve's stop (a Ctrl-C kills the child)."""

    def __init__(self, inst: Instance, g: Any, ordered: Any, device: int, least: int,
                 upper: int, seconds: float, lp_seconds: float, stop: Any, *,
                 lp_done: bool = True) -> None:
        self.inst, self.device, self.stop, self.t0 = inst, device, stop, time.perf_counter()
        self.shared = mp.get_context("fork").Array("q", [least, 0, 0, 0], lock=False)
        self.call = ForkedCall(functools.partial(_child, lp_done=lp_done), self.shared, inst,
                               g, ordered, device, least, upper, seconds, lp_seconds)

    def bound(self, deadline: float) -> IntegerBound:
        """The child's :class:`~cpsched.solver.count_bound.IntegerBound`, waiting for it at
        most :data:`WAIT_SECONDS` and not past ``deadline``; without an answer by then (or
        stopped, or failed) the child is killed and what it had proved is returned
        (``complete`` False)."""
        wait = min(WAIT_SECONDS, max(0.0, deadline - time.perf_counter()))
        if not self.stop.requested and self.call.ready(wait):
            try:
                return IntegerBound(*self.call.result())
            except Exception:  # noqa: BLE001, S110  (a failed child: what it wrote stands)
                pass
        self.call.cancel()
        bound, grid, programs, lps = self.shared
        return IntegerBound(bound, programs, False, time.perf_counter() - self.t0, grid, lps)


def start(inst: Instance, g: Any, ordered: Any, device: int, r: CountBound, upper: int,
          deadline: float, stop: Any) -> Beside | None:
    """The child for ``device`` after the LP search ``r`` against ``upper`` (ticks), with
    the time until the search's end (:func:`~cpsched.solver.search_run.seconds_left` less
    :data:`MARGIN_SECONDS`); it goes on with the LP search first when ``r`` did not end
    (§61).  None when that time is under :data:`MIN_SECONDS`, no LP was solved (none
    built: the grid too coarse, no buffer), or the LP already met ``upper``."""
    seconds = seconds_left(inst, deadline) - MARGIN_SECONDS
    if r.lps == 0 or r.lp_bound >= upper or seconds < MIN_SECONDS or stop.requested:
        return None
    return Beside(inst, g, ordered, device, r.lp_bound, upper, seconds, r.lp_seconds, stop,
                  lp_done=r.complete)


def collect(stats: dict[str, Any], bound: int, deadline: float | None) -> int:
    """``bound`` (ticks) raised by the child's bound when one ran (its handle in
    ``stats["count"]``), with ``stats["count"]`` updated: ``bound``, ``programs``, ``lps``
    (the child's added), the device and grid when the step had not raised the bound, and
    ``beside`` — the child's seconds, whether its search ended and its LPs (left None when
    no child started)."""
    cb = stats.get("count")
    handle = cb.get(KEY) if cb is not None else None
    if not isinstance(handle, Beside):  # none started (None), or collected already
        return bound
    got = handle.bound(time.perf_counter() + WAIT_SECONDS if deadline is None else deadline)
    cb[KEY] = {"seconds": round(got.seconds, 2), "complete": got.complete, "lps": got.lps}
    cb["programs"] = cb.get("programs", 0) + got.programs
    cb["lps"] = cb.get("lps", 0) + got.lps
    inst = handle.inst
    if got.bound > inst.ticks(cb["bound"]):
        cb["bound"] = inst.from_ticks(got.bound)
        if cb.get("device") is None:
            cb["device"], cb["grid"] = handle.device, inst.from_ticks(got.grid)
    return max(bound, got.bound)


__all__ = ["Beside", "applies", "collect", "start"]
