"""``KEY=VALUE`` overrides (``--set``) and setting dotted keys in an instance mapping."""

from __future__ import annotations

import tomllib
from typing import Any

from cpsched.instance.errors import InstanceError


def set_dotted(d: dict[str, Any], key: str, value: Any) -> None:
    """Set ``d[a][b] = value`` for ``key = "a.b"`` in place, creating missing tables.

    A value of None removes the key instead (so that its default applies).
    """
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

    Returns:
        ``(key, value)``; value None for ``none``, ``null`` or an empty value.

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
