"""Exchange schedules with PyTorch ``torch.distributed.pipelining`` as action CSV files.

PyTorch's ``_PipelineScheduleRuntime._load_csv(path, format)`` (and torchtitan's custom-schedule
CSV option, which calls it) runs any pipeline schedule written as a CSV file with **one row per
rank** and **one cell per action**, in execution order:

* compute cells ``{stage}{kind}{microbatch}`` with kind ``F`` (forward), ``B`` (full backward),
  ``I`` (input-gradient backward) or ``W`` (weight-gradient backward), e.g. ``2F0``, ``3I1``;
* an overlapped F&B pair as ``(0F7;7B3)OVERLAP_F_B`` (DualPipe-V style, run back to back by the
  runtime);
* in the ``compute_comms`` format also ``{stage}SEND_F{mb}``, ``{stage}RECV_F{mb}``,
  ``{stage}SEND_B{mb}``, ``{stage}RECV_B{mb}`` and ``{stage}REDUCE_GRAD`` (the gradient scaling /
  data-parallel reduction PyTorch's own lowering puts after a stage's last backward).

This module writes a cpsched :class:`~cpsched.model.Schedule` in either format
(:func:`to_torch_csv`, :func:`write_torch_csv`) and reads such a file back into a timed cpsched
schedule (:func:`read_torch_csv`), so that an optimal schedule can be run in PyTorch and any
PyTorch (or hand-written) schedule can be timed, validated and compared here.

torch is **not** imported: the format is plain text.  The rules follow PyTorch 2.13's
``torch/distributed/pipelining/schedules.py`` (``_Action.from_str``, ``_validate_schedule``,
``_add_send_recv``, ``_simulate_comms_compute``, ``_PipelineScheduleRuntime._step_microbatches``).
"""

from __future__ import annotations

import csv
import io
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cpsched.graph import FusedRule, dependencies, fused_rule_from
from cpsched.instance import Instance, load_instance
from cpsched.model import Action, DeviceOrders, Kind, Overlap, Schedule, Step, step_actions
from cpsched.simulate import OrderError, check_orders, simulate

TorchCsvFormat = Literal["compute_only", "compute_comms"]

#: The formats PyTorch's ``_PipelineScheduleRuntime._load_csv`` accepts.
FORMATS: tuple[str, ...] = ("compute_only", "compute_comms")

#: Other spellings accepted for ``fmt`` (the command line's ``--format torch-csv``).
FORMAT_ALIASES: dict[str, str] = {
    "compute_only": "compute_only", "compute-only": "compute_only", "torch-csv": "compute_only",
    "torch_csv": "compute_only", "csv": "compute_only",
    "compute_comms": "compute_comms", "compute-comms": "compute_comms",
}

#: Method name written into schedules read by :func:`read_torch_csv`.
READ_METHOD = "torch-csv"

_COMPUTE_RE = re.compile(r"(\d+)([FBIW])(\d+)")
_OTHER_RE = re.compile(r"(\d+)(SEND_F|RECV_F|SEND_B|RECV_B|UNSHARD|RESHARD|REDUCE_GRAD)(\d*)")
_OVERLAP_RE = re.compile(r"\((.*)\)\s*OVERLAP_F_B")

_ALLOWED_CELLS = (
    "a compute action {stage}{F|B|I|W}{microbatch} (e.g. 2F0, 3I1, 1W4, 0B2), an overlapped pair "
    "(F;B)OVERLAP_F_B (e.g. (0F7;7B3)OVERLAP_F_B), a communication/FSDP action that is ignored "
    "(e.g. 1SEND_F0, 2RECV_B3, 0REDUCE_GRAD, 0UNSHARD), or an empty cell / None"
)


class TorchCsvError(ValueError):
    """A PyTorch action CSV cannot be read, or a schedule cannot be written as one.

    Attributes:
        row: 1-based CSV row (rank ``row - 1``), or None when the problem is not one cell's.
        column: 1-based CSV column, or None.
        cell: the cell text, or None.
    """

    def __init__(self, message: str, row: int | None = None, column: int | None = None,
                 cell: str | None = None) -> None:
        self.row = row
        self.column = column
        self.cell = cell
        where = ""
        if row is not None:
            where = f"row {row} (rank {row - 1})"
            if column is not None:
                where += f", column {column}"
            if cell is not None:
                where += f", cell {cell!r}"
            where += ": "
        super().__init__(where + message)


