"""The instance as a form: form values ⇄ :class:`~cpsched.instance.Instance`, and the URL.

Every field of the instance file (docs/spec.md §2) is one text box (or a choice); what the
user typed is read like ``--set KEY=VALUE`` on the command line (TOML: ``8``, ``2.5``,
``[1, 2]``; a bare ``1, 2`` is a list too; empty = absent, so the default applies) and the
whole instance is validated by :meth:`Instance.from_dict`, so a wrong value gets exactly the
message the CLI prints after ``error: instance:`` — ``FIELD = VALUE: what is allowed``.  The
Megatron group size is not an instance field: it is the ``microbatch_group_size_per_vp_stage``
argument of the ``interleaved-1f1b`` generator.

Form values are plain strings and booleans keyed by the field ids of :data:`FIELDS`; the page's
URL query carries the same keys (:func:`query_from_values`, :func:`values_from_query`), so a
view can be shared.
"""

from __future__ import annotations

import base64
import binascii
import tomllib
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any
from urllib.parse import parse_qsl, urlencode

from cpsched.instance import Instance, InstanceError, TickRoundingWarning

#: Largest uploaded instance file, bytes.
MAX_UPLOAD = 1_000_000


@dataclass(frozen=True)
class Field:
    """One input of the form.

    Attributes:
        id: the form id (also the URL query key).
        key: the dotted instance key it sets (docs/spec.md §2.1), or ``""`` for ``group``.
        label: the text shown next to it.
        kind: ``"text"`` (read as TOML), ``"choice"`` (placement) or ``"bool"``.
        hint: placeholder text.
    """

    id: str
    key: str
    label: str
    kind: str = "text"
    hint: str = ""


FIELDS: tuple[Field, ...] = (
    Field("name", "name", "name", hint="instance"),
    Field("description", "description", "description", hint="free text"),
    Field("devices", "pipeline.devices", "devices p"),
    Field("stages_per_device", "pipeline.stages_per_device", "stages per device v", hint="1"),
    Field("microbatches", "pipeline.microbatches", "microbatches m"),
    Field("placement", "pipeline.placement", "placement", kind="choice"),
    Field("split_backward", "pipeline.split_backward", "split backward (I and W)", kind="bool"),
    Field("forward", "costs.forward", "F forward", hint="5 or 5, 6, ..."),
    Field("backward", "costs.backward", "B backward", hint="10 or a list"),
    Field("backward_input", "costs.backward_input", "I input grad", hint="split only"),
    Field("backward_weight", "costs.backward_weight", "W weight grad", hint="split only"),
    Field("overlap_forward_backward", "costs.overlap_forward_backward", "F&B overlap",
          hint="none"),
    Field("p2p_latency", "costs.p2p_latency", "p2p latency", hint="0"),
    Field("activation", "memory.activation", "activation memory", hint="1"),
    Field("released_by_input", "memory.released_by_input", "released by I (fraction)",
          hint="0"),
    Field("limit", "memory.limit", "memory limit", hint="none"),
    Field("group", "", "Megatron group size", hint="default"),
)
FIELD_IDS: tuple[str, ...] = tuple(f.id for f in FIELDS)
BY_KEY: dict[str, Field] = {f.key: f for f in FIELDS if f.key}
PLACEMENTS = ("loop", "v", "bidirectional")

#: What an instance starts with when none is given: the article's interleaved example.
DEFAULT_VALUES: dict[str, Any] = {
    "name": "instance", "description": "", "devices": "4", "stages_per_device": "2",
    "microbatches": "8",
    "placement": "loop", "split_backward": False, "forward": "5", "backward": "10",
    "backward_input": "", "backward_weight": "", "overlap_forward_backward": "",
    "p2p_latency": "0", "activation": "1", "released_by_input": "0", "limit": "", "group": "",
}


def parse_text(text: Any) -> Any:
    """A form value as the command line reads ``--set KEY=VALUE``: TOML (``8``, ``2.5``,
    ``[1, 2]``, ``"x"``), a comma-separated list (``1, 2``), else the bare string; None for
    an empty box, ``none`` or ``null``.  Non-strings are returned unchanged."""
    if not isinstance(text, str):
        return text
    raw = text.strip()
    if raw.lower() in ("", "none", "null"):
        return None
    for candidate in (raw, f"[{raw}]") if "," in raw and not raw.startswith("[") else (raw,):
        try:
            return tomllib.loads(f"x = {candidate}")["x"]
        except tomllib.TOMLDecodeError:
            continue
    return raw


def instance_data(values: Mapping[str, Any]) -> dict[str, Any]:
    """The instance mapping (docs/spec.md §2) of form ``values``; absent keys are left out so
    their defaults apply.  Not validated."""
    data: dict[str, Any] = {"pipeline": {}, "costs": {}, "memory": {}}
    for f in FIELDS:
        if not f.key:
            continue
        raw = values.get(f.id)
        if f.id in ("name", "description"):  # strings as typed, never TOML
            value = str(raw).strip() if raw not in (None, "") else None
        else:
            value = bool(raw) if f.kind == "bool" else parse_text(raw)
        if value is None:
            continue
        section, _, leaf = f.key.rpartition(".")
        (data[section] if section else data)[leaf] = value
    data.setdefault("name", "instance")
    return data


