"""A study's report from its directory: the table (CSV and Markdown) and the bubble-bar PNG,
built from what the directory holds, so a study still running (or interrupted) can already be
looked at (``cpsched report DIR``, docs/studies.md)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from cpsched.outputs import Writer, write_set
from cpsched.study.comparison import OPTIMUM, study_table
from cpsched.study.results import result_writers

#: Above this many instances the bubble-bar PNG is skipped (one bar group per instance).
MAX_PLOT_INSTANCES = 200


@dataclass(frozen=True)
class Report:
    """A study directory's report: the table (columns :data:`cpsched.study.COLUMNS`), how
    many instances have all their solves, how many the study has, and the solves' statuses
    counted (``{"OPTIMAL": 12, "PENDING": 3, ...}``, one per table row)."""

    table: pd.DataFrame
    finished: int
    total: int
    statuses: dict[str, int]

    def summary(self) -> str:
        """One line: ``6 of 8 instances finished; rows: 40 OPTIMAL, 2 FEASIBLE, 8 PENDING``."""
        counts = ", ".join(f"{n} {s}" for s, n in self.statuses.items())
        return (f"{self.finished} of {self.total} instances finished; rows: "
                f"{counts or 'none'}")


def read_report(path: str | Path) -> Report:
    """The report of the study directory ``path`` (nothing is written).

    Raises:
        cpsched.outputs.OutputError: ``path`` is not a compare study directory.
    """
    table, finished, total = study_table(path)
    counts = table["status"].value_counts(sort=False)
    return Report(table, finished, total, {str(k): int(v) for k, v in counts.items()})


def report_writers(table: pd.DataFrame) -> tuple[dict[str, Writer], str]:
    """``{suffix: writer}`` for the CSV, the Markdown and (for 1 to
    :data:`MAX_PLOT_INSTANCES` finished instances) ``-bubble.png`` of the finished
    instances, and a note on what was left out ("" when nothing)."""
    from cpsched import plots

    files = result_writers(table)
    pending = set(table.loc[table["status"] == "PENDING", "instance"])
    drawn = table[~table["instance"].isin(pending)]
    n = drawn["instance"].nunique()
    note = ""
    if 0 < n <= MAX_PLOT_INSTANCES:
        def png(path: Path) -> None:
            plots.save_figure(plots.bubble_bars(drawn, optimum=OPTIMUM), path, close=True)

        files["-bubble.png"] = png
    elif n:
        note = f"bubble plot skipped: {n} instances (drawn up to {MAX_PLOT_INSTANCES})"
    return files, note


def write_report(table: pd.DataFrame, out: str | Path, stem: str
                 ) -> tuple[list[Path], str]:
    """Write ``OUT/STEM.csv``, ``.md`` and ``-bubble.png`` (instances with a pending solve
    are not drawn) as one set: atomically, never over existing files (``STEM-2``, ... when
    taken; :func:`cpsched.outputs.write_set`).

    Returns:
        The paths written and a note on what was left out ("" when nothing).

    Raises:
        cpsched.outputs.OutputError: ``stem`` is not a plain file name.
        OSError: a file cannot be written.
    """
    files, note = report_writers(table)
    return write_set(out, stem, files), note
