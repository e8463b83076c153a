"""The table every benchmark prints: each row as soon as it is measured (a long run shows
its progress and keeps what it measured if stopped), then the whole table (markdown); and
how a benchmark reads an instance file it is given (a bad one: one line, exit 2)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

import pandas as pd

from cpsched import load_instance
from cpsched.instance import Instance, InstanceError

T = TypeVar("T")


def print_rows(items: Iterable[T], row: Callable[[T], dict[str, object]]
               ) -> list[dict[str, object]]:
    """Print ``row(item)`` for each of ``items`` as it is done, then all rows as one
    markdown table; returns the rows."""
    rows = []
    for item in items:
        rows.append(row(item))
        print(pd.DataFrame(rows[-1:]).to_markdown(index=False), flush=True)
    print()
    # columns in the order of the fullest row (a row that did not apply has fewer), blanks
    # where a row has none
    order = max(rows, key=len, default={})
    columns = list(order) + [k for r in rows for k in r if k not in order]
    print(pd.DataFrame(rows, columns=list(dict.fromkeys(columns))).fillna("")
          .to_markdown(index=False))
    return rows


def load_or_exit(ap: argparse.ArgumentParser, path: Path) -> Instance:
    """The instance in ``path``; a missing or invalid file ends the benchmark with one line
    naming it and the field (``ap.exit``, code 2)."""
    try:
        return load_instance(path)
    except (OSError, InstanceError) as e:
        ap.exit(2, f"error: {path}: {e}\n")


def gap_columns(known: float, before: float, after: float) -> dict[str, object]:
    """The gap (%) of the best known makespan ``known`` to a bound ``before`` and ``after``
    a benchmark's step (instance units; gap = (makespan − bound) / makespan)."""
    from cpsched.model import gap
    return {"gap before %": round(100 * (gap(known, before) or 0), 2),
            "gap after %": round(100 * (gap(known, after) or 0), 2)}
