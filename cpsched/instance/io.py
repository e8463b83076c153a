"""Reading instance files: TOML parsing, overrides, validation (docs/spec.md §2)."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cpsched.instance.errors import InstanceError
from cpsched.instance.model import Instance
from cpsched.instance.overrides import parse_override, set_dotted


def read_toml(path: str | Path, what: str = "instance file") -> dict[str, Any]:
    """Parse a TOML file into a dict.

    Raises:
        InstanceError: naming ``what`` when the file is missing or not valid TOML.
    """
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
        path: TOML file (``name`` defaults to its stem), or None to start from ``base`` (an
            instance from flags alone; ``name`` defaults to ``"instance"``).
        overrides: ``["pipeline.microbatches=16", ...]`` or ``{"pipeline.microbatches": 16}``.
        base: a starting mapping when ``path`` is None.

    Raises:
        InstanceError: file missing or not TOML, an override with an unknown top-level key,
            or any wrong field.
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
    top_level = list(Instance.model_fields)
    for key, value in items:
        if key.split(".")[0] not in top_level:
            raise InstanceError(key, value, "unknown key; top-level keys: "
                                + ", ".join(top_level))
        set_dotted(data, key, value)
    return Instance.from_dict(data)
