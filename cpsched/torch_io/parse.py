"""Reading a PyTorch action CSV back into a timed cpsched schedule.

Accepts PyTorch's own dumps (``_dump_csv`` in either format), files written by
:mod:`cpsched.torch_io.export` and hand-written ones; every error names the row, column and
cell.  The rules follow PyTorch 2.13's ``_Action.from_str`` and ``_validate_schedule``.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from cpsched.actions import Action, DeviceOrders, Kind, Overlap, Step, step_actions
from cpsched.instance import Instance, load_instance
from cpsched.model import Schedule
from cpsched.rules import Fault, action_fault, gaps
from cpsched.simulate import OrderError, simulate
from cpsched.torch_io.formats import (
    ALLOWED_CELLS,
    COMPUTE_RE,
    OTHER_RE,
    OVERLAP_RE,
    READ_METHOD,
    TorchCsvError,
)
from cpsched.torch_io.orders import CellRef, dependency_scan, stuck_message


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
    mt = COMPUTE_RE.fullmatch(text.strip())
    if not mt:
        raise TorchCsvError(f"{text.strip()!r} is not an action; allowed: {ALLOWED_CELLS}",
                            row, col, cell)
    return Action(Kind(mt.group(2)), int(mt.group(1)), int(mt.group(3)))


def _parse_cell(cell: str, row: int, col: int) -> Step | None:
    text = cell.strip()
    if text == "" or text.lower() == "none":
        return None
    mt = OVERLAP_RE.fullmatch(text)
    if mt:
        parts = [x for x in mt.group(1).split(";") if x.strip()]
        subs = [_parse_compute(x, row, col, cell) for x in parts]
        fwd = [a for a in subs if a.kind == Kind.F]
        bwd = [a for a in subs if a.kind in (Kind.B, Kind.I)]
        if len(subs) != 2 or len(fwd) != 1 or len(bwd) != 1:
            raise TorchCsvError("an OVERLAP_F_B pair must hold exactly one F and one B or I, "
                                "e.g. (0F7;7B3)OVERLAP_F_B", row, col, cell)
        return Overlap(fwd[0], bwd[0])
    if OTHER_RE.fullmatch(text):
        return None
    if text.startswith("("):
        raise TorchCsvError(f"only OVERLAP_F_B pairs are supported; allowed: {ALLOWED_CELLS}",
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
    p, S = instance.p, instance.num_stages
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
                fault = action_fault(instance, a, r, where)
                if fault is not None:
                    raise TorchCsvError(_fault_message(instance, a, r, fault, where),
                                        row, col, cell)
                where[a] = CellRef(row, col, cell)
            orders[r].append(step)
    _check_complete(instance, where)
    return orders, where


def _fault_message(instance: Instance, a: Action, rank: int, fault: Fault,
                   where: dict[Action, CellRef]) -> str:
    """What is wrong with action ``a`` in a cell of ``rank``'s row, and what is allowed."""
    S, m = instance.num_stages, instance.m
    if fault == Fault.STAGE:
        return f"stage {a.stage} is out of range; allowed: stages 0..{S - 1} (S = p * v = {S})"
    if fault == Fault.MICROBATCH:
        return (f"microbatch {a.microbatch} is out of range; allowed: microbatches "
                f"0..{m - 1} (m = {m})")
    if fault == Fault.KIND:
        return f"{a}: kind {a.kind} needs pipeline.split_backward = true; allowed kinds here: F, B"
    if fault == Fault.DEVICE:
        return (f"{a} is on rank {rank}; {instance.placement} placement puts stage {a.stage} "
                f"on rank {instance.device_of(a.stage, a.microbatch)}; allowed stages on rank "
                f"{rank}: {', '.join(map(str, instance.stages_of(rank)))}")
    w = where[a]
    return (f"{a} appears twice (first at row {w.row}, column {w.column}); allowed: each "
            "action once")


def _check_complete(instance: Instance, where: dict[Action, CellRef]) -> None:
    """Every (stage, microbatch) has its actions (the completeness rule of
    :mod:`cpsched.rules`); else one error naming the missing ones."""
    missing: list[str] = []
    mixed: list[str] = []
    for gap in gaps(instance, where):
        s, i = gap.stage, gap.microbatch
        if gap.forward_missing:
            missing.append(str(Action(Kind.F, s, i)))
        if gap.mixed:
            mixed.append(f"stage {s} microbatch {i}")
        elif instance.split_backward and len(gap.backward_missing) == 2:
            missing.append(f"{Action(Kind.B, s, i)} (or {Action(Kind.I, s, i)} and "
                           f"{Action(Kind.W, s, i)})")
        else:
            missing += [str(Action(k, s, i)) for k in gap.backward_missing]
    if mixed:
        raise TorchCsvError(f"{mixed[0]} has both a full B and I/W; allowed: one B, or one I "
                            "and one W" + (f" ({len(mixed) - 1} more like it)"
                                           if len(mixed) > 1 else ""))
    if missing:
        shown = ", ".join(missing[:8]) + (f", ... ({len(missing)} in all)"
                                          if len(missing) > 8 else "")
        need = "F and B, or F, I and W" if instance.split_backward else "F and B"
        raise TorchCsvError(f"actions missing: {shown}; every (stage, microbatch) needs {need}")


def read_torch_csv(path_or_text: str | Path, instance: Instance | str | Path, *,
                   method: str = READ_METHOD) -> Schedule:
    """Read a PyTorch action CSV and time it on ``instance`` with
    :func:`cpsched.simulate.simulate`.

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
    stuck = dependency_scan(inst, orders)
    if stuck:
        raise TorchCsvError("the per-rank orders deadlock: " + stuck_message(stuck, orders,
                                                                              where))
    try:
        return simulate(inst, orders, method=method)
    except OrderError as exc:  # pragma: no cover - parse_torch_csv checks the same
        raise TorchCsvError(str(exc)) from None


__all__ = ["parse_torch_csv", "read_torch_csv"]
