"""How numbers and verdicts are written for people: the command line's tables and the
``cpsched serve`` page use the same words."""

from __future__ import annotations

from collections.abc import Sequence


def fmt(x: float | None, digits: int = 3) -> str:
    """A number for a table: ``-`` for None, integers without decimals, else at most
    ``digits`` decimals with trailing zeros dropped."""
    if x is None:
        return "-"
    if float(x).is_integer():
        return str(int(x))
    return f"{x:.{digits}f}".rstrip("0").rstrip(".")


def verdict(status: str, violations: Sequence[str] | None) -> str:
    """The status shown for a schedule: its own status when the validator found nothing,
    else ``OVER LIMIT`` (a memory limit broken) or ``INVALID`` (any other rule)."""
    if not violations:
        return str(status)
    return "OVER LIMIT" if any("memory limit" in v for v in violations) else "INVALID"


__all__ = ["fmt", "verdict"]
