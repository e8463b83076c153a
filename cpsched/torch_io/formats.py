"""The PyTorch action-CSV formats: names, cell grammar, the error type and the rank of a stage.

Shared by :mod:`cpsched.torch_io.export`, :mod:`cpsched.torch_io.comms` and
:mod:`cpsched.torch_io.parse`; torch is not imported (the format is plain text).
"""

from __future__ import annotations

import re
from typing import Literal

from cpsched.instance import Instance

TorchCsvFormat = Literal["compute_only", "compute_comms"]

#: The formats PyTorch's ``_PipelineScheduleRuntime._load_csv`` accepts.
FORMATS: tuple[str, ...] = ("compute_only", "compute_comms")

#: Other spellings accepted for ``fmt`` (the command line's ``--format torch-csv``).
FORMAT_ALIASES: dict[str, str] = {
    "compute_only": "compute_only", "compute-only": "compute_only", "torch-csv": "compute_only",
    "torch_csv": "compute_only", "csv": "compute_only",
    "compute_comms": "compute_comms", "compute-comms": "compute_comms",
}

#: Method name written into schedules read by :func:`cpsched.torch_io.read_torch_csv`.
READ_METHOD = "torch-csv"

COMPUTE_RE = re.compile(r"(\d+)([FBIW])(\d+)")
OTHER_RE = re.compile(r"(\d+)(SEND_F|RECV_F|SEND_B|RECV_B|UNSHARD|RESHARD|REDUCE_GRAD)(\d*)")
OVERLAP_RE = re.compile(r"\((.*)\)\s*OVERLAP_F_B")

ALLOWED_CELLS = (
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


__all__ = [
    "ALLOWED_CELLS", "COMPUTE_RE", "FORMATS", "FORMAT_ALIASES", "OTHER_RE", "OVERLAP_RE",
    "READ_METHOD", "TorchCsvError", "TorchCsvFormat", "normalize_format", "stage_to_rank",
]
