"""The list portfolio's loose admission slack, searched per rule (docs/modelling.md §42).

Under a memory limit the list scheduler's makespan is U-shaped in its admission slack (the
memory a device may book beyond the strict reservation, :mod:`cpsched.schedules.listsched`):
too tight and memory idles while a device waits for its first backward, too loose and
microbatches crowd the devices and hold memory longer.  Where the bottom lies grows with the
pipeline's depth: 4–6 largest stage activations on p = 16 memory-paced V instances, 11–15 on
p = 32 loop instances with four chunks (docs/modelling.md §42), where the portfolio's fixed
slacks 4, 5, 6 and 8 (sessions 8 and 33) stopped short of it.

:func:`slack_search` walks a rule's slacks up a grid (:data:`SLACK_GRID`) until
:data:`PATIENCE` grid points in a row are no shorter than the best so far, then tries the
best one's neighbours (:data:`REFINE`).  The curve is not smooth (one slack more can cost a
few per cent), so the walk does not stop at the first rise.  At most ``len(SLACK_GRID) +
len(REFINE)`` runs per rule; the caller's deadline ends it earlier.
"""

from __future__ import annotations

from collections.abc import Callable

#: Slacks tried in order, in units of the largest stage activation.
SLACK_GRID: tuple[int, ...] = (4, 6, 8, 11, 14, 18, 23)
#: Grid points in a row no shorter than the best that end the walk up the grid.
PATIENCE = 2
#: Offsets from the best grid slack tried after the walk.
REFINE: tuple[int, ...] = (-1, 1, -2, 2)
#: Rules searched, in order (the first is the one most often best: V-Min, V-Half, limit 24,
#: random p32 loop; ``dfs`` on p32 loop v4 with uniform costs or a quarter of 1F1B's memory).
LOOSE_RULES: tuple[str, ...] = ("due0.4", "dfs", "ilv")


def slack_search(makespan: Callable[[int], int | None],
                 grid: tuple[int, ...] = SLACK_GRID, patience: int = PATIENCE,
                 refine: tuple[int, ...] = REFINE) -> dict[int, int]:
    """Search the slack ``k`` (an int >= 0) that minimises ``makespan(k)``.

    Args:
        makespan: one list-scheduling run at slack ``k``: its makespan (ticks), or None when
            there is no time left (the search stops).
        grid: slacks walked in increasing order; patience: grid points in a row no shorter
            than the best that end the walk; refine: offsets from the best grid slack tried
            afterwards (negative results skipped).

    Returns:
        ``{slack: makespan}`` of every run made, in the order made (empty if none).
    """
    seen: dict[int, int] = {}

    def run(k: int) -> bool:
        if k < 0 or k in seen:
            return True
        value = makespan(k)
        if value is None:
            return False
        seen[k] = value
        return True

    best, worse = None, 0
    for k in grid:
        if not run(k):
            return seen
        if best is None or seen[k] < seen[best]:
            best, worse = k, 0
        else:
            worse += 1
            if worse >= patience:
                break
    for dk in refine if best is not None else ():
        if not run(best + dk):
            break
    return seen


__all__ = ["LOOSE_RULES", "PATIENCE", "REFINE", "SLACK_GRID", "slack_search"]
