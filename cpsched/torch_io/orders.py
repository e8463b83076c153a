"""Per-rank orders as PyTorch runs them: checked complete and free of deadlock.

The runtime executes each rank's cells in order and blocks until what a step needs has run, so
an order is runnable when the dependency scan of the event engine
(:func:`cpsched.engine.run_orders`, times ignored) leaves no rank stuck.  Shared by the export
(:mod:`cpsched.torch_io.export`, :mod:`cpsched.torch_io.comms`) and the import
(:mod:`cpsched.torch_io.parse`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cpsched.actions import Action, DeviceOrders, Step, step_actions
from cpsched.engine import Stuck, run_orders
from cpsched.instance import Instance
from cpsched.model import Schedule
from cpsched.rules import FusedRule, dependencies
from cpsched.simulate import OrderError, check_orders
from cpsched.torch_io.formats import TorchCsvError, stage_to_rank


@dataclass(frozen=True)
class CellRef:
    """Where a step came from: 1-based ``row`` and ``column`` of the CSV, and the cell text."""

    row: int
    column: int
    cell: str


def step_deps(instance: Instance, step: Step, rule: FusedRule) -> list[Action]:
    """Actions that must have run before ``step`` (docs/spec.md §1), excluding its own
    members."""
    members = step_actions(step)
    return [pred for a in members for pred, _lag in dependencies(instance, a, rule)
            if pred not in members]


def dependency_scan(instance: Instance, orders: Sequence[Sequence[Step]]) -> list[Stuck]:
    """Run the orders with dependencies only (the engine's fixed-order run, times ignored;
    a pair's dependency on its own member is ignored): the ranks left stuck (empty = none)."""
    return run_orders(instance, orders, strict=False).stuck


def stuck_message(stuck: Sequence[Stuck], orders: Sequence[Sequence[Step]],
                  where: Mapping[Action, CellRef] | None) -> str:
    """``HERE waits for ACTION at THERE; ...`` for every stuck rank, with CSV cells when
    ``where`` is given, else rank and step index."""
    owner = {a: (r, k) for r, steps in enumerate(orders) for k, st in enumerate(steps)
             for a in step_actions(st)}
    parts = []
    for st in stuck:
        if where is not None:
            ref = where[step_actions(st.step)[0]]
            here = f"row {ref.row} (rank {st.rank}) column {ref.column} {ref.cell.strip()!r}"
        else:
            here = f"rank {st.rank} step {st.index} {st.step}"
        r2, k2 = owner[st.waits_for]
        if where is not None:
            ref2 = where[st.waits_for]
            there = f"row {ref2.row} (rank {r2}) column {ref2.column}"
        else:
            there = f"rank {r2} step {k2}"
        parts.append(f"{here} waits for {st.waits_for} at {there}")
    return "; ".join(parts)


def torch_orders(schedule: Schedule) -> DeviceOrders:
    """The per-rank compute orders to export: :meth:`Schedule.orders`, checked to be complete
    (every action once, on its rank) and free of deadlock.

    Raises:
        TorchCsvError: bidirectional placement, incomplete orders or orders that deadlock.
    """
    instance = schedule.instance
    stage_to_rank(instance)
    orders = schedule.orders()
    try:
        check_orders(instance, orders)
    except OrderError as exc:
        raise TorchCsvError(f"the schedule cannot be exported: {exc}") from None
    stuck = dependency_scan(instance, orders)
    if stuck:
        raise TorchCsvError("the schedule cannot be exported, its per-rank orders deadlock: "
                            + stuck_message(stuck, orders, None))
    return orders


__all__ = ["CellRef", "dependency_scan", "step_deps", "stuck_message", "torch_orders"]