# --------------------------------------------------------------------------- helpers
def normalize_format(fmt: str) -> TorchCsvFormat:
    """``fmt`` or one of its aliases (:data:`FORMAT_ALIASES`) as ``compute_only`` /
    ``compute_comms``.

    Raises:
        TorchCsvError: unknown format (lists the allowed ones).
    """
    key = str(fmt).strip().lower()
    if key not in FORMAT_ALIASES:
        raise TorchCsvError(f"format = {fmt!r}: allowed formats are compute_only (alias "
                            "torch-csv) and compute_comms")
    return FORMAT_ALIASES[key]  # type: ignore[return-value]


def stage_to_rank(instance: Instance) -> list[int]:
    """``stage_to_rank(instance)[s]`` = the pipeline rank that holds stage ``s`` in PyTorch.

    PyTorch maps each stage to one rank, so the ``loop`` and ``v`` placements have an
    equivalent (its ``style="loop"`` / ``style="v"``); ``bidirectional`` (DualPipe, each stage
    on two devices) has none.

    Raises:
        TorchCsvError: ``bidirectional`` placement.
    """
    if instance.placement == "bidirectional":
        raise TorchCsvError(
            'pipeline.placement = "bidirectional" (DualPipe, every stage on two ranks) has no '
            "PyTorch equivalent: torch.distributed.pipelining places each stage on one rank; "
            'use placement "loop" or "v" (DualPipeV)')
    return [instance.device_of(s) for s in range(instance.num_stages)]


def _step_deps(instance: Instance, step: Step, rule: FusedRule) -> list[Action]:
    """Actions that must have run before ``step`` (SPEC §1), excluding its own members."""
    members = step_actions(step)
    out: list[Action] = []
    for a in members:
        for pred, _lag in dependencies(instance, a, rule):
            if pred not in members:
                out.append(pred)
    return out


@dataclass(frozen=True)
class _Stuck:
    rank: int
    index: int
    step: Step
    waits_for: Action


def _dependency_scan(instance: Instance, orders: Sequence[Sequence[Step]]) -> list[_Stuck]:
    """Run the orders with dependencies only (no times); the ranks left stuck (empty = none).

    Each rank runs its steps in order; a step runs once every predecessor has run.
    """
    rule = fused_rule_from(a for steps in orders for st in steps for a in step_actions(st))
    done: set[Action] = set()
    ptr = [0] * len(orders)
    progress = True
    while progress:
        progress = False
        for r, steps in enumerate(orders):
            while ptr[r] < len(steps):
                step = steps[ptr[r]]
                if any(d not in done for d in _step_deps(instance, step, rule)):
                    break
                done.update(step_actions(step))
                ptr[r] += 1
                progress = True
    stuck = []
    for r, steps in enumerate(orders):
        if ptr[r] < len(steps):
            step = steps[ptr[r]]
            missing = next(d for d in _step_deps(instance, step, rule) if d not in done)
            stuck.append(_Stuck(r, ptr[r], step, missing))
    return stuck


def _send_peer(action: Action, ranks: Sequence[int]) -> int | None:
    """The peer rank ``action``'s output goes to, or None when nothing is sent.

    ``F`` of stage s sends activations to stage s + 1 and ``B``/``I`` sends the input gradient to
    stage s - 1, unless that stage is on the same rank (PyTorch's "V-schedule special case"
    passes them locally).  ``W`` never sends.
    """
    s, S = action.stage, len(ranks)
    if action.kind == Kind.F and s < S - 1 and ranks[s + 1] != ranks[s]:
        return ranks[s + 1]
    if action.kind in (Kind.B, Kind.I) and s > 0 and ranks[s - 1] != ranks[s]:
        return ranks[s - 1]
    return None


def _step_starts(schedule: Schedule) -> dict[Action, float]:
    return {a.action: a.start for a in schedule.actions}


