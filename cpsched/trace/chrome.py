"""PyTorch profiler Chrome traces of a ``torch.distributed.pipelining`` run (docs/trace.md).

PyTorch 2.13's ``_PipelineScheduleRuntime._step_microbatches`` runs every action of a rank's
order inside ``record_function(f"PP:{action}")`` (docs/references.md#pytorch), so a trace
written by ``torch.profiler.profile(...).export_chrome_trace(path)`` on each rank holds one
range per action: compute ``PP:1F0``, ``PP:0B3``, ``PP:2I1``, ``PP:2W1``, overlapped pairs
``PP:(0F7;7B3)OVERLAP_F_B``, communication ``PP:1RECV_F0``, ``PP:0SEND_B2`` and bookkeeping
``PP:0UNSHARD``, ``PP:0RESHARD``, ``PP:0REDUCE_GRAD``.  Ranges are complete events (``"ph":
"X"``, ``ts`` and ``dur`` in microseconds) or ``B``/``E`` pairs.

A compute range starts by waiting for its input (the runtime waits on the receive posted by
the matching ``RECV_F``/``RECV_B`` action).  The gloo backend records each receive as a
``gloo:recv`` range that ends when the data is there; when the trace has it, the action's
start is moved to that moment and the time before counts as waiting, not computing.
"""

from __future__ import annotations

import bisect
import gzip
import json
import math
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cpsched.actions import Action, Kind
from cpsched.trace.errors import TraceError
from cpsched.trace.spans import RawTrace, Span

_COMPUTE = re.compile(r"(\d+)([FBIW])(\d+)")
_COMM = re.compile(r"(\d+)(SEND_F|RECV_F|SEND_B|RECV_B)(\d+)")
_OTHER = re.compile(r"(\d+)(UNSHARD|RESHARD|REDUCE_GRAD)")
_PAIR = re.compile(r"\((.*)\)OVERLAP_F_B")
_RANK_IN_NAME = re.compile(r"rank[_-]?(\d+)", re.IGNORECASE)
#: A backend's receive range (``gloo:recv``), which ends when the data has arrived.
_BACKEND_RECV = re.compile(r"[A-Za-z]+:recv")

ALLOWED = ("{stage}{F|B|I|W}{mb}, ({F};{B or I})OVERLAP_F_B, {stage}{SEND_F|RECV_F|SEND_B|"
           "RECV_B}{mb}, {stage}{UNSHARD|RESHARD|REDUCE_GRAD}")


@dataclass(frozen=True)
class _Range:
    """One ``PP:`` range: its name without ``PP:``, the compute actions it holds (none for
    communication and bookkeeping), the receive it is (``("RECV_F", stage, mb)``), times."""

    name: str
    actions: tuple[Action, ...]
    recv: tuple[str, int, int] | None
    start: float
    end: float
    entry: str


def parse_action_name(name: str, file: str, entry: str
                      ) -> tuple[tuple[Action, ...], tuple[str, int, int] | None]:
    """The compute actions of a ``PP:`` range name (without the prefix) and, for a receive,
    ``(RECV_F|RECV_B, stage, microbatch)``.

    Raises:
        TraceError: a name PyTorch's runtime does not emit, or a pair that is not one F with
            one B or I.
    """
    if m := _COMPUTE.fullmatch(name):
        return (Action(Kind(m.group(2)), int(m.group(1)), int(m.group(3))),), None
    if m := _COMM.fullmatch(name):
        recv = (m.group(2), int(m.group(1)), int(m.group(3)))
        return (), recv if m.group(2).startswith("RECV") else None
    if _OTHER.fullmatch(name):
        return (), None
    if m := _PAIR.fullmatch(name):
        parts = [p.strip() for p in m.group(1).split(";")]
        subs = [_COMPUTE.fullmatch(p) for p in parts]
        acts = [Action(Kind(s.group(2)), int(s.group(1)), int(s.group(3))) for s in subs if s]
        kinds = sorted(str(a.kind) for a in acts)
        if len(acts) != 2 or len(parts) != 2 or kinds[1] != "F" or kinds[0] not in "BI":
            raise TraceError(file, entry, "an overlapped pair must hold one F and one B or I, "
                             "e.g. PP:(0F7;7B3)OVERLAP_F_B")
        acts.sort(key=lambda a: a.kind != Kind.F)
        return tuple(acts), None
    raise TraceError(file, entry, f"unknown pipeline action 'PP:{name}'; the runtime emits "
                     f"PP: followed by {ALLOWED}")


