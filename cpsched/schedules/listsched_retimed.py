"""The list scheduler's orders found without the link latency, timed with it
(docs/modelling.md §27).

A non-delay list scheduler starts whatever is available when a device falls idle.  With a
p2p latency the action the device should run next (the forward or backward that keeps the
pipeline in step) often arrives a fraction of a unit *after* the device becomes free, so the
device starts something else — a weight gradient, another direction's forward — and the
late action waits a whole duration.  On the same instance without latency every arrival
coincides with an end, and the scheduler keeps the pipeline in step.  This generator runs the
list scheduler (:func:`~cpsched.schedules.listsched.pipeline_list_schedule`, its whole
portfolio) on the instance with ``costs.p2p_latency = 0`` and returns those per-device orders;
the registry times them with the latency by the one simulator.

Why the orders stay valid (docs/modelling.md §27): the dependencies of docs/spec.md §1 are the
same with any latency (only their lags change), so orders that run without latency run with
it; and a device's memory at every instant is fixed by its own order (activation taken at a
forward's start, given back at its backward's end, one action at a time or one overlapped
pair), so the peak per device is the latency-free run's, within the limit.  The registry
validates the timed schedule like every other one.

Measured (docs/modelling.md §27): p8 bidirectional m32, ``F = I = W = 1``, latency 0.1,
limit 4: the list scheduler 138.7, its latency-free orders timed with the latency 116.9 (the
lower bound is 109).
"""

from __future__ import annotations

from cpsched.instance import Instance
from cpsched.model import DeviceOrders
from cpsched.schedules.listsched import list_scheduler
from cpsched.schedules.registry import register

#: Seconds per action worth starting ``list-retimed`` with under a deadline: one list pass,
#: timing and validating the result (about 0.5 s at 24 576 actions on this machine).
SECONDS_PER_ACTION = 2e-5


def _min_seconds(inst: Instance) -> float:
    return SECONDS_PER_ACTION * inst.n_actions


def _needs_latency(inst: Instance) -> str | None:
    if inst.p2p_latency > 0:
        return None
    return "costs.p2p_latency = 0: list-retimed needs a latency > 0 (else it is list)"


@register("list-retimed",
          summary="the list scheduler's orders on the instance without p2p latency, timed "
                  "with the latency (keeps the pipeline in step where the non-delay rule "
                  "fills the latency's gaps with the wrong action)",
          preconditions="costs.p2p_latency > 0",
          source="list scheduling (HLS) as in list; re-timing fixed orders by the "
                 "simulator (docs/modelling.md §27)",
          check=_needs_latency, expensive=True, min_seconds=_min_seconds)
def list_retimed(inst: Instance) -> DeviceOrders:
    """Per-rank orders of ``list`` (:func:`~cpsched.schedules.listsched.list_scheduler`,
    its defaults: the memory-aware portfolio under a limit) on ``inst`` with
    ``costs.p2p_latency = 0``, to be timed on ``inst`` itself (module docstring).

    Raises:
        NotApplicable: through the registry, when ``inst`` has no latency.
        ListSchedulerError: the scheduler got stuck (a bug).
    """
    return list_scheduler(inst.replace(**{"costs.p2p_latency": 0}))


__all__ = ["SECONDS_PER_ACTION", "list_retimed"]
