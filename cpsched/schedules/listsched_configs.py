"""The memory-aware list portfolio's runs: which rule, window, admission slack, ``W`` policy,
cap and pairing mode each run of :func:`cpsched.schedules.listsched.pipeline_list_schedule`'s
portfolio uses (the scheduler and the portfolio's loop: :mod:`cpsched.schedules.listsched`).

The rules are those of :mod:`cpsched.schedules.listsched_rules` (``ilv`` after Megatron-LM's
interleaved 1F1B, arXiv:2104.04473; ``dfs`` → 1F1B and ``bfs`` → GPipe after the
pipeline-scheduling article, docs/references.md#pipeline-scheduling-article; ``due`` with
several periods); windows and slacks are the admission tests of the scheduler's module
docstring.
"""

from __future__ import annotations

from cpsched.instance import Instance
from cpsched.schedules.listsched_pairs import pair_modes
from cpsched.schedules.listsched_rules import Problem, default_window, interleaved_cap

#: ``due`` periods tried by the portfolio, as fractions of a device's work per microbatch.
DUE_FRACTIONS = (0.2, 0.3, 0.4, 0.5, 1.0)
#: Rules of the memory-aware portfolio, in order.
PORTFOLIO_RULES: tuple[str, ...] = ("dfs", "bfs", *(f"due{x}" for x in DUE_FRACTIONS))
#: Admission slacks tried by the portfolio, in units of the largest stage activation.
SLACKS: tuple[float | None, ...] = (0.0, 1.0, 2.0, None)
#: Windows tried by the portfolio: ``round(a * p + b * (p - 1 - d))`` for device d.
WINDOWS: tuple[tuple[float, float] | None, ...] = (None, (1.0, 1.0), (2.0, 2.0))

#: One portfolio run: (rule, window, slack, W policy, cap, pairs); ``cap`` (memory units) is
#: the admission target of a run without a memory limit (None: the instance's limit, if any);
#: ``pairs`` the :class:`~cpsched.schedules.listsched_pairs.Pairing` mode (None: no pairs).
Config = tuple[str, tuple[int, ...] | None, float | None, str, float | None, str | None]


def window_of(inst: Instance, spec: tuple[float, float] | None) -> tuple[int, ...] | None:
    """The window ``round(a * p + b * (p - 1 - d))`` (at least 1) per device ``d`` for
    ``spec = (a, b)``, shape ``(p,)``; None for None (no window)."""
    if spec is None:
        return None
    a, b = spec
    return tuple(max(1, int(round(a * inst.p + b * (inst.p - 1 - d)))) for d in range(inst.p))


def ilv_configs(pb: Problem, memory: bool) -> list[Config]:
    """The ``ilv`` runs that open the portfolio, all without a window and with ``W`` lazy
    (neither a window nor eager ``W`` ever helped ``ilv`` on the shipped instances).

    With a memory limit: the strict reservation (slack 0), then the banker's rule alone.
    Without one: the banker's rule under
    :func:`~cpsched.schedules.listsched_rules.interleaved_cap` (interleaved 1F1B's own peak
    as the target), then no memory test at all.
    """
    modes = pair_modes(pb.inst)
    if not memory:
        return [("ilv", None, None, "lazy", c, pm) for c in (interleaved_cap(pb), None)
                for pm in modes]
    return [("ilv", None, sl, "lazy", None, pm) for sl in (0.0, None) for pm in modes]


def portfolio_configs(inst: Instance, memory: bool) -> list[Config]:
    """The portfolio's other (rule, window, slack, W policy, cap) runs, in order: every rule
    of :data:`PORTFOLIO_RULES` with every window of :data:`WINDOWS` (and the ``dfs`` default
    window without a memory limit), every slack of :data:`SLACKS` (times the largest stage
    activation; the banker's rule alone without a limit), and eager ``W`` too on a split
    backward without a window."""
    amax = max(inst.activation)
    windows = [window_of(inst, w) for w in WINDOWS]
    if not memory:
        windows.append(default_window(inst))
    slacks = [None if x is None else x * amax for x in SLACKS] if memory else [None]
    w_policies = ("lazy", "eager") if inst.split_backward else ("lazy",)
    return [(r, w, sl, wp, None, None) for r in PORTFOLIO_RULES for w in windows
            for sl in slacks for wp in w_policies if wp == "lazy" or w is None]


def spread(items: list[Config], k: int) -> list[Config]:
    """``k`` of ``items`` evenly spread (all of them when ``k >= len(items)``)."""
    if k >= len(items):
        return items
    return [items[(j * len(items)) // k] for j in range(k)]


__all__ = ["DUE_FRACTIONS", "PORTFOLIO_RULES", "SLACKS", "WINDOWS", "Config", "ilv_configs",
           "portfolio_configs", "spread", "window_of"]
