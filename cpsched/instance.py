"""Pipeline-parallel scheduling instances: load, validate, fill defaults (SPEC §1–§2).

An :class:`Instance` is plain validated data (no solver code).  Per-stage quantities are
normalised to tuples of length ``S = p * v`` (stage order), and every duration is also
available in integer *ticks* (``round(x * time_scale)``) so that the simulator, the solver and
the validator all agree exactly for durations with up to 3 decimals.

Errors in an instance raise :class:`InstanceError` naming the field, the value and what is
allowed; the command line turns it into one message and exit code 2.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

Number = float | int
PerStage = Number | list[Number]

#: Largest instance accepted, in actions (beyond this neither the solver nor plots help).
MAX_ACTIONS = 200_000

#: Largest power of ten used to turn durations into integer ticks (3 decimals are exact).
MAX_TIME_DECIMALS = 3


class InstanceError(ValueError):
    """A field of an instance is wrong.

    Attributes:
        field: dotted field name, e.g. ``"costs.forward"``.
        value: the offending value (as given).
        allowed: what would have been accepted.
    """

    def __init__(self, field: str, value: Any, allowed: str) -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        super().__init__(f"{field}: {allowed}" if value is None else
                         f"{field} = {value!r}: {allowed}")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)


class Pipeline(_Section):
    """``[pipeline]``: devices ``p``, stages per device ``v``, microbatches ``m``, placement."""

    devices: int
    stages_per_device: int = 1
    microbatches: int
    placement: Literal["loop", "v", "bidirectional"] = "loop"
    split_backward: bool = False

    @field_validator("devices", "stages_per_device", "microbatches", mode="before")
    @classmethod
    def _positive_int(cls, x: Any) -> Any:
        if isinstance(x, bool) or not isinstance(x, int):
            raise ValueError("must be an integer >= 1")
        if x < 1:
            raise ValueError("must be an integer >= 1")
        return x

    @field_validator("split_backward", mode="before")
    @classmethod
    def _strict_bool(cls, x: Any) -> Any:
        if not isinstance(x, bool):
            raise ValueError("must be true or false")
        return x


def _check_number(x: Any) -> float:
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
        raise ValueError("must be a finite number >= 0")
    if x < 0:
        raise ValueError("must be a finite number >= 0")
    return x


def _check_per_stage(x: Any) -> Any:
    if isinstance(x, list):
        if not x:
            raise ValueError("must be a number >= 0 or a non-empty list of numbers >= 0")
        for k, y in enumerate(x):
            try:
                _check_number(y)
            except ValueError:
                raise ValueError(f"element {k} ({y!r}) must be a finite number >= 0") from None
        return x
    if x is None:
        return x
    return _check_number(x)


class Costs(_Section):
    """``[costs]``: per-stage durations (number or list of S numbers) and p2p latency."""

    forward: PerStage
    backward: PerStage | None = None
    backward_input: PerStage | None = None
    backward_weight: PerStage | None = None
    overlap_forward_backward: PerStage | None = None
    p2p_latency: Number = 0

    _per_stage = field_validator(
        "forward",
        "backward",
        "backward_input",
        "backward_weight",
        "overlap_forward_backward",
        mode="before",
    )(classmethod(lambda cls, x: _check_per_stage(x)))

    @field_validator("p2p_latency", mode="before")
    @classmethod
    def _latency(cls, x: Any) -> Any:
        return _check_number(x)


class Memory(_Section):
    """``[memory]``: activation per stage per microbatch, fraction freed by I, device limit."""

    activation: PerStage = 1
    released_by_input: Number = 0.0
    limit: Number | None = None

    @field_validator("activation", mode="before")
    @classmethod
    def _activation(cls, x: Any) -> Any:
        return _check_per_stage(x)

    @field_validator("released_by_input", mode="before")
    @classmethod
    def _fraction(cls, x: Any) -> Any:
        _check_number(x)
        if x > 1:
            raise ValueError("must be a fraction in [0, 1]")
        return x

    @field_validator("limit", mode="before")
    @classmethod
    def _limit(cls, x: Any) -> Any:
        if x is None:
            return x
        return _check_number(x)


class Instance(_Section):
    """One pipeline-scheduling instance (SPEC §1–§2), validated, defaults filled in.

    Derived per-stage tuples (length ``S = p * v``): :attr:`forward`, :attr:`backward`
    (duration of a fused B), :attr:`backward_input`, :attr:`backward_weight`,
    :attr:`activation`; integer tick versions via :meth:`ticks`.

    Raises:
        InstanceError: from :meth:`from_dict` / :func:`load_instance` on any wrong field.
    """

    name: str
    description: str = ""
    pipeline: Pipeline
    costs: Costs
    memory: Memory = Memory()

    @field_validator("name", mode="before")
    @classmethod
    def _name(cls, x: Any) -> Any:
        if not isinstance(x, str) or not x.strip():
            raise ValueError("must be a non-empty string")
        bad = set(x) & set('/\\:*?"<>|')
        if bad:
            raise ValueError("must be usable as a file name (no / \\ : * ? \" < > |)")
        return x

    @model_validator(mode="after")
    def _cross_checks(self) -> Instance:
        p, v, m = self.p, self.v, self.m
        S = p * v
        pl = self.pipeline
        if pl.placement == "v" and v != 2:
            raise InstanceError(
                "pipeline.stages_per_device", v, 'placement = "v" needs stages_per_device = 2'
            )
        if pl.placement == "bidirectional":
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
        n_actions = m * S * (3 if pl.split_backward else 2)
        if n_actions > MAX_ACTIONS:
            raise InstanceError(
                "pipeline", f"p={p}, v={v}, m={m}",
                f"at most {MAX_ACTIONS} actions (m * p * v * kinds); this has {n_actions}")
        c = self.costs
        for fld in ("forward", "backward", "backward_input", "backward_weight",
                    "overlap_forward_backward"):
            val = getattr(c, fld)
            if isinstance(val, list) and len(val) != S:
                raise InstanceError(
                    f"costs.{fld}", val, f"a number or a list of S = p * v = {S} numbers"
                )
        a = self.memory.activation
        if isinstance(a, list) and len(a) != S:
            raise InstanceError(
                "memory.activation", a, f"a number or a list of S = p * v = {S} numbers"
            )
        has_iw = c.backward_input is not None and c.backward_weight is not None
        if pl.split_backward:
            for fld in ("backward_input", "backward_weight"):
                if getattr(c, fld) is None:
                    raise InstanceError(
                        f"costs.{fld}", None, "required when pipeline.split_backward = true"
                    )
            if c.backward is not None:
                fused = [i + w for i, w in zip(self.backward_input, self.backward_weight,
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
        for s in range(S):
            if self.forward[s] + self.backward[s] <= 0:
                raise InstanceError(
                    "costs", f"stage {s}", "forward + backward must be > 0 for every stage"
                )
        # time scale check (3 decimals are exact; more decimals are rounded)
        _ = self.time_scale
        if self.memory.limit is not None:
            need = self.min_memory_limit()
            if self.memory.limit + 1e-9 < need:
                raise InstanceError(
                    "memory.limit",
                    self.memory.limit,
                    f"at least {_fmt(need)} (what one microbatch needs on its busiest device, "
                    "the sum of that device's stage activations)",
                )
        return self

    # ------------------------------------------------------------------ shape
    @property
    def p(self) -> int:
        """Number of devices (pipeline ranks)."""
        return self.pipeline.devices

    @property
    def v(self) -> int:
        """Stages (chunks) per device."""
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
    def placement(self) -> str:
        return self.pipeline.placement

    @property
    def split_backward(self) -> bool:
        return self.pipeline.split_backward

    def device_of(self, stage: int, microbatch: int = 0) -> int:
        """Device that runs ``stage`` for ``microbatch`` (SPEC §1 placements).

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

    # ------------------------------------------------------------- per stage
    def _per_stage(self, x: PerStage | None) -> tuple[float, ...]:
        S = self.num_stages
        if x is None:
            return tuple(0.0 for _ in range(S))
        if isinstance(x, list):
            return tuple(float(y) for y in x)
        return tuple(float(x) for _ in range(S))

    @cached_property
    def forward(self) -> tuple[float, ...]:
        """F duration per stage."""
        return self._per_stage(self.costs.forward)

    @cached_property
    def backward_input(self) -> tuple[float, ...]:
        """I duration per stage (0 when not given)."""
        return self._per_stage(self.costs.backward_input)

    @cached_property
    def backward_weight(self) -> tuple[float, ...]:
        """W duration per stage (0 when not given)."""
        return self._per_stage(self.costs.backward_weight)

    @cached_property
    def backward(self) -> tuple[float, ...]:
        """Fused B duration per stage (``backward``, or ``backward_input + backward_weight``)."""
        if self.costs.backward is not None:
            return self._per_stage(self.costs.backward)
        return tuple(i + w for i, w in zip(self.backward_input, self.backward_weight,
                                           strict=True))

    @cached_property
    def overlap_forward_backward(self) -> tuple[float, ...] | None:
        """Duration of an overlapped F&B pair, indexed by the F's stage; None if not given."""
        if self.costs.overlap_forward_backward is None:
            return None
        return self._per_stage(self.costs.overlap_forward_backward)

    @property
    def p2p_latency(self) -> float:
        return float(self.costs.p2p_latency)

    @cached_property
    def activation(self) -> tuple[float, ...]:
        """Activation memory per stage per microbatch."""
        return self._per_stage(self.memory.activation)

    @property
    def released_by_input(self) -> float:
        return float(self.memory.released_by_input)

    @property
    def memory_limit(self) -> float | None:
        return None if self.memory.limit is None else float(self.memory.limit)

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
    def time_scale(self) -> int:
        """Smallest power of ten (≤ 1000) that makes every duration an integer tick count."""
        values = [
            *self.forward, *self.backward, *self.backward_input, *self.backward_weight,
            *(self.overlap_forward_backward or ()), self.p2p_latency,
        ]
        for k in range(MAX_TIME_DECIMALS + 1):
            scale = 10**k
            if all(abs(x * scale - round(x * scale)) < 1e-6 for x in values):
                return scale
        return 10**MAX_TIME_DECIMALS

    def ticks(self, x: float) -> int:
        """A time in file units as integer ticks (``round(x * time_scale)``)."""
        return int(round(x * self.time_scale))

    def from_ticks(self, t: int | float) -> float:
        """Integer ticks back to file units (an ``int`` when the scale is 1)."""
        if self.time_scale == 1:
            return int(t) if float(t).is_integer() else float(t)
        return round(t / self.time_scale, MAX_TIME_DECIMALS + 3)

    # -------------------------------------------------------------------- I/O
    def to_dict(self) -> dict[str, Any]:
        """The instance as loaded, defaults filled in (the ``instance`` field of SPEC §3)."""
        d = self.model_dump(mode="json")
        d["memory"] = {k: v for k, v in d["memory"].items() if v is not None}
        d["costs"] = {k: v for k, v in d["costs"].items() if v is not None}
        return d

    def to_toml(self) -> str:
        """The instance as a TOML document (round-trips through :func:`load_instance`)."""
        d = self.to_dict()
        lines = [f"name = {_toml_value(d['name'])}"]
        if d.get("description"):
            lines.append(f"description = {_toml_value(d['description'])}")
        for section in ("pipeline", "costs", "memory"):
            lines.append(f"\n[{section}]")
            for k, v in d[section].items():
                lines.append(f"{k} = {_toml_value(v)}")
        return "\n".join(lines) + "\n"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Instance:
        """Validate a mapping (parsed TOML/JSON) into an :class:`Instance`.

        Raises:
            InstanceError: the first wrong field, with its value and what is allowed.
        """
        if not isinstance(data, Mapping):
            raise InstanceError("instance", data, "a table of fields")
        try:
            return cls.model_validate(dict(data))
        except ValidationError as exc:
            raise _to_instance_error(exc, data) from None

    def replace(self, **changes: Any) -> Instance:
        """A copy with dotted-key changes, e.g. ``replace(**{"memory.limit": 8})``, revalidated."""
        d = self.to_dict()
        for key, value in changes.items():
            _set_dotted(d, key, value)
        return Instance.from_dict(d)


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return repr(v)


