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

This package writes a cpsched :class:`~cpsched.model.Schedule` in either format
(:func:`to_torch_csv`, :func:`write_torch_csv`; :mod:`~cpsched.torch_io.export`), places the
communication (:func:`comms_rows`; :mod:`~cpsched.torch_io.comms`) and reads such a file back
into a timed cpsched schedule (:func:`read_torch_csv`; :mod:`~cpsched.torch_io.parse`), so that
an optimal schedule can be run in PyTorch and any PyTorch (or hand-written) schedule can be
timed, validated and compared here.  Orders are checked complete and deadlock-free by
:mod:`~cpsched.torch_io.orders`; names and the error type live in
:mod:`~cpsched.torch_io.formats`.

torch is **not** imported: the format is plain text.  The rules follow PyTorch 2.13's
``torch/distributed/pipelining/schedules.py`` (``_Action.from_str``, ``_validate_schedule``,
``_add_send_recv``, ``_simulate_comms_compute``, ``_PipelineScheduleRuntime._step_microbatches``).
"""

from __future__ import annotations

from cpsched.torch_io.comms import comms_rows
from cpsched.torch_io.export import to_torch_csv, write_torch_csv
from cpsched.torch_io.formats import (
    FORMAT_ALIASES,
    FORMATS,
    READ_METHOD,
    TorchCsvError,
    TorchCsvFormat,
    normalize_format,
    stage_to_rank,
)
from cpsched.torch_io.orders import CellRef, torch_orders
from cpsched.torch_io.parse import parse_torch_csv, read_torch_csv

__all__ = [
    "FORMATS", "FORMAT_ALIASES", "READ_METHOD", "CellRef", "TorchCsvError", "TorchCsvFormat",
    "comms_rows", "normalize_format", "parse_torch_csv", "read_torch_csv", "stage_to_rank",
    "to_torch_csv", "torch_orders", "write_torch_csv",
]
