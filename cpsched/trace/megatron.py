"""Megatron-LM pipeline-timer dumps (docs/trace.md), in the format the pipeline-schedule
visualizer imports (docs/references.md#ppviz).

One JSON file per rank, named
``event_times_PP{p}_VPP{v}_TPxCPxDP_rank_{r}_pp_rank_{pp}_rank_{g}.json``; only the files of
``TPxCPxDP`` rank 0 are read (the other tensor/context/data-parallel ranks repeat the same
pipeline).  Each file is one JSON object mapping event names to times:
``forward-{mb}-start``, ``forward-{mb}-end``, ``backward-{mb}-start``, ``backward-{mb}-end``
with ``VPP1``, and ``forward-{chunk}-{mb}-start`` ... with virtual stages (``VPP`` > 1), where
chunk ``c`` of pipeline rank ``r`` is stage ``p * c + r`` (Megatron's interleaved, "loop"
placement).  A backward is a full backward (``B``).  Times are read in milliseconds unless
told otherwise.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cpsched.actions import Action, Kind
from cpsched.trace.errors import TraceError
from cpsched.trace.spans import RawTrace, Span

FILE_PATTERN = re.compile(
    r"event_times_PP(\d+)_VPP(\d+)_TPxCPxDP_rank_(\d+)_pp_rank_(\d+)_rank_(\d+)\.json")
FILE_FORM = "event_times_PP{p}_VPP{v}_TPxCPxDP_rank_{r}_pp_rank_{pp}_rank_{g}.json"
_KEY_PP = re.compile(r"(forward|backward)-(\d+)-(start|end)")
_KEY_VPP = re.compile(r"(forward|backward)-(\d+)-(\d+)-(start|end)")


def megatron_files(paths: Sequence[str | Path]) -> list[Path]:
    """The Megatron timer files among ``paths`` (files, or directories searched for
    ``event_times_*.json``)."""
    out: list[Path] = []
    for p in map(Path, paths):
        out += sorted(p.glob("event_times_*.json")) if p.is_dir() else [p]
    return out


def _parse_name(path: Path) -> tuple[int, int, int, int]:
    """(PP, VPP, TPxCPxDP rank, pp_rank) from the file name."""
    m = FILE_PATTERN.fullmatch(path.name)
    if not m:
        raise TraceError(str(path), "", f"not a Megatron timer file name; expected {FILE_FORM}")
    pp, vpp, tcd, pp_rank, _ = (int(x) for x in m.groups())
    if pp < 1 or vpp < 1:
        raise TraceError(str(path), "", f"PP{pp}_VPP{vpp}: both must be >= 1")
    if pp_rank >= pp:
        raise TraceError(str(path), "", f"pp_rank {pp_rank}: PP{pp} has pp ranks 0..{pp - 1}")
    return pp, vpp, tcd, pp_rank


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_bytes().decode("utf-8-sig"))
    except OSError as exc:
        raise TraceError(str(path), "", f"cannot read it ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise TraceError(str(path), "", f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise TraceError(str(path), "", "must be a JSON object of event name -> time")
    return data


def _events(path: Path, vpp: int) -> dict[tuple[str, int, int], dict[str, float]]:
    """``{(direction, chunk, mb): {"start": t, "end": t}}`` of one file.

    Raises:
        TraceError: an unknown key, a chunk outside ``0..VPP-1``, a time that is not a finite
            number.
    """
    file = str(path)
    out: dict[tuple[str, int, int], dict[str, float]] = {}
    form = "forward-{mb}-start" if vpp == 1 else "forward-{chunk}-{mb}-start"
    for key, value in _read_json(path).items():
        entry = f"key {key!r}"
        m = (_KEY_PP if vpp == 1 else _KEY_VPP).fullmatch(key)
        if not m:
            raise TraceError(file, entry, f"unknown event; with VPP{vpp} the keys are {form}, "
                             "-end, and backward-... the same way")
        if vpp == 1:
            direction, chunk, mb, edge = m.group(1), 0, int(m.group(2)), m.group(3)
        else:
            direction, chunk, mb, edge = m.group(1), int(m.group(2)), int(m.group(3)), \
                m.group(4)
            if chunk >= vpp:
                raise TraceError(file, entry, f"chunk {chunk}: VPP{vpp} has chunks "
                                 f"0..{vpp - 1}")
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(
                value):
            raise TraceError(file, entry, f"= {value!r}: must be a finite number (ms)")
        out.setdefault((direction, chunk, mb), {})[edge] = float(value)
    return out


def _key(direction: str, chunk: int, mb: int, edge: str, vpp: int) -> str:
    return f"{direction}-{mb}-{edge}" if vpp == 1 else f"{direction}-{chunk}-{mb}-{edge}"


def _rank_spans(path: Path, pp: int, vpp: int, pp_rank: int, m: int,
                events: dict[tuple[str, int, int], dict[str, float]]) -> list[Span]:
    """The spans of one rank; every forward and backward of its chunks must be there."""
    file = str(path)
    spans = []
    for chunk in range(vpp):
        for mb in range(m):
            for direction, kind in (("forward", Kind.F), ("backward", Kind.B)):
                ev = events.get((direction, chunk, mb), {})
                for edge in ("start", "end"):
                    if edge not in ev:
                        other = "end" if edge == "start" else "start"
                        what = (f"has {_key(direction, chunk, mb, other, vpp)!r} but not this "
                                "one (unmatched start/end)" if other in ev else
                                f"missing: microbatches 0..{m - 1} appear in the trace")
                        raise TraceError(file, f"key {_key(direction, chunk, mb, edge, vpp)!r}",
                                         what)
                if ev["end"] < ev["start"]:
                    raise TraceError(file, f"key {_key(direction, chunk, mb, 'end', vpp)!r}",
                                     f"ends at {ev['end']} before it starts at {ev['start']}")
                spans.append(Span(pp_rank, (Action(kind, pp * chunk + pp_rank, mb),),
                                  ev["start"], ev["end"], 0.0, file,
                                  f"key {_key(direction, chunk, mb, 'start', vpp)!r}"))
    return spans


def read_megatron(paths: Sequence[str | Path], to_ms: float = 1.0) -> RawTrace:
    """Read Megatron-LM timer files, one per pipeline rank.

    Args:
        paths: the files, or a directory holding them.
        to_ms: milliseconds per time unit of the files (1: they are in ms).

    Returns:
        The compute spans per pipeline rank, on each rank's clock (file units).

    Raises:
        TraceError: a wrong file name, files of different PP/VPP, a pp rank missing or
            given twice, an unknown key, an unmatched start/end, a missing microbatch.
    """
    files = megatron_files(paths)
    where = ", ".join(str(p) for p in paths) or "."
    if not files:
        raise TraceError(where, "", f"no Megatron timer files ({FILE_FORM})")
    shape: tuple[int, int] | None = None
    by_rank: dict[int, Path] = {}
    skipped = 0
    for path in files:
        pp, vpp, tcd, pp_rank = _parse_name(path)
        if shape is not None and (pp, vpp) != shape:
            raise TraceError(str(path), "", f"PP{pp}_VPP{vpp}, but {by_rank[min(by_rank)]} "
                             f"is PP{shape[0]}_VPP{shape[1]}: one run at a time")
        shape = (pp, vpp)
        if tcd != 0:
            skipped += 1
            continue
        if pp_rank in by_rank:
            raise TraceError(str(path), "", f"pp_rank {pp_rank} again (also {by_rank[pp_rank]})")
        by_rank[pp_rank] = path
    assert shape is not None
    pp, vpp = shape
    missing = [r for r in range(pp) if r not in by_rank]
    if missing:
        raise TraceError(where, "", f"pp_rank {missing[0]} missing: PP{pp} needs the "
                         f"TPxCPxDP rank 0 file of every pp rank 0..{pp - 1}; found "
                         f"{sorted(by_rank)}")
    events = {r: _events(path, vpp) for r, path in by_rank.items()}
    m = 1 + max((mb for ev in events.values() for (_, _, mb) in ev), default=-1)
    if m == 0:
        raise TraceError(str(by_rank[0]), "", "no forward/backward events")
    spans = [s for r, path in sorted(by_rank.items())
             for s in _rank_spans(path, pp, vpp, r, m, events[r])]
    notes = [f"{skipped} file(s) of TPxCPxDP ranks > 0 not read (they repeat the pipeline)"
             ] if skipped else []
    return RawTrace("megatron", {r: str(p) for r, p in by_rank.items()}, spans, to_ms,
                    False, (0, 1), notes)


__all__ = ["FILE_FORM", "FILE_PATTERN", "megatron_files", "read_megatron"]
