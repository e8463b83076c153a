"""The three tables of an instance file (docs/spec.md §2) and the constrained types of their
fields.

Each field states what it accepts in its ``description``; :func:`~.errors.to_instance_error`
turns a failed constraint into ``field = value: must be <description>``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    TypeAdapter,
    ValidationError,
)

#: What a duration, latency, activation or memory limit accepts.
NUMBER_ALLOWED = "a finite number >= 0"

#: Any number as written in a file (an ``int`` stays an ``int`` when dumped back).
Number = float | int

#: A count: an integer >= 1 (``true`` and ``4.0`` are refused).
PositiveInt = Annotated[int, Field(ge=1, strict=True, description="an integer >= 1")]

#: A finite number >= 0 (no booleans, no strings, no NaN or infinity).
NonNegative = Annotated[StrictInt | StrictFloat, Field(ge=0, allow_inf_nan=False,
                                                       description=NUMBER_ALLOWED)]

#: A fraction in [0, 1].
Fraction = Annotated[NonNegative, Field(le=1, description="a fraction in [0, 1]")]

_NON_NEGATIVE: TypeAdapter[Number] = TypeAdapter(NonNegative)


def _is_non_negative(x: Any) -> bool:
    try:
        _NON_NEGATIVE.validate_python(x)
    except ValidationError:
        return False
    return True


def _check_per_stage(x: Any) -> Any:
    """A number, or a non-empty list of numbers; names the first wrong list element.

    Raises:
        ValueError: ``"element k (value) must be a finite number >= 0"`` and the like.
    """
    if isinstance(x, list):
        if not x:
            raise ValueError("must be a number >= 0 or a non-empty list of numbers >= 0")
        for k, y in enumerate(x):
            if not _is_non_negative(y):
                raise ValueError(f"element {k} ({y!r}) must be {NUMBER_ALLOWED}")
    elif x is not None and not _is_non_negative(x):
        raise ValueError(f"must be {NUMBER_ALLOWED}")
    return x


#: A per-stage quantity: one number for every stage, or a list of ``S = p * v`` numbers in
#: stage order (the length is checked by :class:`~.model.Instance`, which knows ``S``).
PerStage = Annotated[NonNegative | list[NonNegative], BeforeValidator(_check_per_stage)]

_PER_STAGE_ALLOWED = "a number >= 0 or a list of numbers >= 0"


class Section(BaseModel):
    """Base of every table: unknown keys refused, immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)


class Pipeline(Section):
    """``[pipeline]``: devices ``p``, virtual stages (chunks) per device ``v``, microbatches
    ``m``, placement of stages on devices, and whether the backward is split into I and W."""

    devices: PositiveInt
    stages_per_device: PositiveInt = 1
    microbatches: PositiveInt
    placement: Literal["loop", "v", "bidirectional"] = Field(
        "loop", description='"loop", "v" or "bidirectional"')
    split_backward: StrictBool = Field(False, description="true or false")


class Costs(Section):
    """``[costs]``: per-stage durations (a number or a list of S numbers, file time units) and
    the point-to-point latency between devices."""

    forward: PerStage = Field(description=_PER_STAGE_ALLOWED)
    backward: PerStage | None = Field(None, description=_PER_STAGE_ALLOWED)
    backward_input: PerStage | None = Field(None, description=_PER_STAGE_ALLOWED)
    backward_weight: PerStage | None = Field(None, description=_PER_STAGE_ALLOWED)
    overlap_forward_backward: PerStage | None = Field(None, description=_PER_STAGE_ALLOWED)
    p2p_latency: NonNegative = 0


class Memory(Section):
    """``[memory]``: activation per stage per microbatch (a number or a list of S numbers),
    the fraction of it freed at the end of I, and the per-device limit (None: unlimited)."""

    activation: PerStage = Field(1, description=_PER_STAGE_ALLOWED)
    released_by_input: Fraction = 0.0
    limit: NonNegative | None = Field(None, description=NUMBER_ALLOWED)
