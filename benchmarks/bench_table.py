"""The table every benchmark prints: each row as soon as it is measured (a long run shows
its progress and keeps what it measured if stopped), then the whole table (markdown)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

import pandas as pd

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
    print(pd.DataFrame(rows).to_markdown(index=False))
    return rows
