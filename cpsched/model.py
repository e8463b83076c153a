"""The timed schedule, its status and its JSON file (docs/spec.md §3).

No solver code here.  The action vocabulary (:class:`Action`, :class:`Kind`, :class:`Overlap`,
:class:`TimedAction`, orders) lives in :mod:`cpsched.actions` and is re-exported here; the
metrics of docs/spec.md §5 are computed by :mod:`cpsched.metrics`.
"""

from __future__ import annotations

import json
from dataclasses import KW_ONLY, InitVar, dataclass, field
from enum import StrEnum
from operator import itemgetter
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

from cpsched import metrics
from cpsched.actions import (
    Action,
    B,
    DeviceOrders,
    F,
    I,
    Kind,
    Overlap,
    Step,
    TimedAction,
    W,
    default_actions,
    format_orders,
    step_actions,
)
from cpsched.instance import Instance, InstanceError

SCHEDULE_FORMAT = "cpsched.schedule/1"


class Status(StrEnum):
    """What a schedule is known to be (docs/spec.md §3, §7).

    ``OPTIMAL``: its makespan equals a lower bound cpsched can prove; ``FEASIBLE``: a valid
    schedule from the solver with a gap; ``HEURISTIC``: a known schedule, timed;
    ``INFEASIBLE``: no schedule exists (with the reason); ``UNKNOWN``: nothing is known.
    A ``StrEnum``: compares equal to its name (``Status.OPTIMAL == "OPTIMAL"``).
    """

    OPTIMAL = "OPTIMAL"
    FEASIBLE = "FEASIBLE"
    HEURISTIC = "HEURISTIC"
    INFEASIBLE = "INFEASIBLE"
    UNKNOWN = "UNKNOWN"


#: Every status name, in order of strength.
STATUSES = tuple(s.value for s in Status)


class ScheduleFileError(ValueError):
    """A schedule file cannot be read (not JSON, wrong format, missing or wrong fields)."""


@dataclass
class Schedule:
    """A timed schedule for an instance, with the metrics of docs/spec.md §5.

    Attributes:
        instance: the instance it schedules.
        actions: its rows, sorted by (device, start, end, F before B/I/W).
        method: the registry name of the schedule that produced it, or ``"cpsat"``.
        status: a :class:`Status`.
        lower_bound: a proven bound on the optimal makespan (instance units), None if unknown.
        solve_seconds: wall time that produced it.
        extra: further fields written to the file (e.g. the warm start).
        presorted: (keyword only, not stored) ``actions`` are already in that order and
            are kept as given, not copied (the simulator builds its rows so); not checked.
    """

    instance: Instance
    actions: list[TimedAction]
    method: str
    status: Status = Status.HEURISTIC
    lower_bound: float | None = None
    solve_seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    _: KW_ONLY
    presorted: InitVar[bool] = False

    def __post_init__(self, presorted: bool) -> None:
        if not presorted:
            self.actions = sorted(self.actions, key=_action_sort_key)
        self.status = Status(self.status)

    # metrics (docs/spec.md §5) --------------------------------------------
    @property
    def makespan(self) -> float:
        """Latest action end (0 for no actions)."""
        return max(map(_END, self.actions), default=0.0)

    @property
    def bubble_fraction(self) -> float:
        """``1 - busy / (p * makespan)``; an overlapped pair counts its duration once."""
        return metrics.bubble_fraction(self)

    @property
    def peak_memory(self) -> list[float]:
        """Peak memory held per device (docs/spec.md §1 memory rule), shape ``(p,)``."""
        return metrics.peak_memory(self)

    @property
    def gap(self) -> float | None:
        """``(makespan - lower_bound) / makespan`` (None without a bound); the one gap formula."""
        return gap(self.makespan, self.lower_bound)

    def orders(self) -> DeviceOrders:
        """Per-device orders (by start, F before B/I/W on ties), overlapped pairs rebuilt."""
        orders: DeviceOrders = [[] for _ in range(self.instance.p)]
        pending: dict[int, TimedAction] = {}
        for a in self.actions:
            if a.overlap is None:
                orders[a.device].append(a.action)
            elif a.overlap in pending:
                other = pending.pop(a.overlap)
                f, b = (other, a) if other.kind == Kind.F else (a, other)
                orders[a.device].append(Overlap(f.action, b.action))
            else:
                pending[a.overlap] = a
        return orders

    # JSON (docs/spec.md §3) -----------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The docs/spec.md §3 document."""
        r = _rounder(self.instance)
        d: dict[str, Any] = {
            "format": SCHEDULE_FORMAT,
            "instance": self.instance.to_dict(),
            "method": self.method,
            "status": str(self.status),
            "makespan": r(self.makespan),
            "lower_bound": None if self.lower_bound is None else r(self.lower_bound),
            "gap": None if self.gap is None else round(self.gap, 6),
            "bubble_fraction": round(self.bubble_fraction, 6),
            "peak_memory": [round(x, 9) for x in self.peak_memory],  # memory units, not ticks
            "solve_seconds": round(self.solve_seconds, 3),
        }
        d.update(self.extra)
        d["actions"] = [a.to_dict() for a in self.actions]
        return d

    def to_json(self, path: str | Path | None = None) -> str:
        """Serialise (and write to ``path`` when given); returns the JSON text."""
        text = json.dumps(self.to_dict(), indent=1)
        if path is not None:
            Path(path).write_text(text + "\n", encoding="utf-8")
        return text

    @classmethod
    def from_dict(cls, data: Any, instance: Instance | None = None) -> Schedule:
        """Read a docs/spec.md §3 document; ``instance`` overrides the embedded one.

        Raises:
            ScheduleFileError: wrong format or fields (names the field and the value).
            InstanceError: the embedded instance is invalid.
        """
        if not isinstance(data, dict):
            raise ScheduleFileError("a schedule file is a JSON object")
        try:
            doc = ScheduleDocument.model_validate(data)
        except ValidationError as exc:
            raise ScheduleFileError(_describe(exc)) from None
        if instance is None:
            if doc.instance is None:
                raise ScheduleFileError("instance: missing (give the instance file as well)")
            instance = Instance.from_dict(doc.instance)
        actions = [TimedAction(r.device, r.stage, r.microbatch, Kind(r.kind), r.start, r.end,
                               r.overlap) for r in doc.actions]
        status = doc.status if doc.status in STATUSES else Status.UNKNOWN
        return cls(instance, actions, method=doc.method, status=Status(status),
                   lower_bound=doc.lower_bound, solve_seconds=doc.solve_seconds or 0.0)

    @classmethod
    def from_json(cls, path: str | Path, instance: Instance | None = None) -> Schedule:
        """Read a schedule file.  Raises ScheduleFileError / InstanceError."""
        p = Path(path)
        if not p.is_file():
            raise ScheduleFileError(f"schedule file {str(path)!r}: no such file")
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
            raise ScheduleFileError(f"schedule file {str(path)!r}: not JSON ({exc})") from None
        return cls.from_dict(data, instance)


