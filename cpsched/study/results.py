"""Writing a study's table: CSV and GitHub Markdown (pandas ``to_markdown`` via tabulate)."""

from __future__ import annotations

import math
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
    """Write ``OUT_DIR/STEM.csv`` and ``OUT_DIR/STEM.md`` (creating ``out_dir``).

    Returns:
        ``(csv_path, markdown_path)``.

    Raises:
        OSError: the directory or a file cannot be written.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out / f"{stem}.csv", out / f"{stem}.md"
    df.to_csv(csv_path, index=False)
    md_path.write_text(to_markdown(df), encoding="utf-8")
    return csv_path, md_path
