"""Order transforms of known schedules (cpsched.schedules.transforms)."""

from __future__ import annotations

from collections import Counter

from conftest import make

from cpsched.actions import Overlap
from cpsched.instance import Instance
from cpsched.schedules import run_schedule
from cpsched.schedules.transforms import pairs_within_limit
from cpsched.validate import validate


def _dualpipe_shape(p: int, m: int, limit: float | None) -> Instance:
    return make(p, 1, m, F=1, I=1, W=1, overlap=2.5, placement="bidirectional", limit=limit)


def test_dualpipe_fitted_to_p_activations_is_valid_and_breaks_only_pairs() -> None:
    """DualPipe holds p + 1 activations (docs/spec.md §6); under a limit of p its pairs
    over the limit run backward, then forward: valid, at most p held, the same actions,
    and each broken pair costs its saving (docs/modelling.md §62)."""
    inst = _dualpipe_shape(6, 12, limit=6)
    dualpipe = run_schedule("dualpipe", inst)
    assert max(dualpipe.peak_memory) == 7 and validate(dualpipe)
    fitted = pairs_within_limit(dualpipe)
    assert fitted is not None and fitted.method == "dualpipe-fitted"
    assert validate(fitted) == [] and max(fitted.peak_memory) <= 6
    assert Counter(a.action for a in fitted.actions) == Counter(
        a.action for a in dualpipe.actions)
    pairs = sum(isinstance(s, Overlap) for row in dualpipe.orders() for s in row)
    kept = sum(isinstance(s, Overlap) for row in fitted.orders() for s in row)
    assert 0 < kept < pairs
    assert fitted.makespan == 39.0 > dualpipe.makespan == 36.0


def test_pairs_within_limit_returns_none_where_it_cannot_or_need_not_fit() -> None:
    # no limit; DualPipe within it; a plain warm-up forward over it (limit below p)
    for limit in (None, 7, 5):
        assert pairs_within_limit(run_schedule("dualpipe", _dualpipe_shape(6, 12, limit))) \
            is None