def gap(makespan: float, lower_bound: float | None) -> float | None:
    """``(makespan - lower_bound) / makespan`` clipped at 0 (docs/spec.md §5); None without a
    bound or for an empty schedule."""
    if lower_bound is None or makespan <= 0:
        return None
    return max(0.0, (makespan - lower_bound) / makespan)


# ------------------------------------------------------------- file schema
class ActionRow(BaseModel):
    """One row of ``actions`` in a schedule file: integers are strict, times finite numbers."""

    model_config = ConfigDict(extra="ignore")
    device: StrictInt
    stage: StrictInt
    microbatch: StrictInt
    kind: Kind
    start: float = Field(allow_inf_nan=False, strict=True)
    end: float = Field(allow_inf_nan=False, strict=True)
    overlap: StrictInt | None = None


class ScheduleDocument(BaseModel):
    """The schedule file (docs/spec.md §3) as read: ``format`` must be
    :data:`SCHEDULE_FORMAT`; claimed metrics are kept for the validator to check."""

    model_config = ConfigDict(extra="allow")
    format: str = Field(pattern=f"^{SCHEDULE_FORMAT.replace('.', '[.]')}$")
    instance: dict[str, Any] | None = None
    method: str = "file"
    status: str = "UNKNOWN"
    makespan: float | None = Field(default=None, allow_inf_nan=False)
    lower_bound: float | None = Field(default=None, allow_inf_nan=False)
    gap: float | None = Field(default=None, allow_inf_nan=False)
    bubble_fraction: float | None = Field(default=None, allow_inf_nan=False)
    peak_memory: list[float] | None = None
    solve_seconds: float | None = Field(default=None, allow_inf_nan=False)
    actions: list[ActionRow]


def _describe(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(x) if not isinstance(x, int) else f"[{x}]" for x in err["loc"])
    loc = loc.replace(".[", "[")
    if err["loc"] == ("format",):
        return f"format = {err.get('input')!r}: expected {SCHEDULE_FORMAT!r}"
    value = repr(err.get("input"))
    if len(value) > 80:
        value = value[:77] + "..."
    hint = (" (each action needs device, stage, microbatch as integers, kind F/B/I/W, "
            "start and end as finite numbers)") if loc.startswith("actions") else ""
    return f"{loc} = {value}: {err['msg']}{hint}"


def _rounder(instance: Instance):  # noqa: ANN202
    def r(x: float) -> float:
        return instance.from_ticks(instance.ticks(x)) if x == x else x

    return r


_END = itemgetter(5)  # TimedAction.end
_KIND_RANK = {Kind.F: 0, Kind.B: 1, Kind.I: 1, Kind.W: 2}


def _action_sort_key(a: TimedAction) -> tuple:
    # end before kind: a zero-length action at t runs before one that starts at t and lasts
    # (indices, not names: this runs once per action of every schedule built)
    return (a[0], a[4], a[5], _KIND_RANK[a[3]], a[1], a[2])


__all__ = [
    "Action", "ActionRow", "B", "DeviceOrders", "F", "I", "InstanceError", "Kind", "Overlap",
    "STATUSES", "Schedule", "ScheduleDocument", "ScheduleFileError", "Status", "Step",
    "TimedAction", "W", "default_actions", "format_orders", "gap", "step_actions",
]
