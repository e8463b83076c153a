"""The recorded orders of the Zero Bubble authors' schedulers (tests/data/zb, written by
tests/data/zb/record.py): loading, decoding and the instance of a case, shared by the
schedule tests."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from cpsched.instance import Instance

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


def instance(case: dict[str, Any], placement: str = "v", limit: bool = True) -> Instance:
    """The case's instance (``limit=False``: without its memory limit)."""
    memory: dict[str, Any] = {"activation": case["act"], "released_by_input": case["r"]}
    if limit and case["limit"] is not None:
        memory["limit"] = case["limit"]
    return Instance.from_dict({
        "name": "zb-recorded",
        "pipeline": {"devices": case["p"], "stages_per_device": 2 if placement == "v" else 1,
                     "microbatches": case["m"], "placement": placement,
                     "split_backward": True},
        "costs": {"forward": case["F"], "backward_input": case["I"],
                  "backward_weight": case["W"], "p2p_latency": case["lat"]},
        "memory": memory,
    })
