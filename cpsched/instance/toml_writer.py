"""Writing TOML documents: ``tomli_w`` with arrays of plain values on one line.

``tomli_w`` (1.x: ``dumps(obj, *, multiline_strings=False, indent=4)``, no option for
arrays) puts every array element on its own line, so a 32-stage ``forward = [...]`` becomes
34 lines.  :func:`dumps_toml` writes the same document with each array whose elements are
plain values (numbers, strings, booleans, dates, or arrays of those) on one line, e.g.
``forward = [1.0, 1.0, 1.4]`` — the way the hand-written instances in ``instances/`` are
written.  Safe by construction: the compact text is parsed back and compared with what
``tomli_w`` wrote; on any difference (a shape this rewriting does not handle) ``tomli_w``'s
own text is returned.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from typing import Any

import tomli_w


def dumps_toml(doc: Mapping[str, Any]) -> str:
    """``doc`` as a TOML document: :func:`tomli_w.dumps` with arrays of plain values on one
    line (see the module docstring); parses back to the same data as ``tomli_w.dumps(doc)``.

    Raises:
        TypeError: a value TOML cannot hold (as :func:`tomli_w.dumps`).
    """
    text = tomli_w.dumps(doc)
    compact = compact_arrays(text)
    if compact == text:
        return text
    try:
        same = tomllib.loads(compact) == tomllib.loads(text)
    except tomllib.TOMLDecodeError:  # pragma: no cover - a shape the rewriting mishandles
        same = False
    return compact if same else text


def compact_arrays(text: str) -> str:
    """Join each multi-line array of ``tomli_w``'s layout (an opening line ending in ``[``,
    one element per line ending in ``,``, a closing ``]``) onto its opening line, innermost
    first; arrays holding tables or anything spanning lines are left as they are.  A pure
    layout change for ``tomli_w``'s output (no multi-line strings); :func:`dumps_toml` checks
    it by parsing."""
    out: list[str] = []
    opened: list[int] = []  # indices in ``out`` of lines opening an array
    for line in text.splitlines():
        stripped = line.strip()
        if stripped in ("]", "],") and opened:
            start = opened.pop()
            items = out[start + 1:]
            if all(_is_element(x) for x in items):
                body = ", ".join(x.strip()[:-1] for x in items)
                del out[start + 1:]
                out[start] = f"{out[start]}{body}]{stripped[1:]}"
                continue
            opened.clear()  # something else in there: leave every enclosing array alone
        out.append(line)
        if line.endswith("["):
            opened.append(len(out) - 1)
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def _is_element(line: str) -> bool:
    """One whole array element on one line: ``<indent><value>,`` (a value on one line, or an
    inner array already joined)."""
    s = line.strip()
    return len(s) > 1 and s.endswith(",")
