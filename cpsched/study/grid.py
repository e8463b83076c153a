"""Grid files: a base instance plus a ``[grid]`` table of dotted keys → lists of values, read
into the product of instances (docs/spec.md §2 for the instance keys)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from cpsched.instance import (
    Costs,
    Instance,
    InstanceError,
    Memory,
    Pipeline,
    load_instance,
    read_toml,
)

# short names of grid keys for instance names (``base-p4-m8-lim8``)
_SHORT = {
    "pipeline.devices": "p", "pipeline.stages_per_device": "v",
    "pipeline.microbatches": "m", "pipeline.placement": "", "pipeline.split_backward": "split",
    "costs.forward": "F", "costs.backward": "B", "costs.backward_input": "I",
    "costs.backward_weight": "W", "costs.overlap_forward_backward": "ov",
    "costs.p2p_latency": "lat", "memory.activation": "act",
    "memory.released_by_input": "r", "memory.limit": "lim",
}
_SECTIONS: dict[str, Any] = {"pipeline": Pipeline, "costs": Costs, "memory": Memory}


def fmt_value(x: Any) -> str:
    """A value as it appears in instance names and peak lists: ``none``, ``1``/``0`` for
    booleans, integral floats without decimals, lists joined by ``_``."""
    if x is None:
        return "none"
    if isinstance(x, bool):
        return "1" if x else "0"
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    if isinstance(x, list):
        return "_".join(fmt_value(y) for y in x)
    return str(x)


def _grid_value(x: Any) -> Any:
    """TOML has no null: the string ``"none"`` stands for "absent" (e.g. no memory limit)."""
    return None if isinstance(x, str) and x.lower() in ("none", "null") else x


def _check_grid_key(key: str, values: Any) -> None:
    parts = key.split(".")
    if len(parts) == 1 and parts[0] in ("name", "description"):
        pass
    elif len(parts) != 2 or parts[0] not in _SECTIONS or (
            parts[1] not in _SECTIONS[parts[0]].model_fields):
        allowed = [f"{sec}.{f}" for sec, cls in _SECTIONS.items() for f in cls.model_fields]
        raise InstanceError(f"grid.{key}", values,
                            "unknown key; a grid varies dotted instance keys: "
                            + ", ".join(allowed))
    if not isinstance(values, list) or not values:
        raise InstanceError(f"grid.{key}", values,
                            'a non-empty list of values, e.g. "pipeline.devices" = [4, 8]')


def _base_instance(gpath: Path, data: dict[str, Any]) -> dict[str, Any]:
    """The grid file's base instance as a mapping: ``base = "path.toml"`` (relative to the
    grid file) amended by the file's own tables, or the file's own tables alone."""
    base_ref = data.pop("base", None)
    if base_ref is None:
        base = dict(data)
        base.setdefault("name", gpath.stem)
        return base
    if not isinstance(base_ref, str):
        raise InstanceError("base", base_ref, "a path to an instance TOML file")
    bpath = gpath.parent / base_ref
    if not bpath.is_file():
        raise InstanceError("base", base_ref,
                            f"an instance file relative to the grid file ({bpath})")
    base = load_instance(bpath).to_dict()
    for key, val in data.items():  # the grid file's own fields amend the base
        if isinstance(val, dict) and isinstance(base.get(key), dict):
            base[key] = {**base[key], **val}
        else:
            base[key] = val
    return base


def load_grid(path: str | Path, skipped: list[tuple[str, str]] | None = None
              ) -> list[Instance]:
    """Instances from a grid file: the product of the ``[grid]`` values over a base instance.

    The file is an instance file (docs/spec.md §2) plus a ``[grid]`` table of dotted keys →
    lists of values, or ``base = "path.toml"`` (relative to the grid file) whose instance the
    file's own tables, if any, amend::

        base = "../article-interleaved.toml"
        [grid]
        "pipeline.devices" = [4, 8]
        "pipeline.microbatches" = [8, 16]
        "memory.limit" = [8, "none"]      # "none": no limit (TOML has no null)
        "costs.backward" = [10, 20]       # cost ratios F:B = 1:2 and 1:4

    Instances come in product order (the first key varies slowest) and are named after the
    base instance and the keys that take more than one value: ``article-p4-m8-lim8``
    (``p v m F B I W lat lim act r ov split``; a placement appears as its value).

    Args:
        path: the grid TOML file.
        skipped: invalid combinations raise by default; pass a list to skip them instead,
            and ``(name, reason)`` is appended to it for each one skipped.

    Returns:
        The validated instances, at least one.

    Raises:
        InstanceError: the file is missing or not TOML; ``base`` is not a file; ``[grid]`` is
            missing, has an unknown key or a value that is not a non-empty list (field
            ``grid.KEY``); a combination is invalid and ``skipped`` is None (field
            ``grid[KEY=VALUE, ...].FIELD`` naming the combination and the wrong field); every
            combination was skipped.
    """
    gpath = Path(path)
    data = read_toml(gpath, "grid file")
    grid = data.pop("grid", None)
    if not isinstance(grid, dict) or not grid:
        raise InstanceError("grid", grid, 'a [grid] table of dotted keys -> lists of values, '
                            'e.g. "pipeline.devices" = [4, 8]')
    base = _base_instance(gpath, data)
    for key, values in grid.items():
        _check_grid_key(key, values)
    keys = list(grid)
    varied = [k for k in keys if len(grid[k]) > 1]
    out: list[Instance] = []
    names: set[str] = set()
    base_name = str(base.get("name", gpath.stem))
    for combo in itertools.product(*(grid[k] for k in keys)):
        assign = {k: _grid_value(v) for k, v in zip(keys, combo, strict=True)}
        label = ", ".join(f"{k}={fmt_value(v)}" for k, v in assign.items())
        name = "-".join([base_name] + [_SHORT.get(k, k.split(".")[-1]) + fmt_value(assign[k])
                                       for k in varied])
        if name in names:
            name = f"{name}-{len(out)}"
        names.add(name)
        try:
            inst = load_instance(None, {**assign, "name": assign.get("name", name)},
                                 base=base)
        except InstanceError as exc:
            if skipped is None:
                raise InstanceError(f"grid[{label}].{exc.field}", exc.value,
                                    exc.allowed) from None
            skipped.append((name, str(exc)))
            continue
        out.append(inst)
    if not out:
        raise InstanceError("grid", grid, "at least one valid combination (all were skipped: "
                            + "; ".join(r for _, r in (skipped or [])[:3]) + ")")
    return out
