"""Shared fixtures: a tiny instance, an instance that uses every feature, known optima."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import reject

from cpsched.instance import Instance, InstanceError

ROOT = Path(__file__).resolve().parents[1]
INSTANCES = ROOT / "instances"


def make(p: int = 4, v: int = 1, m: int = 8, *, F: float = 5, B: float | None = 10,  # noqa: N803
         I: float | None = None, W: float | None = None, placement: str = "loop",  # noqa: N803, E741
         limit: float | None = None, latency: float = 0, activation: Any = 1,
         released_by_input: float = 0.0, overlap: float | None = None,
         name: str = "t") -> Instance:
    """Build an instance from keyword arguments (split backward when I and W are given)."""
    split = I is not None and W is not None
    costs: dict[str, Any] = {"forward": F, "p2p_latency": latency}
    if split:
        costs.update(backward_input=I, backward_weight=W)
    else:
        costs["backward"] = B
    if overlap is not None:
        costs["overlap_forward_backward"] = overlap
    memory: dict[str, Any] = {"activation": activation, "released_by_input": released_by_input}
    if limit is not None:
        memory["limit"] = limit
    return Instance.from_dict({
        "name": name,
        "pipeline": {"devices": p, "stages_per_device": v, "microbatches": m,
                     "placement": placement, "split_backward": split},
        "costs": costs, "memory": memory,
    })


def overlap_in_range(build: Callable[[], Instance]) -> Instance:
    """``build()``, or reject the hypothesis example when its overlap cost is outside the
    physical range ``max(F, B) <= overlap <= F + B`` (docs/spec.md §2.2); any other error
    propagates."""
    try:
        return build()
    except InstanceError as exc:
        if exc.field != "costs.overlap_forward_backward":
            raise
        reject()


@pytest.fixture
def tiny() -> Instance:
    """p=2, v=1, m=2, F=1, B=2."""
    return make(2, 1, 2, F=1, B=2)


@pytest.fixture
def article() -> Instance:
    """The article's example: p=4, v=2, m=8, F=5, B=10 (optimum 285)."""
    return make(4, 2, 8, F=5, B=10, name="article")


@pytest.fixture
def every_feature() -> Instance:
    """v placement, split backward, per-stage float costs, latency, memory limit with
    released_by_input."""
    return Instance.from_dict({
        "name": "every-feature",
        "pipeline": {"devices": 2, "stages_per_device": 2, "microbatches": 4,
                     "placement": "v", "split_backward": True},
        "costs": {"forward": [1.5, 1.0, 1.25, 2.0], "backward_input": [1.5, 1.0, 1.0, 2.0],
                  "backward_weight": [1.0, 0.5, 0.75, 1.0], "p2p_latency": 0.25},
        "memory": {"activation": [1.0, 2.0, 1.0, 1.0], "released_by_input": 0.5,
                   "limit": 5},
    })


def same_table(a: Any, b: Any) -> None:
    """Two study tables (DataFrames) equal cell for cell as written to CSV, wall times
    aside."""
    from io import StringIO

    import pandas as pd

    def norm(df: pd.DataFrame) -> pd.DataFrame:
        buf = StringIO()
        df.drop(columns=["solve_seconds"]).to_csv(buf, index=False)
        buf.seek(0)
        return pd.read_csv(buf)

    pd.testing.assert_frame_equal(norm(a), norm(b))


def known_upper(inst: Instance) -> int:
    """The best known schedule that fits (ticks): what ``solve`` warm-starts from."""
    import time

    from cpsched.solver import facade
    from cpsched.solver.warm_start import best_warm_start
    return best_warm_start(inst, facade._known(inst, None, time.perf_counter(), 1))[2]  # noqa: SLF001


def model_optimum(inst: Instance, upper: int) -> int | None:
    """The optimum (ticks) of the full model alone (horizon ``upper``), without any of our
    bounds; None if CP-SAT (one worker) does not prove it within 20 deterministic units."""
    from ortools.sat.python import cp_model

    from cpsched.solver.pipeline_model import PipelineModel
    pm = PipelineModel(inst, upper, 0)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_deterministic_time = 20.0
    if solver.solve(pm.model) != cp_model.OPTIMAL:
        return None
    return round(solver.objective_value)


@pytest.fixture
def validate_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The methods of the schedules the registry validates (its ``validate`` spied on), in
    call order."""
    from cpsched.schedules import registry

    calls: list[str] = []
    real = registry.validate

    def counting(schedule, instance=None, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        calls.append(schedule.method)
        return real(schedule, instance, *a, **k)

    monkeypatch.setattr(registry, "validate", counting)
    return calls
