"""What the page shows for an instance, computed without Dash: the schedule cards with the
reason a schedule does not apply, the known schedules timed (cached, so moving back to a
setting is instant), the comparison table and the files offered for download.

An instance travels through the page as its canonical JSON text (:func:`instance_key`, the
``instance`` field of a schedule file, docs/spec.md §3); everything derived from it is a pure
function of that text, so tabs share the caches but never each other's state.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from cpsched.instance import Instance
from cpsched.model import Schedule
from cpsched.schedules import REGISTRY, NotApplicable, get_schedule
from cpsched.simulate import simulate
from cpsched.validate import validate

#: The schedule that takes Megatron's group size (``microbatch_group_size_per_vp_stage``).
GROUPED = "interleaved-1f1b"
#: Schedules selected when the page opens (those that apply).
DEFAULT_SELECTION = ("gpipe", "1f1b", "interleaved-1f1b", "zbv", "dualpipe")


def instance_key(inst: Instance) -> str:
    """The instance as canonical JSON text (sorted keys): the page's handle on it."""
    return json.dumps(inst.to_dict(), sort_keys=True)


@lru_cache(maxsize=64)
def instance_of(key: str) -> Instance:
    """The instance of :func:`instance_key` text (validated once, then cached)."""
    return Instance.from_dict(json.loads(key))


@dataclass(frozen=True)
class Card:
    """One registered schedule as the page shows it: ``reason`` is None when it applies."""

    name: str
    summary: str
    reason: str | None


def cards(inst: Instance, group: int | None = None) -> list[Card]:
    """Every registered schedule in registry order, with why it does not apply to ``inst``
    (its precondition check; for :data:`GROUPED` with a ``group`` size, also Megatron's rule
    on that size)."""
    out = []
    for spec in REGISTRY.values():
        reason = spec.reason_not_applicable(inst)
        if reason is None and spec.name == GROUPED and group is not None:
            try:
                _orders(instance_key(inst), spec.name, group)
            except NotApplicable as exc:
                reason = str(exc).removeprefix(f"{spec.name}: ")
        out.append(Card(spec.name, spec.summary, reason))
    return out


def default_selection(inst: Instance) -> list[str]:
    """The schedules selected at first: those of :data:`DEFAULT_SELECTION` that apply, or
    else the first applicable one."""
    ok = [c.name for c in cards(inst) if c.reason is None]
    chosen = [n for n in DEFAULT_SELECTION if n in ok]
    return chosen or ok[:1]


@lru_cache(maxsize=256)
def _orders(key: str, name: str, group: int | None) -> object:
    inst = instance_of(key)
    if name == GROUPED and group is not None:
        from cpsched.schedules.basic import interleaved_1f1b

        return interleaved_1f1b(inst, microbatch_group_size_per_vp_stage=group)
    return get_schedule(name).orders(inst)


def label(name: str, group: int | None) -> str:
    """The schedule's name on the page (``interleaved-1f1b g=4`` with a group size)."""
    return f"{name} g={group}" if name == GROUPED and group is not None else name


@lru_cache(maxsize=256)
def known(key: str, name: str, group: int | None = None) -> Schedule:
    """The registered schedule ``name`` on the instance ``key``, timed by the simulator
    (status ``HEURISTIC``), with the bound ``cpsched simulate`` reports (docs/spec.md §5).

    Raises:
        NotApplicable: its preconditions fail; ValueError: unknown name.
    """
    from cpsched.graph import overlap_lower_bound

    inst = instance_of(key)
    schedule = simulate(inst, _orders(key, name, group), method=name)  # type: ignore[arg-type]
    schedule.lower_bound = inst.from_ticks(overlap_lower_bound(inst))
    return schedule


@lru_cache(maxsize=256)
def violations_of(key: str, name: str, group: int | None = None) -> tuple[str, ...]:
    """The validator's findings on :func:`known` (empty: valid)."""
    return tuple(validate(known(key, name, group)))


def improvement(best: float, optimum: float) -> float:
    """How much shorter the optimum is than ``best``: ``(best - optimum) / best`` (0 when
    ``best`` is 0)."""
    return 0.0 if best <= 0 else (best - optimum) / best


def schedule_file(schedule: Schedule, what: str) -> tuple[str, bytes]:
    """A file to download: ``what`` is ``json`` (docs/spec.md §3), ``csv`` (PyTorch action
    CSV, docs/torch.md), ``png`` or ``svg`` (Gantt chart and memory, as ``cpsched solve``
    draws them).  Returns (file name, content).

    Raises:
        cpsched.torch_io.TorchCsvError: a CSV of a bidirectional schedule.
        ValueError: unknown ``what``.
    """
    stem = f"{schedule.instance.name}-{schedule.method}".replace(" ", "-")
    if what == "json":
        return f"{stem}.json", (schedule.to_json() + "\n").encode()
    if what == "csv":
        from cpsched.torch_io import to_torch_csv

        return f"{stem}.csv", to_torch_csv(schedule).encode()
    if what in ("png", "svg"):
        from cpsched import plots

        with tempfile.TemporaryDirectory(prefix="cpsched-serve-") as tmp:
            path = Path(tmp) / f"{stem}.{what}"
            plots.gantt_and_memory(schedule, path, dpi=110)
            return path.name, path.read_bytes()
    raise ValueError(f"download {what!r}: one of json, csv, png, svg")


__all__ = ["DEFAULT_SELECTION", "GROUPED", "Card", "cards", "default_selection",
           "improvement", "instance_key", "instance_of", "known", "label", "schedule_file",
           "violations_of"]