def torch_orders(schedule: Schedule) -> DeviceOrders:
    """The per-rank compute orders to export: :meth:`Schedule.orders`, checked to be complete
    (every action once, on its rank) and free of deadlock.

    Raises:
        TorchCsvError: bidirectional placement, incomplete orders or orders that deadlock.
    """
    instance = schedule.instance
    stage_to_rank(instance)
    orders = schedule.orders()
    try:
        check_orders(instance, orders)
    except OrderError as exc:
        raise TorchCsvError(f"the schedule cannot be exported: {exc}") from None
    stuck = _dependency_scan(instance, orders)
    if stuck:
        raise TorchCsvError("the schedule cannot be exported, its per-rank orders deadlock: "
                            + _stuck_message(stuck, orders, None))
    return orders


# --------------------------------------------------------------------------- writing
def comms_rows(schedule: Schedule, *, reduce_grad: bool = True) -> list[list[str]]:
    """The ``compute_comms`` rows: every compute step plus its sends and receives.

    Insertion rule (deadlock-free by construction): the compute steps of all ranks are visited
    in one global sequence that follows the schedule's own start times (ties by rank) and only
    visits a step once every step it depends on (SPEC §1) has been visited.  When a step is
    visited it is appended to its rank's row, immediately followed by a ``SEND_F`` / ``SEND_B``
    for each of its actions whose output goes to another rank; the matching ``RECV_F`` /
    ``RECV_B`` is appended to the receiving rank's row at the same moment.  Hence

    * every receive is posted before the compute that consumes it (the runtime asserts this),
    * sends and receives between any two ranks appear in the same order on both sides (gloo and
      NCCL match point-to-point messages between a pair of ranks in posting order),
    * sends are posted right after the compute that produces them, so a rank blocked on a
      receive always waits for a compute that comes earlier in the global sequence: no cycle.

    With ``reduce_grad`` a ``{stage}REDUCE_GRAD`` follows the step that completes a stage's
    last backward (the m-th ``B`` or ``W``), as PyTorch's own lowering (``_add_reduce_grad``)
    does: the runtime scales gradients by ``1/m`` there, so leave it on when running the file.
    (PyTorch's dry-run ``_simulate_comms_compute`` does not know ``REDUCE_GRAD``; drop those
    cells before calling it.)

    Returns:
        ``rows[r]`` = rank r's cells, e.g. ``["0F0", "0SEND_F0", "1RECV_B0", "0B0", ...]``.

    Raises:
        TorchCsvError: as :func:`torch_orders`.
    """
    instance = schedule.instance
    ranks = stage_to_rank(instance)
    orders = torch_orders(schedule)
    starts = _step_starts(schedule)
    rule = fused_rule_from(a for steps in orders for st in steps for a in step_actions(st))
    m = instance.m
    rows: list[list[str]] = [[] for _ in orders]
    ptr = [0] * len(orders)
    done: set[Action] = set()
    backward_count: dict[int, int] = defaultdict(int)
    remaining = sum(len(s) for s in orders)
    while remaining:
        best: tuple[float, int] | None = None
        for r, steps in enumerate(orders):
            if ptr[r] >= len(steps):
                continue
            step = steps[ptr[r]]
            if any(d not in done for d in _step_deps(instance, step, rule)):
                continue
            key = (starts[step_actions(step)[0]], r)
            if best is None or key < best:
                best = key
        if best is None:  # pragma: no cover - torch_orders already ruled deadlocks out
            raise TorchCsvError("the schedule's orders deadlock")
        r = best[1]
        step = orders[r][ptr[r]]
        ptr[r] += 1
        remaining -= 1
        rows[r].append(str(step))
        reduce_now: list[int] = []
        for a in step_actions(step):
            done.add(a)
            peer = _send_peer(a, ranks)
            if peer is not None:
                if a.kind == Kind.F:
                    rows[r].append(f"{a.stage}SEND_F{a.microbatch}")
                    rows[peer].append(f"{a.stage + 1}RECV_F{a.microbatch}")
                else:
                    rows[r].append(f"{a.stage}SEND_B{a.microbatch}")
                    rows[peer].append(f"{a.stage - 1}RECV_B{a.microbatch}")
            if a.kind in (Kind.B, Kind.W):
                backward_count[a.stage] += 1
                if backward_count[a.stage] == m:
                    reduce_now.append(a.stage)
        if reduce_grad:
            rows[r].extend(f"{s}REDUCE_GRAD" for s in reduce_now)
    return rows