def _lookup(data: Any, loc: Sequence[Any]) -> Any:
    cur = data
    for part in loc:
        try:
            cur = cur[part]
        except (KeyError, IndexError, TypeError):
            return None
    return cur


_ALLOWED_KEYS = {
    "": ["name", "description", "pipeline", "costs", "memory"],
    "pipeline": list(Pipeline.model_fields),
    "costs": list(Costs.model_fields),
    "memory": list(Memory.model_fields),
}


def _to_instance_error(exc: ValidationError, data: Any) -> InstanceError:
    err = exc.errors()[0]
    # drop pydantic's union-branch and validator names, e.g. 'float', 'list[...]'
    loc = [p for p in err["loc"] if not (isinstance(p, str) and (
        "[" in p or "(" in p or p in ("float", "int")))]
    field = ".".join(str(p) for p in loc) or "instance"
    etype = err["type"]
    ctx = err.get("ctx") or {}
    if isinstance(ctx.get("error"), InstanceError):
        return ctx["error"]
    value = err.get("input")
    if etype == "extra_forbidden":
        section = ".".join(str(p) for p in loc[:-1])
        allowed = _ALLOWED_KEYS.get(section, [])
        return InstanceError(field, value, "unknown key; allowed here: " + ", ".join(allowed))
    if etype == "missing":
        return InstanceError(field, None, "required field is missing")
    if etype == "literal_error":
        return InstanceError(field, value, "one of " + str(ctx.get("expected", "")))
    msg = err["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    if etype in ("model_type", "dict_type"):
        msg = "must be a table"
    elif etype in ("string_type",):
        msg = "must be a string"
    elif etype.startswith(("float", "int")) or etype == "list_type":
        msg = "must be a number >= 0 or a list of numbers >= 0"
    return InstanceError(field, _lookup(data, loc) if value is None else value, msg)


def _set_dotted(d: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    cur = d
    for part in parts[:-1]:
        nxt = cur.get(part)
        if not isinstance(nxt, dict):
            nxt = {}
            cur[part] = nxt
        cur = nxt
    if value is None:
        cur.pop(parts[-1], None)
    else:
        cur[parts[-1]] = value


def parse_override(text: str) -> tuple[str, Any]:
    """Parse ``KEY=VALUE`` (``--set``): the value is read as TOML (``8``, ``2.5``, ``"v"``,
    ``[1, 2]``, ``true``), or taken as a bare string when it is not valid TOML.

    Raises:
        InstanceError: no ``=`` or an empty key.
    """
    if "=" not in text:
        raise InstanceError("--set", text, "KEY=VALUE, e.g. pipeline.microbatches=16")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key:
        raise InstanceError("--set", text, "KEY=VALUE with a non-empty key")
    raw = raw.strip()
    if raw.lower() in ("none", "null", ""):
        return key, None
    try:
        value = tomllib.loads(f"x = {raw}")["x"]
    except tomllib.TOMLDecodeError:
        value = raw
    return key, value


def read_toml(path: str | Path, what: str = "instance file") -> dict[str, Any]:
    """Parse a TOML file.  Raises InstanceError naming ``what`` when it is missing or not
    TOML."""
    p = Path(path)
    if not p.is_file():
        raise InstanceError(what, str(path), "an existing TOML file")
    try:
        return tomllib.loads(p.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InstanceError(what, str(path), f"valid TOML ({exc})") from None


def load_instance(
    path: str | Path | None = None,
    overrides: Sequence[str] | Mapping[str, Any] = (),
    base: Mapping[str, Any] | None = None,
) -> Instance:
    """Load an instance from a TOML file (or a mapping), apply overrides, validate.

    Args:
        path: TOML file, or None to start from ``base`` (an instance from flags alone).
        overrides: ``["pipeline.microbatches=16", ...]`` or ``{"pipeline.microbatches": 16}``.
        base: a starting mapping when ``path`` is None.

    Raises:
        InstanceError: file missing or not TOML, or any wrong field.
    """
    if path is not None:
        p = Path(path)
        data = read_toml(p, "instance file")
        if "name" not in data:
            data["name"] = p.stem
    else:
        data = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in (base or {}).items()}
        data.setdefault("name", "instance")
    items = overrides.items() if isinstance(overrides, Mapping) else map(parse_override, overrides)
    for key, value in items:
        top = key.split(".")[0]
        if top not in _ALLOWED_KEYS[""]:
            raise InstanceError(key, value, "unknown key; top-level keys: "
                                + ", ".join(_ALLOWED_KEYS[""]))
        _set_dotted(data, key, value)
    return Instance.from_dict(data)
