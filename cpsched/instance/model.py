"""The validated instance: shape, placement, per-stage costs, integer ticks (docs/spec.md §1–§2).

An :class:`Instance` is plain validated data (no solver code).  Per-stage quantities are
normalised to tuples of length ``S = p * v`` (stage order), and every duration is also
available in integer *ticks* (``round(x * time_scale)``) so that the simulator, the solver and
the validator all agree exactly.  Durations with up to 6 decimals are exact; more decimals are
rounded to the tick grid with a :class:`~.checks.TickRoundingWarning` (:mod:`~.checks`).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from functools import cached_property
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, ValidationError, model_validator

from cpsched.instance.checks import (
    MAX_TIME_DECIMALS,
    NAME_RULE,
    TickGrid,
    TickRoundingWarning,
    memory_magnitude_error,
    memory_scale,
    on_grid,
    overlap_range_error,
    safe_name,
    tick_grid,
)
from cpsched.instance.errors import InstanceError, to_instance_error
from cpsched.instance.overrides import set_dotted
from cpsched.instance.sections import Costs, Memory, PerStage, Pipeline, Section
from cpsched.instance.toml_writer import dumps_toml

#: Largest instance accepted, in actions (beyond this neither the solver nor plots help).
MAX_ACTIONS = 200_000

_PER_STAGE_FIELDS = ("forward", "backward", "backward_input", "backward_weight",
                     "overlap_forward_backward")

__all__ = ["MAX_ACTIONS", "MAX_TIME_DECIMALS", "Instance"]


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


class Instance(Section):
    """One pipeline-scheduling instance (docs/spec.md §1–§2), validated, defaults filled in.

    Shape: ``p`` devices, ``v`` virtual stages (chunks) per device (``pipeline.stages_per_device``
    in the file), ``m`` microbatches, ``S = p * v`` stages.  Derived per-stage tuples (length
    ``S``, file time units): :attr:`forward`, :attr:`backward` (duration of a fused B),
    :attr:`backward_input`, :attr:`backward_weight`, :attr:`activation`; integer tick versions
    via :meth:`ticks`.  Build one with :meth:`from_dict` or :func:`~.io.load_instance`; derive
    a changed copy with :meth:`replace` (or :meth:`with_memory_limit`).

    Raises:
        InstanceError: from :meth:`from_dict` / :func:`load_instance` on any wrong field.
    """

    name: Annotated[str, BeforeValidator(safe_name)] = Field(description=NAME_RULE)
    description: str = Field("", description="a string")
    pipeline: Pipeline
    costs: Costs
    memory: Memory = Memory()

    # ----------------------------------------------------------- cross checks
    @model_validator(mode="after")
    def _cross_checks(self) -> Instance:
        self._check_placement()
        self._check_lengths()
        grid = self.tick_grid  # fits CP-SAT's integers; more than 6 decimals are rounded
        self._check_backward()
        self._check_overlap()
        self._check_memory_limit()
        if not grid.exact:
            warnings.warn(TickRoundingWarning(f"{self.name}: {grid.note()}"), stacklevel=2)
        return self

    def _check_placement(self) -> None:
        p, v, m = self.p, self.v, self.m
        if self.placement == "v" and v != 2:
            raise InstanceError(
                "pipeline.stages_per_device", v, 'placement = "v" needs stages_per_device = 2'
            )
        if self.placement == "bidirectional":
            if v != 1:
                raise InstanceError(
                    "pipeline.stages_per_device",
                    v,
                    'placement = "bidirectional" (DualPipe) needs stages_per_device = 1',
                )
            if p % 2:
                raise InstanceError(
                    "pipeline.devices", p, 'placement = "bidirectional" needs an even number'
                )
            if m % 2:
                raise InstanceError(
                    "pipeline.microbatches", m, 'placement = "bidirectional" needs an even number'
                )
        n_actions = self.n_actions
        if n_actions > MAX_ACTIONS:
            raise InstanceError(
                "pipeline", f"p={p}, v={v}, m={m}",
                f"at most {MAX_ACTIONS} actions (m * p * v * kinds); this has {n_actions}")

    def _check_lengths(self) -> None:
        S = self.num_stages
        given = [(f"costs.{f}", getattr(self.costs, f)) for f in _PER_STAGE_FIELDS]
        for field, val in [*given, ("memory.activation", self.memory.activation)]:
            if isinstance(val, list) and len(val) != S:
                raise InstanceError(field, val, f"a number or a list of S = p * v = {S} numbers")

    def _check_backward(self) -> None:
        c = self.costs
        has_iw = c.backward_input is not None and c.backward_weight is not None
        if self.split_backward:
            for fld in ("backward_input", "backward_weight"):
                if getattr(c, fld) is None:
                    raise InstanceError(
                        f"costs.{fld}", None, "required when pipeline.split_backward = true"
                    )
            if c.backward is not None:
                fused = [i + w for i, w in zip(self._per_stage(c.backward_input),
                                               self._per_stage(c.backward_weight),
                                               strict=True)]
                given = self._per_stage(c.backward)
                if any(abs(x - y) > 1e-9 for x, y in zip(fused, given, strict=True)):
                    raise InstanceError(
                        "costs.backward",
                        c.backward,
                        "with split_backward = true a fused B lasts backward_input + "
                        "backward_weight; leave backward out or make it equal",
                    )
        elif c.backward is None and not has_iw:
            raise InstanceError(
                "costs.backward",
                None,
                "required when pipeline.split_backward = false "
                "(or give backward_input and backward_weight)",
            )
        for s in range(self.num_stages):
            if self.forward[s] + self.backward[s] <= 0:
                raise InstanceError(
                    "costs", f"stage {s}", "forward + backward must be > 0 for every stage"
                )

    def _check_overlap(self) -> None:
        ov = self.overlap_forward_backward
        if ov is None:
            return
        partner = tuple(max(self.backward[t] for t in self.pair_partners(s))
                        for s in range(self.num_stages))
        err = overlap_range_error(self.costs.overlap_forward_backward, ov, self.forward,
                                  partner)
        if err is not None:
            raise err

    def _check_memory_limit(self) -> None:
        if self.memory.limit is None:
            return
        per_device = [self.m * sum(self.activation[s] for s in self.stages_of(d))
                      for d in range(self.p)]
        err = memory_magnitude_error(per_device, float(self.memory.limit), self.memory_scale)
        if err is not None:
            raise err
        need = self.min_memory_limit()
        if self.memory.limit + 1e-9 < need:
            raise InstanceError(
                "memory.limit",
                self.memory.limit,
                f"at least {_fmt(need)} (what one microbatch needs on its busiest device, "
                + ("the larger of that device's two stage activations: a microbatch passes "
                   "one of them)" if self.placement == "bidirectional" else
                   "the sum of that device's stage activations)"),
            )

    # ------------------------------------------------------------------ shape
    @property
    def p(self) -> int:
        """Number of devices (pipeline ranks)."""
        return self.pipeline.devices

    @property
    def v(self) -> int:
        """Virtual stages (chunks) per device, v (``pipeline.stages_per_device``)."""
        return self.pipeline.stages_per_device

    @property
    def stages_per_device(self) -> int:
        """Virtual stages (chunks) per device, v: the file's name for :attr:`v`."""
        return self.pipeline.stages_per_device

    @property
    def m(self) -> int:
        """Number of microbatches."""
        return self.pipeline.microbatches

    @property
    def num_stages(self) -> int:
        """``S = p * v``."""
        return self.p * self.v

    @property
    def n_actions(self) -> int:
        """Number of actions: ``m * S * 3`` with split backward (F, I, W), else ``m * S * 2``."""
        return self.m * self.num_stages * (3 if self.split_backward else 2)

    @property
    def placement(self) -> str:
        """How stages sit on devices: ``"loop"``, ``"v"`` or ``"bidirectional"``."""
        return self.pipeline.placement

    @property
    def split_backward(self) -> bool:
        """True when the backward runs as I (input grad) and W (weight grad) separately."""
        return self.pipeline.split_backward

    def device_of(self, stage: int, microbatch: int = 0) -> int:
        """Device that runs ``stage`` (``0 <= stage < S``) for ``microbatch`` (docs/spec.md §1).

        Only ``bidirectional`` depends on the microbatch: microbatches ``m/2..m-1`` run stage s
        on device ``p - 1 - s``.
        """
        p = self.p
        if self.placement == "loop":
            return stage % p
        if self.placement == "v":
            return stage if stage < p else 2 * p - 1 - stage
        return stage if microbatch < self.m // 2 else p - 1 - stage

    def stages_of(self, device: int) -> list[int]:
        """Stages placed on ``device`` (for bidirectional: both directions), ascending."""
        mbs = [0, self.m - 1] if self.placement == "bidirectional" else [0]
        return sorted({s for s in range(self.num_stages) for i in mbs
                       if self.device_of(s, i) == device})

    def pair_partners(self, stage: int) -> list[int]:
        """Stages whose backward can share an overlapped pair with a forward of ``stage``:
        those placed on a device that runs ``stage`` (for some microbatch), ascending."""
        mbs = [0, self.m - 1] if self.placement == "bidirectional" else [0]
        return sorted({t for i in mbs for t in self.stages_of(self.device_of(stage, i))})

    # ------------------------------------------------------------- per stage
    def _per_stage(self, x: PerStage | None) -> tuple[float, ...]:
        S = self.num_stages
        if x is None:
            return tuple(0.0 for _ in range(S))
        if isinstance(x, list):
            return tuple(float(y) for y in x)
        return tuple(float(x) for _ in range(S))

    def _time(self, x: PerStage | None) -> tuple[float, ...]:
        """A per-stage time as given, on the tick grid (rounded only when not exact)."""
        return on_grid(self._per_stage(x), self.tick_grid)

    @cached_property
    def forward(self) -> tuple[float, ...]:
        """F duration per stage (length S)."""
        return self._time(self.costs.forward)

    @cached_property
    def backward_input(self) -> tuple[float, ...]:
        """I duration per stage (length S; 0 when not given)."""
        return self._time(self.costs.backward_input)

    @cached_property
    def backward_weight(self) -> tuple[float, ...]:
        """W duration per stage (length S; 0 when not given)."""
        return self._time(self.costs.backward_weight)

    @cached_property
    def backward(self) -> tuple[float, ...]:
        """Fused B duration per stage (``backward``, or ``backward_input + backward_weight``
        — always the latter with split backward, where the file's ``backward`` must equal
        it)."""
        if self.costs.backward is not None and not self.split_backward:
            return self._time(self.costs.backward)
        return tuple(i + w for i, w in zip(self.backward_input, self.backward_weight,
                                           strict=True))

    @cached_property
    def overlap_forward_backward(self) -> tuple[float, ...] | None:
        """Duration of an overlapped F&B pair, indexed by the F's stage; None if not given."""
        if self.costs.overlap_forward_backward is None:
            return None
        return self._time(self.costs.overlap_forward_backward)

    @property
    def p2p_latency(self) -> float:
        """Time between a stage's end on one device and its consumer's start on another."""
        return on_grid((float(self.costs.p2p_latency),), self.tick_grid)[0]

    @cached_property
    def activation(self) -> tuple[float, ...]:
        """Activation memory per stage per microbatch (length S)."""
        return self._per_stage(self.memory.activation)

    @property
    def released_by_input(self) -> float:
        """Fraction of a stage's activation freed at the end of its I, in [0, 1]."""
        return float(self.memory.released_by_input)

    @property
    def memory_limit(self) -> float | None:
        """Memory limit per device, or None when unlimited."""
        return None if self.memory.limit is None else float(self.memory.limit)

    @cached_property
    def memory_scale(self) -> int:
        """The solver's memory unit: the smallest power of ten (<= 10**6) that makes every
        activation part (``a``, ``a * r``, ``a * (1 - r)``) and the limit integers."""
        r = self.released_by_input
        parts = [x for a in self.activation for x in (a, a * r, a * (1 - r))]
        if self.memory.limit is not None:
            parts.append(float(self.memory.limit))
        return memory_scale(parts)

    def min_memory_limit(self) -> float:
        """Smallest device limit under which any schedule exists.

        One microbatch holds, on each device, the activations of all that device's stages at
        once (its last forward there starts before its first backward there), so the
        busiest device needs the sum of its stage activations; running microbatches one at
        a time needs no more.  Bidirectional: the larger of the two stages a device holds.
        """
        need = 0.0
        for d in range(self.p):
            if self.placement == "bidirectional":
                need = max(need, max(self.activation[s] for s in self.stages_of(d)))
            else:
                need = max(need, sum(self.activation[s] for s in self.stages_of(d)))
        return need

    # ------------------------------------------------------------------ ticks
    @cached_property
    def tick_grid(self) -> TickGrid:
        """The integer time grid (:class:`~.checks.TickGrid`): the finest power of ten
        (<= 10**6) on which every duration and the latency is exact and the longest
        possible schedule fits CP-SAT's 64-bit integers; else the finest that fits, with
        the costs rounded to it (:attr:`TickGrid.exact` False, a warning on load).

        Raises:
            InstanceError: the total work does not fit even at one tick per time unit.
        """
        c = self.costs
        raw = {f: self._per_stage(getattr(c, f)) for f in _PER_STAGE_FIELDS}
        latency = float(c.p2p_latency)
        fused = raw["backward"] if c.backward is not None and not self.split_backward else \
            tuple(i + w for i, w in zip(raw["backward_input"], raw["backward_weight"],
                                        strict=True))
        per_mb = sum(raw["forward"]) + sum(fused) + sum(raw["overlap_forward_backward"])
        horizon = self.m * (per_mb + 2 * self.num_stages * latency)
        values = [x for f in _PER_STAGE_FIELDS for x in raw[f]] + [latency]
        return tick_grid(values, horizon, self.n_actions)

    @property
    def time_scale(self) -> int:
        """Ticks per time unit: the smallest power of ten (<= 10**6) that makes every
        duration an integer tick count (see :attr:`tick_grid`)."""
        return self.tick_grid.scale

    def ticks(self, x: float) -> int:
        """A time in file units as integer ticks (``round(x * time_scale)``)."""
        return int(round(x * self.time_scale))

    def from_ticks(self, t: int | float) -> float:
        """Integer ticks back to file units (an ``int`` when the scale is 1)."""
        if self.time_scale == 1:
            return int(t) if float(t).is_integer() else float(t)
        return round(t / self.time_scale, MAX_TIME_DECIMALS + 3)

    # ------------------------------------------------------- data and copies
    def to_dict(self) -> dict[str, Any]:
        """The instance as loaded, defaults filled in (the ``instance`` field of
        docs/spec.md §3); unset optional costs and the unset memory limit are left out."""
        d = self.model_dump(mode="json")
        d["memory"] = {k: v for k, v in d["memory"].items() if v is not None}
        d["costs"] = {k: v for k, v in d["costs"].items() if v is not None}
        return d

    def to_toml(self) -> str:
        """The instance as a TOML document (round-trips through :func:`load_instance`), per-stage
        lists on one line (:func:`~cpsched.instance.toml_writer.dumps_toml`)."""
        d = self.to_dict()
        if not d.get("description"):
            d.pop("description", None)
        return dumps_toml(d)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Instance:
        """Validate a mapping (parsed TOML/JSON, sections as nested mappings) into an
        :class:`Instance`.

        Raises:
            InstanceError: the first wrong field, with its value and what is allowed.
        """
        if not isinstance(data, Mapping):
            raise InstanceError("instance", data, "a table of fields")
        try:
            return cls.model_validate(dict(data))
        except ValidationError as exc:
            raise to_instance_error(exc, data, cls) from None

    def replace(self, **changes: Any) -> Instance:
        """A revalidated copy with some fields changed: the one way to derive an instance.

        Keys are dotted file keys (``"memory.limit"``, ``"pipeline.microbatches"``) or
        top-level ones (``name``); pass dotted keys with ``**{...}``, e.g.
        ``inst.replace(**{"memory.limit": 8, "name": "x"})``.  A value of None removes the
        key, so the default applies (``"memory.limit": None`` means unlimited); a section key
        with a table (``memory={...}``) replaces that whole section.

        Raises:
            InstanceError: an unknown key or any value the file would refuse.
        """
        d = self.to_dict()
        for key, value in changes.items():
            set_dotted(d, key, value)
        return Instance.from_dict(d)

    def with_memory_limit(self, limit: float | None) -> Instance:
        """A copy with the memory limit per device set to ``limit`` (same units as
        ``memory.activation``), or unlimited when None.

        Raises:
            InstanceError: ``limit`` negative, not a finite number, or below
                :meth:`min_memory_limit`.
        """
        return self.replace(**{"memory.limit": limit})
