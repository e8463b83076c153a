"""Where the communication goes: the ``compute_comms`` rows (sends and receives placed so that
every receive comes before its consumer and no rank waits in a cycle).

PyTorch's ``_add_send_recv`` does the same lowering at run time for ``compute_only`` files; this
module writes it out so the file itself is the whole schedule.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from cpsched.actions import Action, Kind, step_actions
from cpsched.model import Schedule
from cpsched.rules import fused_rule_from
from cpsched.torch_io.formats import TorchCsvError, stage_to_rank
from cpsched.torch_io.orders import step_deps, torch_orders


def send_peer(action: Action, ranks: Sequence[int]) -> int | None:
    """The peer rank ``action``'s output goes to, or None when nothing is sent.

    ``F`` of stage s sends activations to stage s + 1 and ``B``/``I`` sends the input gradient to
    stage s - 1, unless that stage is on the same rank (PyTorch's "V-schedule special case"
    passes them locally).  ``W`` never sends.
    """
    s, S = action.stage, len(ranks)
    if action.kind == Kind.F and s < S - 1 and ranks[s + 1] != ranks[s]:
        return ranks[s + 1]
    if action.kind in (Kind.B, Kind.I) and s > 0 and ranks[s - 1] != ranks[s]:
        return ranks[s - 1]
    return None


def step_starts(schedule: Schedule) -> dict[Action, float]:
    """Start time of every action of ``schedule`` (instance units)."""
    return {a.action: a.start for a in schedule.actions}


def comms_rows(schedule: Schedule, *, reduce_grad: bool = True) -> list[list[str]]:
    """The ``compute_comms`` rows: every compute step plus its sends and receives.

    Insertion rule (deadlock-free by construction): the compute steps of all ranks are visited
    in one global sequence that follows the schedule's own start times (ties by rank) and only
    visits a step once every step it depends on (docs/spec.md §1) has been visited.  When a step is
    visited it is appended to its rank's row, immediately followed by a ``SEND_F`` / ``SEND_B``
    for each of its actions whose output goes to another rank; the matching ``RECV_F`` /
    ``RECV_B`` is appended to the receiving rank's row at the same moment.  Hence

    * every receive is posted before the compute that consumes it (the runtime asserts this),
    * sends and receives between any two ranks appear in the same order on both sides (gloo and
      NCCL match point-to-point messages between a pair of ranks in posting order),
    * sends are posted right after the compute that produces them, so a rank blocked on a
      receive always waits for a compute that comes earlier in the global sequence: no cycle.

    With ``reduce_grad`` a ``{stage}REDUCE_GRAD`` follows the step that completes a stage's
    last backward (the m-th ``B`` or ``W``), as PyTorch's own lowering (``_add_reduce_grad``)
    does: the runtime scales gradients by ``1/m`` there, so leave it on when running the file.
    (PyTorch's dry-run ``_simulate_comms_compute`` does not know ``REDUCE_GRAD``; drop those
    cells before calling it.)

    Returns:
        ``rows[r]`` = rank r's cells, e.g. ``["0F0", "0SEND_F0", "1RECV_B0", "0B0", ...]``.

    Raises:
        TorchCsvError: as :func:`torch_orders`.
    """
    instance = schedule.instance
    ranks = stage_to_rank(instance)
    orders = torch_orders(schedule)
    starts = step_starts(schedule)
    rule = fused_rule_from(a for steps in orders for st in steps for a in step_actions(st))
    m = instance.m
    rows: list[list[str]] = [[] for _ in orders]
    ptr = [0] * len(orders)
    done: set[Action] = set()
    backward_count: dict[int, int] = defaultdict(int)
    remaining = sum(len(s) for s in orders)
    while remaining:
        best: tuple[float, int] | None = None
        for r, steps in enumerate(orders):
            if ptr[r] >= len(steps):
                continue
            step = steps[ptr[r]]
            if any(d not in done for d in step_deps(instance, step, rule)):
                continue
            key = (starts[step_actions(step)[0]], r)
            if best is None or key < best:
                best = key
        if best is None:  # pragma: no cover - torch_orders already ruled deadlocks out
            raise TorchCsvError("the schedule's orders deadlock")
        r = best[1]
        step = orders[r][ptr[r]]
        ptr[r] += 1
        remaining -= 1
        rows[r].append(str(step))
        reduce_now: list[int] = []
        for a in step_actions(step):
            done.add(a)
            peer = send_peer(a, ranks)
            if peer is not None:
                if a.kind == Kind.F:
                    rows[r].append(f"{a.stage}SEND_F{a.microbatch}")
                    rows[peer].append(f"{a.stage + 1}RECV_F{a.microbatch}")
                else:
                    rows[r].append(f"{a.stage}SEND_B{a.microbatch}")
                    rows[peer].append(f"{a.stage - 1}RECV_B{a.microbatch}")
            if a.kind in (Kind.B, Kind.W):
                backward_count[a.stage] += 1
                if backward_count[a.stage] == m:
                    reduce_now.append(a.stage)
        if reduce_grad:
            rows[r].extend(f"{s}REDUCE_GRAD" for s in reduce_now)
    return rows


__all__ = ["comms_rows", "send_peer", "step_starts"]