def _load(path: Path) -> Any:
    """The JSON document of a (possibly gzipped) trace file."""
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        return json.loads(raw.decode("utf-8-sig"))
    except OSError as exc:
        raise TraceError(str(path), "", f"cannot read it ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, ValueError, RecursionError, EOFError) as exc:
        raise TraceError(str(path), "", f"not a JSON trace ({exc})") from None


def _number(ev: dict[str, Any], key: str, file: str, entry: str) -> float:
    x = ev.get(key)
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
        raise TraceError(file, entry, f"'{key}' = {x!r}: must be a finite number (µs)")
    return float(x)


def _rank_of(doc: Any, path: Path) -> int:
    info = doc.get("distributedInfo") if isinstance(doc, dict) else None
    if isinstance(info, dict) and isinstance(info.get("rank"), int):
        return int(info["rank"])
    found = _RANK_IN_NAME.findall(path.name)
    if found:
        return int(found[-1])
    raise TraceError(str(path), "", "which rank? the trace has no distributedInfo.rank and "
                     "the file name no 'rank{r}' (name it e.g. rank0.json)")


def _events(doc: Any, file: str) -> list[Any]:
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise TraceError(file, "traceEvents", "missing: a Chrome trace is a JSON object with "
                         "a traceEvents list (torch.profiler's export_chrome_trace)")
    return events


def _ranges(events: list[Any], file: str) -> tuple[list[_Range], list[tuple[float, float]]]:
    """The ``PP:`` ranges of one file (complete events and ``B``/``E`` pairs) and the
    receive ranges of the backend (``gloo:recv``: start, end) sorted by start."""
    out: list[_Range] = []
    recvs: list[tuple[float, float]] = []
    open_: dict[tuple[Any, Any], list[tuple[str, float, str]]] = defaultdict(list)
    for k, ev in enumerate(events):
        if not isinstance(ev, dict) or not isinstance(ev.get("name"), str):
            continue
        name, ph = ev["name"], ev.get("ph")
        entry = f"traceEvents[{k}] {name!r}"
        if not name.startswith("PP:"):
            if ph == "X" and _BACKEND_RECV.fullmatch(name):
                t = _number(ev, "ts", file, entry)
                recvs.append((t, t + _number(ev, "dur", file, entry)))
            continue
        if ph == "X":
            t = _number(ev, "ts", file, entry)
            dur = _number(ev, "dur", file, entry)
            if dur < 0:
                raise TraceError(file, entry, f"'dur' = {dur}: must be >= 0")
            out.append(_make(name[3:], t, t + dur, file, entry))
        elif ph == "B":
            open_[(ev.get("pid"), ev.get("tid"))].append((name, _number(ev, "ts", file, entry),
                                                          entry))
        elif ph == "E":
            stack = open_[(ev.get("pid"), ev.get("tid"))]
            if not stack:
                raise TraceError(file, entry, "an end ('ph': 'E') without its begin")
            bname, t0, bentry = stack.pop()
            out.append(_make(bname[3:], t0, _number(ev, "ts", file, entry), file, bentry))
    for stack in open_.values():
        if stack:
            raise TraceError(file, stack[-1][2], "a begin ('ph': 'B') without its end")
    recvs.sort()
    return out, recvs


def _make(name: str, start: float, end: float, file: str, entry: str) -> _Range:
    if end < start:
        raise TraceError(file, entry, f"ends at {end} before it starts at {start}")
    actions, recv = parse_action_name(name, file, entry)
    return _Range(name, actions, recv, start, end, entry)


def _step_count(ranges: list[_Range], file: str) -> tuple[int, dict[str, list[_Range]]]:
    """How many training steps the file holds (each compute range once per step), and the
    ranges by name in time order.

    Raises:
        TraceError: compute ranges occur different numbers of times (a partial step).
    """
    by_name: dict[str, list[_Range]] = defaultdict(list)
    for r in sorted(ranges, key=lambda r: r.start):
        by_name[r.name].append(r)
    counts = Counter(len(occ) for occ in by_name.values() if occ[0].actions)
    if not counts:
        raise TraceError(file, "", "no compute range (PP:{stage}{F|B|I|W}{mb}) in the trace: "
                         "profile a step of _PipelineScheduleRuntime with CPU activity")
    n = counts.most_common(1)[0][0]
    for name, occ in by_name.items():
        if occ[0].actions and len(occ) != n:
            raise TraceError(file, occ[-1].entry, f"PP:{name} appears {len(occ)} times, the "
                             f"other compute actions {n} times: a partial or mixed step")
    return n, by_name


def _arrival(recvs: list[tuple[float, float]], rng: _Range) -> float | None:
    """When the receive posted in ``rng`` completed: the latest end of a backend receive
    range that starts inside it (None when the trace has none)."""
    starts = [r[0] for r in recvs]
    lo = bisect.bisect_left(starts, rng.start)
    hi = bisect.bisect_right(starts, rng.end)
    ends = [recvs[k][1] for k in range(lo, hi)]
    return max(ends) if ends else None


def _file_spans(path: Path, step: int | None
                ) -> tuple[int, list[Span], int, bool, Any, float]:
    """One rank's spans of the chosen step: (rank, spans, steps in file, whether receive
    completions were seen, the document, time in the step's other ``PP:`` ranges)."""
    file = str(path)
    doc = _load(path)
    rank = _rank_of(doc, path)
    ranges, recvs = _ranges(_events(doc, file), file)
    n, by_name = _step_count(ranges, file)
    k = n - 1 if step is None else step
    if not 0 <= k < n:
        raise TraceError(file, "", f"--step {k + 1}: the trace holds {n} step(s)")
    arrivals: dict[tuple[str, int, int], float] = {}
    overhead = 0.0
    for occ in by_name.values():
        r = occ[k] if len(occ) == n else None
        if r is not None and not r.actions:
            overhead += r.end - r.start
        if r is not None and r.recv is not None:
            t = _arrival(recvs, r)
            if t is not None:
                arrivals[r.recv] = t
    spans = []
    for occ in by_name.values():
        r = occ[k]
        if not r.actions:
            continue
        ready = max((arrivals.get(key, -math.inf) for a in r.actions
                     for key in [("RECV_F" if a.kind == Kind.F else "RECV_B", a.stage,
                                  a.microbatch)]), default=-math.inf)
        start = ready if r.start < ready <= r.end else r.start
        spans.append(Span(rank, r.actions, start, r.end, start - r.start, file, r.entry))
    return rank, spans, n, bool(recvs), doc, overhead


def read_chrome(paths: Sequence[str | Path], step: int | None = None) -> RawTrace:
    """Read one PyTorch profiler Chrome trace per pipeline rank.

    Args:
        paths: the trace files (``.json`` or ``.json.gz``), one per rank; the rank is the
            trace's ``distributedInfo.rank``, else ``rank{r}`` in the file name.
        step: which profiled training step to take (0-based); None: the last.

    Returns:
        The compute spans of that step, times in µs on each rank's clock.

    Raises:
        TraceError: unreadable file, unknown ``PP:`` name, unmatched ``B``/``E``, a partial
            step, two files of one rank, files holding different numbers of steps.
    """
    files: dict[int, str] = {}
    spans: list[Span] = []
    hosts: set[Any] = set()
    counts: dict[int, int] = {}
    saw_recv = True
    overhead: dict[int, float] = {}
    for path in sorted(Path(p) for p in paths):
        rank, sp, n, recv, doc, overhead_r = _file_spans(path, step)
        if rank in files:
            raise TraceError(str(path), "", f"rank {rank} again (also {files[rank]})")
        files[rank], counts[rank], overhead[rank] = str(path), n, overhead_r
        spans += sp
        saw_recv &= recv
        hosts.add(doc.get("host_name") if isinstance(doc, dict) else None)
    if not files:
        raise TraceError(", ".join(map(str, paths)) or ".", "", "no trace files")
    if len(set(counts.values())) > 1:
        r = min(counts, key=lambda q: counts[q])
        raise TraceError(files[r], "", f"holds {counts[r]} step(s), other ranks "
                         f"{max(counts.values())}: profile the same steps on every rank")
    n = next(iter(counts.values()))
    notes = [] if saw_recv else [
        "no backend receive ranges (gloo:recv) in the trace: time a compute range waited for "
        "its input counts as compute"]
    same = len(hosts) == 1 and None not in hosts
    return RawTrace("pytorch-profiler", files, spans, 1e-3, same,
                    (n - 1 if step is None else step, n), notes, overhead)


__all__ = ["ALLOWED", "parse_action_name", "read_chrome"]