def instance_from_values(values: Mapping[str, Any]) -> Instance:
    """Validate form ``values`` into an :class:`Instance` (tick-rounding warnings dropped:
    the form shows the values as typed).

    Raises:
        InstanceError: the first wrong field, ``FIELD = VALUE: what is allowed`` as the CLI
            prints it.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TickRoundingWarning)
        return Instance.from_dict(instance_data(values))


def group_size(values: Mapping[str, Any]) -> int | None:
    """Megatron's ``microbatch_group_size_per_vp_stage`` from the form (None: the default).

    Raises:
        InstanceError: not an integer >= 1 (field ``group``).
    """
    value = parse_text(values.get("group"))
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InstanceError("microbatch_group_size_per_vp_stage", value,
                            "an integer >= 1, or empty for the default")
    return value


def field_of(exc: InstanceError) -> str | None:
    """The form id an :class:`InstanceError` belongs next to (None: the instance as a whole,
    e.g. too many actions or ``forward + backward`` zero for a stage)."""
    if exc.field == "microbatch_group_size_per_vp_stage":
        return "group"
    f = BY_KEY.get(exc.field)
    return f.id if f else None


def _text(x: Any) -> str:
    if isinstance(x, list):
        return ", ".join(_text(y) for y in x)
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    return str(x)


def values_from_instance(inst: Instance, group: int | None = None) -> dict[str, Any]:
    """Form values showing ``inst`` (every field as the file would write it; absent optional
    fields empty) and the Megatron ``group`` size."""
    d = inst.to_dict()
    out: dict[str, Any] = {}
    for f in FIELDS:
        if not f.key:
            out[f.id] = "" if group is None else str(group)
            continue
        section, _, leaf = f.key.rpartition(".")
        value = (d.get(section, {}) if section else d).get(leaf)
        if f.kind == "bool":
            out[f.id] = bool(value)
        else:
            out[f.id] = "" if value is None else _text(value)
    return out


def query_from_values(values: Mapping[str, Any], selected: list[str] | None = None) -> str:
    """The URL query (``?devices=4&...&schedules=1f1b,gpipe``) that restores ``values`` and
    the ``selected`` schedules; empty fields are left out."""
    items: list[tuple[str, str]] = []
    for f in FIELDS:
        raw = values.get(f.id)
        if f.kind == "bool":
            if raw:
                items.append((f.id, "true"))
        elif raw not in (None, ""):
            items.append((f.id, str(raw)))
    if selected is not None:
        items.append(("schedules", ",".join(selected)))
    return "?" + urlencode(items)


def values_from_query(search: str | None, base: Mapping[str, Any]) -> tuple[dict[str, Any],
                                                                              list[str] | None]:
    """Form values from a URL query (see :func:`query_from_values`) over ``base``, and the
    selected schedules it names (None: not given).  A query naming any instance field
    replaces the whole form (fields it leaves out are empty); unknown keys are ignored."""
    pairs = parse_qsl((search or "").lstrip("?"), keep_blank_values=True)
    given = {k: v for k, v in pairs if k in FIELD_IDS}
    selected = next(([s for s in v.split(",") if s] for k, v in pairs if k == "schedules"),
                    None)
    if not given:
        return dict(base), selected
    out: dict[str, Any] = {}
    for f in FIELDS:
        raw = given.get(f.id, "")
        out[f.id] = raw.lower() in ("1", "true", "yes", "on") if f.kind == "bool" else raw
    if out["placement"] not in PLACEMENTS:
        out["placement"] = out["placement"] or "loop"
    return out, selected


def instance_from_upload(contents: str, filename: str | None) -> Instance:
    """The instance of an uploaded TOML file (a ``data:...;base64,`` URL as ``dcc.Upload``
    gives it); ``name`` defaults to the file's stem, as for a file on the command line.

    Raises:
        InstanceError: not a TOML file (field ``instance file``) or any wrong field.
    """
    shown = filename or "upload"
    try:
        payload = base64.b64decode(contents.split(",", 1)[1], validate=False)
    except (IndexError, ValueError, binascii.Error):
        raise InstanceError("instance file", shown, "an instance TOML file") from None
    if len(payload) > MAX_UPLOAD:
        raise InstanceError("instance file", shown, f"at most {MAX_UPLOAD} bytes")
    try:
        data = tomllib.loads(payload.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InstanceError("instance file", shown, f"valid TOML ({exc})") from None
    data.setdefault("name", PurePath(shown).stem or "instance")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TickRoundingWarning)
        return Instance.from_dict(data)


__all__ = [
    "DEFAULT_VALUES", "FIELDS", "FIELD_IDS", "PLACEMENTS", "Field", "field_of", "group_size",
    "instance_data", "instance_from_upload", "instance_from_values", "parse_text",
    "query_from_values", "values_from_instance", "values_from_query",
]
