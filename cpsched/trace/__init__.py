"""Measured runs: read a training step's trace, compare it with the optimum (docs/trace.md).

``cpsched import-trace`` reads PyTorch profiler Chrome traces of a ``torch.distributed.
pipelining`` run (:mod:`~cpsched.trace.chrome`) or Megatron-LM pipeline-timer dumps
(:mod:`~cpsched.trace.megatron`), finds the pipeline they show (:mod:`~cpsched.trace.shape`),
puts the ranks on one clock and reports what still looks violated as clock skew
(:mod:`~cpsched.trace.align`), derives an instance from the measured durations
(:mod:`~cpsched.trace.costs`) and builds the measured schedule, validates it and replays its
order on the measured costs (:mod:`~cpsched.trace.importer`)::

    from cpsched.trace import import_trace
    run = import_trace(["traces/"])          # TraceImport
    run.measured.makespan, run.replay.makespan, run.instance.to_toml()

Errors are :class:`TraceError` (file, entry, message).
"""

from __future__ import annotations

from cpsched.trace.errors import TraceError
from cpsched.trace.importer import TraceImport, analyse, import_trace, read_trace

__all__ = ["TraceError", "TraceImport", "analyse", "import_trace", "read_trace"]
