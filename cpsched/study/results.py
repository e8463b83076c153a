"""Writing a study's table: CSV and GitHub Markdown (pandas ``to_markdown`` via tabulate)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd


def _cell(x: Any) -> str:
    """One Markdown cell: NaN/None blank, integral floats without decimals, other floats to
    4 significant digits below 1 and 6 above, ``|`` escaped, newlines as spaces."""
    if x is None:
        return ""
    if isinstance(x, float):
        if math.isnan(x):
            return ""
        if x.is_integer():
            return str(int(x))
        return f"{x:.4g}" if abs(x) < 1 else f"{x:.6g}"
    return str(x).replace("|", "\\|").replace("\n", " ")


def to_markdown(df: pd.DataFrame) -> str:
    """A GitHub Markdown table of ``df`` (no index; NaN as empty; floats to 4 significant
    digits below 1, 6 above; ``|`` escaped), numbers right-aligned.

    Returns:
        The table, one line per row after the header and the alignment rule, ending in a
        newline.
    """
    numeric = [pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])
               for c in df.columns]
    cells = df.map(_cell)
    cells.columns = [_cell(str(c)) for c in df.columns]
    text = cells.to_markdown(index=False, tablefmt="pipe", disable_numparse=True,
                             colalign=["right" if num else "left" for num in numeric])
    return text + "\n"


def write_results(df: pd.DataFrame, out_dir: str | Path, stem: str) -> tuple[Path, Path]:
    """Write ``OUT_DIR/STEM.csv`` and ``OUT_DIR/STEM.md`` (creating ``out_dir``) as one set
    (:func:`cpsched.outputs.write_set`): inside ``out_dir`` only (``stem`` must be a plain
    file name), atomically, and never over existing files — when either name is taken the
    pair is written as ``STEM-2``, ``STEM-3``, ... instead.

    Returns:
        ``(csv_path, markdown_path)`` as written.

    Raises:
        cpsched.outputs.OutputError: ``stem`` is not a plain file name, or ``out_dir``
            cannot be used.
        OSError: a file cannot be written.
    """
    from cpsched.outputs import output_dir, write_set

    out = output_dir(out_dir, "out_dir")
    csv_path, md_path = write_set(out, stem, result_writers(df))
    return csv_path, md_path


def result_writers(df: pd.DataFrame) -> dict[str, Callable[[Path], None]]:
    """``{".csv": writer, ".md": writer}`` for :func:`cpsched.outputs.write_set`."""

    def csv(path: Path) -> None:
        df.to_csv(path, index=False)

    def markdown(path: Path) -> None:
        path.write_text(to_markdown(df), encoding="utf-8")

    return {".csv": csv, ".md": markdown}
