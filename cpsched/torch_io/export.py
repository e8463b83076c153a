"""Writing a cpsched schedule as a PyTorch action CSV (``compute_only`` or
``compute_comms``), ready for ``_PipelineScheduleRuntime._load_csv(path, format)``."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path

from cpsched.model import Schedule
from cpsched.torch_io.comms import comms_rows
from cpsched.torch_io.formats import normalize_format
from cpsched.torch_io.orders import torch_orders


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


__all__ = ["to_torch_csv", "write_torch_csv"]
