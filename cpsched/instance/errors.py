"""The one error an instance raises, and the translation of pydantic's errors into it.

Every wrong input is reported as ``field = value: what is allowed`` (docs/spec.md §2); the
command line prints that one line and exits with code 2.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo


class InstanceError(ValueError):
    """A field of an instance is wrong.

    Attributes:
        field: dotted field name, e.g. ``"costs.forward"``.
        value: the offending value (as given); None when the field is missing.
        allowed: what would have been accepted.
    """

    def __init__(self, field: str, value: Any, allowed: str) -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        super().__init__(f"{field}: {allowed}" if value is None else
                         f"{field} = {value!r}: {allowed}")


def _lookup(data: Any, loc: Sequence[Any]) -> Any:
    """The value at ``loc`` in nested mappings/lists, or None when there is none."""
    cur = data
    for part in loc:
        try:
            cur = cur[part]
        except (KeyError, IndexError, TypeError):
            return None
    return cur


def _is_model(x: Any) -> bool:
    return isinstance(x, type) and issubclass(x, BaseModel)


def _resolve(root: type[BaseModel], loc: Sequence[Any]) -> tuple[type[BaseModel], FieldInfo | None]:
    """The innermost model on the path ``loc`` and the field it ends at (None if not a field)."""
    model: type[BaseModel] = root
    for part in loc:
        info = model.model_fields.get(part) if isinstance(part, str) else None
        if info is None:
            return model, None
        if not _is_model(info.annotation):
            return model, info
        model = info.annotation
    return model, None


def _message(err: Any, root: type[BaseModel], loc: list[Any]) -> str:
    """What is allowed, for one pydantic error (``err`` is an item of ``exc.errors()``)."""
    etype = err["type"]
    model, info = _resolve(root, loc)
    if etype == "extra_forbidden":
        return "unknown key; allowed here: " + ", ".join(model.model_fields)
    if etype == "missing":
        return "required field is missing"
    if etype == "literal_error":
        return "one of " + str((err.get("ctx") or {}).get("expected", ""))
    if etype in ("model_type", "model_attributes_type", "dict_type"):
        return "must be a table"
    if etype == "value_error":
        return str(err["msg"]).removeprefix("Value error, ")
    if info is not None and info.description:
        return "must be " + info.description
    return str(err["msg"])


def to_instance_error(exc: ValidationError, data: Any, root: type[BaseModel]) -> InstanceError:
    """The first error of a pydantic validation of ``data`` against ``root`` as InstanceError.

    The allowed set comes from the raising validator's message, else from the field's
    ``description`` (each constrained field states what it accepts there), so a field's rule
    and its message are written once.  An :class:`InstanceError` raised inside a validator is
    returned as it is.
    """
    err = exc.errors()[0]
    ctx = err.get("ctx") or {}
    if isinstance(ctx.get("error"), InstanceError):
        return ctx["error"]
    # drop pydantic's union-branch and validator names, e.g. 'float', 'list[...]'
    loc = [p for p in err["loc"] if not (isinstance(p, str) and (
        "[" in p or "(" in p or p in ("float", "int")))]
    field = ".".join(str(p) for p in loc) or "instance"
    msg = _message(err, root, loc)
    if err["type"] == "missing":
        return InstanceError(field, None, msg)
    value = err.get("input")
    return InstanceError(field, _lookup(data, loc) if value is None else value, msg)
