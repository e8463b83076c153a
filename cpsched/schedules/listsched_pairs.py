"""Overlapped F&B pairs formed by the list scheduler as it dispatches (docs/modelling.md §25):
the engine's ``pair`` hook (:func:`cpsched.engine.dispatch`) for the loop/V scheduler
(:mod:`cpsched.schedules.listsched`) and the bidirectional one
(:mod:`cpsched.schedules.listsched_bidi`).

Source: the overlapped forward-and-backward pair of DeepSeek-V3's DualPipe
(arXiv:2412.19437), docs/spec.md §1.4; the fused backward inside a pair as in the CP-SAT model
(docs/modelling.md §15).
"""

from __future__ import annotations

from cpsched.actions import Kind
from cpsched.instance import Instance
from cpsched.rules import stage_ticks
from cpsched.schedules.listsched_rules import Problem

#: The pairing modes of the portfolio's pair runs (:class:`Pairing`, docs/modelling.md §25).
#: ``"forward:0.1"``: a pair is formed when the device starts a forward and it saves at least
#: a tenth of a mean forward — pairs that save little delay the forward's chain (V p16 pair
#: instance: 431.4, against 584-1950 pairing at any saving).  ``"both:0.01"``: also when it
#: starts a backward, at any saving of a hundredth of a forward — where pairs save little but
#: nothing waits for the forward, they add up (DualPipe's profiled shape, middle devices save
#: 0.05 per pair: 176.712 -> 175.612).
PAIR_MODES = ("forward:0.1", "both:0.01")


def pair_modes(inst: Instance) -> tuple[str | None, ...]:
    """The pairing modes each portfolio configuration runs with: none, and with an overlap
    cost also each of :data:`PAIR_MODES`."""
    return (None,) if inst.overlap_forward_backward is None else (None, *PAIR_MODES)


class Pairing:
    """The pairing rule of one list-scheduling run: the engine's ``pair`` hook.

    When a device starts a forward ``F(s, i)`` and a backward (``B``, or ``I`` with split
    backward) of another microbatch is available on it — with mode ``"both"`` also when it
    starts such a backward and a forward is available — the two run as one overlapped pair
    of ``overlap_forward_backward[s]`` if that saves at least ``gain`` times the mean
    forward (at least one tick) over running them back to back.  The first such mate in the
    device's key order is taken.  With split backward the pair runs the fused backward: the
    ``W`` rides along and its memory is released at the pair's end, as in the CP-SAT model
    (docs/modelling.md §15); alone it would take ``I + W``.

    Args:
        pb: the run's problem (loop, V or bidirectional; tasks ``kind * S * m + s * m + i``).
        mode: ``"forward"``, ``"both"`` or ``"backward"``, optionally ``":gain"`` (e.g.
            ``"forward:0.1"``; default gain 0).

    Raises:
        ValueError: the instance has no overlap cost.
    """

    def __init__(self, pb: Problem, mode: str) -> None:
        ovl = stage_ticks(pb.inst).overlap
        if ovl is None:
            raise ValueError("overlapped pairs need costs.overlap_forward_backward")
        self.mode, _, gain = mode.partition(":")
        fmean = sum(pb.dur[Kind.F]) / len(pb.dur[Kind.F])
        self.min_gain = max(1, round(float(gain or 0) * fmean))
        self.nf = pb.S * pb.m  # tasks below nf are forwards, then B or I, then W
        self.m, self.split = pb.m, pb.inst.split_backward
        self.ovl = ovl
        self.dur, self.mb, self.dev = pb.table.duration, pb.mb_of, pb.dev_of

    def __call__(self, t: int, cands: list[int]) -> tuple[int, int, int] | None:
        """``(mate, pair ticks, rider)`` for task ``t`` among ``cands`` (the available tasks
        in key order), or None: ``t`` runs alone."""
        nf, mb, dev = self.nf, self.mb, self.dev
        if t < nf:
            if self.mode == "backward":
                return None
            for u in cands:
                if nf <= u < 2 * nf and mb[u] != mb[t] and dev[u] == dev[t]:
                    return self._if_shorter(t, u, u)
            return None
        if t >= 2 * nf or self.mode == "forward":
            return None
        for u in cands:
            if u < nf and mb[u] != mb[t] and dev[u] == dev[t]:
                return self._if_shorter(u, t, u)
        return None

    def _if_shorter(self, f: int, b: int, mate: int) -> tuple[int, int, int] | None:
        """The pair of forward ``f`` and backward ``b`` if it saves enough."""
        alone, rider = self.dur[b], -1
        if self.split:  # I + W alone; in the pair the W rides along
            rider = b + self.nf
            alone += self.dur[rider]
        du = self.ovl[f // self.m]
        if du + self.min_gain > self.dur[f] + alone:
            return None
        return mate, du, rider


__all__ = ["PAIR_MODES", "Pairing", "pair_modes"]
