"""Rules an instance obeys beyond the types of its fields (docs/spec.md §2.2, docs/guarantees.md):

- its ``name`` is a safe file name (it names the output files);
- its times sit on an integer tick grid (:class:`TickGrid`) whose values fit CP-SAT's 64-bit
  integers; costs with more than :data:`MAX_TIME_DECIMALS` decimals are rounded to the grid
  with a :class:`TickRoundingWarning` that bounds the effect on the makespan;
- an overlapped F&B pair lasts at least as long as its longer half and at most the two back
  to back (:func:`overlap_range_error`);
- with a memory limit, the scaled memory amounts fit CP-SAT's integers too.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cpsched.instance.errors import InstanceError

#: Longest instance name, in characters (and at most :data:`MAX_NAME_BYTES` in UTF-8).
MAX_NAME_CHARS = 100
MAX_NAME_BYTES = 200

#: Finest time resolution: durations with up to this many decimals are exact.
MAX_TIME_DECIMALS = 6

#: Largest value CP-SAT accepts in a variable's domain (its limit is ``2**63 / 2``), and the
#: bound on the sum of all domains.  The CP-SAT model has a handful of variables per action;
#: :data:`VARIABLES_PER_ACTION` is a generous count of them.
CP_SAT_INT_LIMIT = 2**62
VARIABLES_PER_ACTION = 16

#: Largest total of scaled memory amounts on one device (a ``Cumulative``'s demands).
MAX_MEMORY_UNITS = 2**50

_FORBIDDEN_CHARS = '/\\:*?"<>|'
NAME_RULE = (f"a non-empty file name of at most {MAX_NAME_CHARS} characters: no control "
             "characters (NUL, ESC, newline, ...), none of / \\ : * ? \" < > |, not . or ..")


def safe_name(x: Any) -> Any:
    """A string usable as a file name on any system (the instance name names output files).

    Raises:
        ValueError: naming what is wrong (pydantic turns it into an :class:`InstanceError`).
    """
    if not isinstance(x, str) or not x.strip():
        raise ValueError("must be a non-empty string")
    if len(x) > MAX_NAME_CHARS or len(x.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        raise ValueError(f"must be at most {MAX_NAME_CHARS} characters ({MAX_NAME_BYTES} "
                         f"bytes in UTF-8); this has {len(x)}")
    bad = [c for c in x if unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp")]
    if bad:
        raise ValueError(f"must be usable as a file name: no control characters (found "
                         f"{bad[0]!r})")
    if set(x) & set(_FORBIDDEN_CHARS):
        raise ValueError("must be usable as a file name (no / \\ : * ? \" < > |)")
    if x.strip() in (".", ".."):
        raise ValueError("must be usable as a file name (not . or ..)")
    return x


class TickRoundingWarning(UserWarning):
    """Costs have more decimals than the tick grid holds and were rounded to it."""


@dataclass(frozen=True)
class TickGrid:
    """The integer time grid of an instance: ``ticks(x) = round(x * scale)``.

    Attributes:
        scale: ticks per time unit, a power of ten ``<= 10**MAX_TIME_DECIMALS``.
        exact: every duration and the latency is a whole number of ticks (no rounding).
        max_error: largest ``|rounded - given|`` over the durations and the latency (time
            units; 0 when exact).
        horizon: an upper bound on the makespan of any schedule (time units): every action
            back to back plus a latency per dependency.
        n_actions: the number of actions ``N``.
    """

    scale: int
    exact: bool
    max_error: float
    horizon: float
    n_actions: int

    @property
    def makespan_error(self) -> float:
        """How far a makespan on the grid can be from the makespan with the given costs:
        a makespan is the length of a chain of at most ``N`` actions and ``N - 1`` lags,
        each rounded by at most :attr:`max_error`."""
        return (2 * self.n_actions - 1) * self.max_error

    def note(self) -> str:
        """The rounding warning's text (empty when exact)."""
        if self.exact:
            return ""
        return (f"costs have more than {round(math.log10(self.scale))} decimals: durations and "
                f"latency are rounded to multiples of {1 / self.scale:g} (each by at most "
                f"{self.max_error:.3g}); a makespan may differ by at most "
                f"{self.makespan_error:.3g} time units from the one with the exact costs "
                f"((2N - 1) x {self.max_error:.3g} for N = {self.n_actions} actions)")


