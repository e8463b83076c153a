"""A measured run, read: trace files → pipeline shape → one clock → measured schedule, derived
instance, validation, and the measured order replayed on the measured costs (docs/trace.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cpsched.actions import TimedAction
from cpsched.instance import Instance
from cpsched.model import Schedule, Status
from cpsched.trace.align import ALIGN_MODES, Aligned, Gap, align
from cpsched.trace.chrome import read_chrome
from cpsched.trace.costs import RESOLUTION_MS, Latency, Stat, derive_instance, measured_pairs
from cpsched.trace.errors import TraceError
from cpsched.trace.megatron import megatron_files, read_megatron
from cpsched.trace.shape import Shape, pipeline_shape
from cpsched.trace.spans import RawTrace

FORMATS = ("auto", "pytorch", "megatron")

#: A file in a trace directory that is not a rank's trace (written by examples/run_torch.py).
META_FILE = "trace-meta.json"


@dataclass
class TraceImport:
    """Everything learnt from one measured step.

    Attributes:
        raw: the trace as read.
        shape: its pipeline.
        aligned: its actions on one clock (ms from the first start), offsets and skew.
        instance: the derived instance (medians, latency; docs/trace.md).
        stats: duration statistics per stage and kind (ms).
        latency: the p2p latency estimate.
        measured: the measured schedule (method ``"measured"``) on ``instance``.
        violations: what the validator finds on ``measured`` with durations as measured and
            no p2p lag, apart from the dependencies listed in ``aligned.skew``.
        replay: the measured per-device orders simulated on ``instance`` (method
            ``"measured-order"``).
        notes: what was assumed or left out.
    """

    raw: RawTrace
    shape: Shape
    aligned: Aligned
    instance: Instance
    stats: list[Stat]
    latency: Latency
    measured: Schedule
    violations: list[str]
    replay: Schedule
    notes: list[str] = field(default_factory=list)


def _trace_files(paths: Sequence[str | Path]) -> list[Path]:
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(q for q in p.iterdir() if q.name != META_FILE and (
                q.name.endswith(".json") or q.name.endswith(".json.gz")))
        elif p.is_file():
            out.append(p)
        else:
            raise TraceError(str(p), "", "no such file or directory")
    return out


def read_trace(paths: Sequence[str | Path], fmt: str = "auto", step: int | None = None,
               to_ms: float | None = None) -> RawTrace:
    """Read the trace files of one run.

    Args:
        paths: files, or directories holding them (one file per pipeline rank).
        fmt: ``"pytorch"`` (PyTorch profiler Chrome traces), ``"megatron"`` (Megatron-LM
            timer files) or ``"auto"`` (Megatron when the names say so).
        step: which training step of a multi-step trace (0-based; None: the last).
        to_ms: ms per unit of the files' times (default: µs for PyTorch, ms for Megatron).

    Raises:
        TraceError: naming the file and the entry at fault.
    """
    if fmt not in FORMATS:
        raise TraceError(", ".join(map(str, paths)), "", f"format {fmt!r}: one of "
                         + ", ".join(FORMATS))
    files = _trace_files(paths)
    if not files:
        raise TraceError(", ".join(map(str, paths)), "", "no trace files (.json or .json.gz: "
                         "one PyTorch profiler trace or Megatron event_times_*.json per rank)")
    if fmt == "megatron" or (fmt == "auto" and any(
            q.name.startswith("event_times_") for q in files)):
        if step not in (None, 0):
            raise TraceError(str(files[0]), "", "a Megatron timer file holds one step")
        return read_megatron(megatron_files(paths), 1.0 if to_ms is None else to_ms)
    raw = read_chrome(files, step)
    if to_ms is not None:
        raw.to_ms = to_ms
    return raw


def _schedule(shape: Shape, aligned: Aligned, inst: Instance) -> Schedule:
    pairs = measured_pairs(shape)
    rows = [TimedAction(shape.device_of(a.stage), a.stage, a.microbatch, a.kind,
                        *aligned.times[a], pairs.get(a)) for a in shape.spans]
    return Schedule(inst, rows, method="measured", status=Status.HEURISTIC)


def _skew_line(text: str, skew: list[Gap]) -> bool:
    """Whether a validator message is one of the dependencies listed as clock skew."""
    return any(text.startswith(f"{g.consumer} starts at") and f"before {g.producer} ends at"
               in text for g in skew)


def analyse(raw: RawTrace, *, align_mode: str = "auto", name: str = "measured",
            overrides: dict[str, Any] | None = None,
            resolution: float = RESOLUTION_MS) -> TraceImport:
    """Turn a read trace into the measured schedule, the derived instance and the replay.

    Args:
        align_mode: ``"auto"`` (keep the clocks when the files come from one host, else
            ``"deps"``), ``"none"`` or ``"deps"`` (:mod:`~cpsched.trace.align`).
        name: the derived instance's name.
        overrides: dotted instance keys set on the derived instance (e.g. a memory limit).
        resolution: ms the derived costs are rounded to.

    Raises:
        TraceError: the trace is not one complete pipeline step.
        InstanceError: an override is wrong.
        ValueError: an unknown ``align_mode``.
    """
    from cpsched.simulate import simulate
    from cpsched.validate import validate

    if align_mode not in ALIGN_MODES:
        raise ValueError(f"align {align_mode!r}: one of " + ", ".join(ALIGN_MODES))
    shape = pipeline_shape(raw)
    mode = ("none" if raw.same_clock else "deps") if align_mode == "auto" else align_mode
    aligned = align(shape, raw.to_ms, mode)
    k, n = raw.step
    desc = (f"measured: {raw.source} trace of {raw.p} ranks, step {k + 1} of {n}; costs are "
            "medians in ms (cpsched import-trace)")
    inst, stats, lat, notes = derive_instance(shape, aligned, name, desc, overrides, resolution)
    measured = _schedule(shape, aligned, inst)
    lagless = inst.replace(**{"costs.p2p_latency": 0})
    found = validate(measured, lagless, max_violations=10**6, durations="as-given")
    violations = [v for v in found if not _skew_line(v, aligned.skew)]
    replay = simulate(inst, measured.orders(), method="measured-order")
    return TraceImport(raw, shape, aligned, inst, stats, lat, measured, violations, replay,
                       raw.notes + notes)


def import_trace(paths: Sequence[str | Path], *, fmt: str = "auto", step: int | None = None,
                 align_mode: str = "auto", name: str = "measured",
                 overrides: dict[str, Any] | None = None,
                 resolution: float = RESOLUTION_MS) -> TraceImport:
    """:func:`read_trace` then :func:`analyse` (the library form of ``cpsched import-trace``).

    Raises:
        TraceError, InstanceError, ValueError: as those two.
    """
    return analyse(read_trace(paths, fmt, step), align_mode=align_mode, name=name,
                   overrides=overrides, resolution=resolution)


__all__ = ["FORMATS", "META_FILE", "TraceImport", "analyse", "import_trace", "read_trace"]