def _rows_to_text(rows: Sequence[Sequence[str]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    for row in rows:
        writer.writerow(row)
    return buf.getvalue()


def to_torch_csv(schedule: Schedule, fmt: str = "compute_only", *,
                 reduce_grad: bool = True) -> str:
    """The schedule as a PyTorch action CSV (text), ready for ``_load_csv(path, fmt)``.

    Args:
        schedule: a timed cpsched schedule with ``loop`` or ``v`` placement.
        fmt: ``"compute_only"`` (alias ``"torch-csv"``): one row per rank, one cell per compute
            step of :meth:`Schedule.orders` (``2F0``, ``3I1``, ``3W1``, ``1B4``,
            ``(0F7;7B3)OVERLAP_F_B``); PyTorch inserts the communication itself.
            ``"compute_comms"``: the same steps with ``SEND_*``/``RECV_*`` (and ``REDUCE_GRAD``)
            cells inserted, see :func:`comms_rows`.
        reduce_grad: ``compute_comms`` only: add the ``REDUCE_GRAD`` cells.

    Returns:
        CSV text, ``p`` lines (rank 0 first), ``\\n`` line ends.

    Raises:
        TorchCsvError: unknown format, bidirectional placement, incomplete or deadlocking orders.
    """
    kind = normalize_format(fmt)
    if kind == "compute_only":
        rows = [[str(step) for step in steps] for steps in torch_orders(schedule)]
    else:
        rows = comms_rows(schedule, reduce_grad=reduce_grad)
    return _rows_to_text(rows)


def write_torch_csv(schedule: Schedule, path: str | Path, fmt: str = "compute_only", *,
                    reduce_grad: bool = True) -> Path:
    """Write :func:`to_torch_csv` to ``path`` (UTF-8) and return the path.

    Raises:
        TorchCsvError: as :func:`to_torch_csv`; OSError when the file cannot be written.
    """
    p = Path(path)
    p.write_text(to_torch_csv(schedule, fmt, reduce_grad=reduce_grad), encoding="utf-8")
    return p


# --------------------------------------------------------------------------- reading
@dataclass(frozen=True)
class CellRef:
    """Where a step came from: 1-based ``row`` and ``column`` of the CSV, and the cell text."""

    row: int
    column: int
    cell: str


def _read_text(path_or_text: str | Path) -> str:
    if isinstance(path_or_text, Path):
        if not path_or_text.is_file():
            raise TorchCsvError(f"CSV file {str(path_or_text)!r}: no such file")
        return path_or_text.read_text(encoding="utf-8-sig")
    text = str(path_or_text)
    looks_like_path = "\n" not in text and "," not in text and (
        text.strip().lower().endswith(".csv") or "/" in text or "\\" in text)
    if "\n" not in text and Path(text).is_file():
        return Path(text).read_text(encoding="utf-8-sig")
    if looks_like_path:
        raise TorchCsvError(f"CSV file {text!r}: no such file")
    return text


def _parse_compute(text: str, row: int, col: int, cell: str) -> Action:
    mt = _COMPUTE_RE.fullmatch(text.strip())
    if not mt:
        raise TorchCsvError(f"{text.strip()!r} is not an action; allowed: {_ALLOWED_CELLS}",
                            row, col, cell)
    return Action(Kind(mt.group(2)), int(mt.group(1)), int(mt.group(3)))


def _parse_cell(cell: str, row: int, col: int) -> Step | None:
    text = cell.strip()
    if text == "" or text.lower() == "none":
        return None
    mt = _OVERLAP_RE.fullmatch(text)
    if mt:
        parts = [x for x in mt.group(1).split(";") if x.strip()]
        subs = [_parse_compute(x, row, col, cell) for x in parts]
        fwd = [a for a in subs if a.kind == Kind.F]
        bwd = [a for a in subs if a.kind in (Kind.B, Kind.I)]
        if len(subs) != 2 or len(fwd) != 1 or len(bwd) != 1:
            raise TorchCsvError("an OVERLAP_F_B pair must hold exactly one F and one B or I, "
                                "e.g. (0F7;7B3)OVERLAP_F_B", row, col, cell)
        return Overlap(fwd[0], bwd[0])
    if _OTHER_RE.fullmatch(text):
        return None
    if text.startswith("("):
        raise TorchCsvError(f"only OVERLAP_F_B pairs are supported; allowed: {_ALLOWED_CELLS}",
                            row, col, cell)
    return _parse_compute(text, row, col, cell)


def parse_torch_csv(path_or_text: str | Path,
                    instance: Instance) -> tuple[DeviceOrders, dict[Action, CellRef]]:
    """Parse a PyTorch action CSV into per-rank orders, checked against ``instance`` (untimed).

    Communication and FSDP cells (``SEND_F``, ``RECV_B``, ``REDUCE_GRAD``, ``UNSHARD``…) are
    dropped; empty cells and ``None`` are ignored; trailing empty rows are ignored.

    Returns:
        ``(orders, where)``: ``orders[r]`` = rank r's compute steps in CSV order, and the cell
        each action came from.

    Raises:
        TorchCsvError: naming row, column and cell: a cell that is not an action, a wrong number
        of rows (must be ``p``), a stage or microbatch out of range, ``I``/``W`` without
        ``split_backward``, an action on a rank its placement does not put it on, an action
        twice, or (without a cell) actions missing.
    """
    text = _read_text(path_or_text)
    rows = list(csv.reader(io.StringIO(text)))
    while rows and all(not c.strip() for c in rows[-1]):
        rows.pop()
    p, S, m = instance.p, instance.num_stages, instance.m
    if len(rows) != p:
        raise TorchCsvError(f"the CSV has {len(rows)} row{'s' if len(rows) != 1 else ''}; the "
                            f"instance has p = {p} rank{'s' if p != 1 else ''} "
                            "(one row per rank, rank 0 first)")
    orders: DeviceOrders = [[] for _ in range(p)]
    where: dict[Action, CellRef] = {}
    for r, cells in enumerate(rows):
        for c, cell in enumerate(cells):
            row, col = r + 1, c + 1
            step = _parse_cell(cell, row, col)
            if step is None:
                continue
            if isinstance(step, Overlap) and step.backward.microbatch == step.forward.microbatch \
                    and step.backward.stage == step.forward.stage == S - 1:
                raise TorchCsvError(f"{step.backward} needs the result of {step.forward} "
                                    "(last stage), so they cannot run as one overlapped pair; "
                                    "allowed: an F and a B/I that do not depend on each other",
                                    r + 1, c + 1, cell)
            for a in step_actions(step):
                if not 0 <= a.stage < S:
                    raise TorchCsvError(f"stage {a.stage} is out of range; allowed: stages "
                                        f"0..{S - 1} (S = p * v = {S})", row, col, cell)
                if not 0 <= a.microbatch < m:
                    raise TorchCsvError(f"microbatch {a.microbatch} is out of range; allowed: "
                                        f"microbatches 0..{m - 1} (m = {m})", row, col, cell)
                if a.kind in (Kind.I, Kind.W) and not instance.split_backward:
                    raise TorchCsvError(f"{a}: kind {a.kind} needs pipeline.split_backward = "
                                        "true; allowed kinds here: F, B", row, col, cell)
                want = instance.device_of(a.stage, a.microbatch)
                if want != r:
                    raise TorchCsvError(
                        f"{a} is on rank {r}; {instance.placement} placement puts stage "
                        f"{a.stage} on rank {want}; allowed stages on rank {r}: "
                        f"{', '.join(map(str, instance.stages_of(r)))}", row, col, cell)
                if a in where:
                    w = where[a]
                    raise TorchCsvError(f"{a} appears twice (first at row {w.row}, column "
                                        f"{w.column}); allowed: each action once",
                                        row, col, cell)
                where[a] = CellRef(row, col, cell)
            orders[r].append(step)
    _check_complete(instance, where)
    return orders, where


def _check_complete(instance: Instance, where: dict[Action, CellRef]) -> None:
    missing: list[str] = []
    mixed: list[str] = []
    for i in range(instance.m):
        for s in range(instance.num_stages):
            if Action(Kind.F, s, i) not in where:
                missing.append(str(Action(Kind.F, s, i)))
            has = {k: Action(k, s, i) in where for k in (Kind.B, Kind.I, Kind.W)}
            if has[Kind.B] and (has[Kind.I] or has[Kind.W]):
                mixed.append(f"stage {s} microbatch {i}")
            elif not has[Kind.B]:
                if instance.split_backward and (has[Kind.I] or has[Kind.W]):
                    missing += [str(Action(k, s, i)) for k in (Kind.I, Kind.W) if not has[k]]
                elif instance.split_backward:
                    missing.append(f"{Action(Kind.B, s, i)} (or {Action(Kind.I, s, i)} and "
                                   f"{Action(Kind.W, s, i)})")
                else:
                    missing.append(str(Action(Kind.B, s, i)))
    if mixed:
        raise TorchCsvError(f"{mixed[0]} has both a full B and I/W; allowed: one B, or one I "
                            "and one W" + (f" ({len(mixed) - 1} more like it)"
                                           if len(mixed) > 1 else ""))
    if missing:
        shown = ", ".join(missing[:8]) + (f", ... ({len(missing)} in all)"
                                          if len(missing) > 8 else "")
        need = "F and B, or F, I and W" if instance.split_backward else "F and B"
        raise TorchCsvError(f"actions missing: {shown}; every (stage, microbatch) needs {need}")


def _stuck_message(stuck: list[_Stuck], orders: Sequence[Sequence[Step]],
                   where: dict[Action, CellRef] | None) -> str:
    owner = {a: (r, k) for r, steps in enumerate(orders) for k, st in enumerate(steps)
             for a in step_actions(st)}
    parts = []
    for st in stuck:
        if where is not None:
            ref = where[step_actions(st.step)[0]]
            here = f"row {ref.row} (rank {st.rank}) column {ref.column} {ref.cell.strip()!r}"
        else:
            here = f"rank {st.rank} step {st.index} {st.step}"
        r2, k2 = owner[st.waits_for]
        if where is not None:
            ref2 = where[st.waits_for]
            there = f"row {ref2.row} (rank {r2}) column {ref2.column}"
        else:
            there = f"rank {r2} step {k2}"
        parts.append(f"{here} waits for {st.waits_for} at {there}")
    return "; ".join(parts)


def read_torch_csv(path_or_text: str | Path, instance: Instance | str | Path, *,
                   method: str = READ_METHOD) -> Schedule:
    """Read a PyTorch action CSV and time it on ``instance`` with :func:`cpsched.simulate`.

    Args:
        path_or_text: a file (``Path``, or a ``str`` naming an existing file) or the CSV text
            itself.  Accepts PyTorch's own dumps (``_dump_csv`` in either format: ``SEND_*``,
            ``RECV_*``, ``REDUCE_GRAD``, ``UNSHARD``/``RESHARD`` cells are dropped), files written
            by :func:`to_torch_csv` and hand-written ones; empty cells and ``None`` are ignored.
        instance: the instance (or a TOML file) giving p, v, m, placement and costs.
        method: the schedule's ``method`` field.

    Returns:
        The timed schedule (status ``HEURISTIC``; run :func:`cpsched.validate.validate` on it to
        check e.g. memory limits, which the simulator does not enforce).

    Raises:
        TorchCsvError: everything :func:`parse_torch_csv` rejects, and orders that deadlock
        (naming, for each stuck rank, the cell it waits at and the action and cell it waits for).
    """
    inst = instance if isinstance(instance, Instance) else load_instance(instance)
    orders, where = parse_torch_csv(path_or_text, inst)
    stuck = _dependency_scan(inst, orders)
    if stuck:
        raise TorchCsvError("the per-rank orders deadlock: " + _stuck_message(stuck, orders,
                                                                              where))
    try:
        return simulate(inst, orders, method=method)
    except OrderError as exc:  # pragma: no cover - parse_torch_csv checks the same
        raise TorchCsvError(str(exc)) from None


__all__ = [
    "FORMATS", "FORMAT_ALIASES", "READ_METHOD", "CellRef", "TorchCsvError", "TorchCsvFormat",
    "comms_rows", "normalize_format", "parse_torch_csv", "read_torch_csv", "stage_to_rank",
    "to_torch_csv", "torch_orders", "write_torch_csv",
]
