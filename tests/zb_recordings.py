"""The recorded orders of the Zero Bubble authors' schedulers (tests/data/zb, written by
tests/data/zb/record.py): loading and decoding, shared by the schedule tests."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data" / "zb"


@cache
def cases(name: str) -> list[dict[str, Any]]:
    """The recorded cases of ``name``."""
    doc = json.loads((DATA / f"{name}.json").read_text())
    assert doc["schedule"] == name
    return list(doc["cases"])


def decode(p: int, encoded: list[str]) -> list[list[str]]:
    """Compressed letters (record.py: ``F3`` three in a row, ``(..)k`` a block k times) to
    per-device action strings: upper case = the device's stage ``d``, lower case =
    ``2p - 1 - d``; microbatches count up per (kind, stage)."""
    out = []
    for d, packed in enumerate(encoded):
        text = re.sub(r"\(([^()]*)\)(\d+)", lambda mt: mt[1] * int(mt[2]), packed)
        seen: dict[tuple[str, int], int] = {}
        row = []
        for letter, count in re.findall(r"([FIWfiw])(\d*)", text):
            stage = d if letter.isupper() else 2 * p - 1 - d
            key = (letter.upper(), stage)
            for _ in range(int(count or 1)):
                row.append(f"{stage}{key[0]}{seen.get(key, 0)}")
                seen[key] = seen.get(key, 0) + 1
        out.append(row)
    return out