def max_ticks(n_actions: int) -> int:
    """The largest horizon, in ticks, whose CP-SAT model keeps every domain and the sum of
    all domains within :data:`CP_SAT_INT_LIMIT`."""
    return CP_SAT_INT_LIMIT // (VARIABLES_PER_ACTION * max(1, n_actions))


def _off_grid(x: float, scale: int) -> float:
    return abs(x * scale - round(x * scale))


def tick_grid(values: Sequence[float], horizon: float, n_actions: int) -> TickGrid:
    """The finest grid (``scale = 10**k``, ``k <= MAX_TIME_DECIMALS``) on which ``values``
    are exact and ``horizon`` fits CP-SAT; else the finest that fits, with rounding.

    Raises:
        InstanceError: ``horizon`` does not fit even at one tick per time unit.
    """
    limit = max_ticks(n_actions)
    fitting = [10**k for k in range(MAX_TIME_DECIMALS + 1) if horizon * 10**k <= limit]
    if not fitting:
        raise InstanceError(
            "costs", f"{horizon:.3g} time units of work",
            f"at most {limit:.3g} time units in total for {n_actions} actions (every duration "
            "and latency, back to back): CP-SAT computes with 64-bit integers; use a larger "
            "time unit")
    for scale in fitting:
        if all(_off_grid(x, scale) < 1e-6 for x in values):
            return TickGrid(scale, True, 0.0, horizon, n_actions)
    scale = fitting[-1]
    err = max(abs(round(x * scale) / scale - x) for x in values)
    return TickGrid(scale, False, err, horizon, n_actions)


def on_grid(xs: tuple[float, ...], grid: TickGrid) -> tuple[float, ...]:
    """``xs`` rounded to ``grid`` (unchanged when the grid is exact)."""
    if grid.exact:
        return xs
    return tuple(round(x * grid.scale) / grid.scale for x in xs)


def memory_scale(values: Sequence[float]) -> int:
    """Smallest power of ten (<= 10**6) that makes every memory amount an integer (the
    solver's memory unit, :attr:`cpsched.instance.Instance.memory_scale`)."""
    for k in range(7):
        if all(_off_grid(x, 10**k) < 1e-6 for x in values):
            return 10**k
    return 10**6


def memory_magnitude_error(per_device: Sequence[float], limit: float,
                           scale: int) -> InstanceError | None:
    """An error when a device's memory (every microbatch's activations at once,
    ``per_device``) or the ``limit``, in solver units of ``1 / scale``, exceed
    :data:`MAX_MEMORY_UNITS`."""
    worst = max([*per_device, limit])
    if worst * scale <= MAX_MEMORY_UNITS:
        return None
    field = "memory.limit" if limit >= max(per_device) else "memory.activation"
    return InstanceError(
        field, limit if field == "memory.limit" else f"{worst:.3g} per device",
        f"the memory of a device, in units of {1 / scale:g}, must stay below "
        f"{MAX_MEMORY_UNITS:.3g} (CP-SAT computes with 64-bit integers); use a larger memory "
        "unit")


OVERLAP_RULE = ("an overlapped F&B pair lasts at least as long as its longer half and at most "
                "the two back to back: max(F[s], B) <= overlap_forward_backward[s] <= F[s] + B, "
                "with B the longest backward (I + W with split backward) of a stage that runs "
                "on the same device as stage s")


def overlap_range_error(given: Any, ov: Sequence[float], forward: Sequence[float],
                        partner_backward: Sequence[float]) -> InstanceError | None:
    """The first stage whose overlap cost is outside its physical range (docs/spec.md
    §1.4): ``max(F[s], B) <= ov[s] <= F[s] + B`` with ``B = partner_backward[s]``, the
    longest backward among the stages that can share an overlapped pair with stage ``s``;
    ``given`` is the field as written (for the message)."""
    for s, (o, f, b) in enumerate(zip(ov, forward, partner_backward, strict=True)):
        low, high = max(f, b), f + b
        if o < low - 1e-9 or o > high + 1e-9:
            return InstanceError(
                "costs.overlap_forward_backward", given,
                f"{o:g} at stage {s} must be between {low:g} and {high:g} (F = {f:g}, "
                f"B = {b:g}): " + OVERLAP_RULE)
    return None
