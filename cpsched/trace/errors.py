"""The one error a trace raises: which file, which entry, what is wrong (docs/trace.md).

The command line prints it as one line ``error: trace FILE: ENTRY: MESSAGE`` and exits 2.
"""

from __future__ import annotations


class TraceError(ValueError):
    """A trace file cannot be read or does not describe one pipeline step.

    Attributes:
        file: the file (or directory) at fault, as given.
        entry: the entry inside it (``traceEvents[12] 'PP:1F0'``, ``key 'forward-3-end'``),
            or ``""`` when the whole file is meant.
        message: what is wrong and what is allowed.
    """

    def __init__(self, file: str, entry: str, message: str) -> None:
        self.file = file
        self.entry = entry
        self.message = message
        where = f"trace {file}" + (f": {entry}" if entry else "")
        super().__init__(f"{where}: {message}")


__all__ = ["TraceError"]
