"""Memory limits in a study: an instance at another limit, limits as dictionary keys, and the
step at which a device's held memory can change."""

from __future__ import annotations

import math

from cpsched.instance import Instance


def with_memory_limit(instance: Instance, limit: float | None) -> Instance:
    """A copy of ``instance`` whose per-device memory limit is ``limit`` (activation units;
    None: no limit), revalidated.

    Raises:
        InstanceError: ``limit`` is below what the instance needs (field ``memory.limit``)
            or negative.
    """
    data = instance.to_dict()
    memory = {k: v for k, v in data["memory"].items() if k != "limit"}
    if limit is not None:
        memory["limit"] = limit
    return Instance.from_dict({**data, "memory": memory})


def limit_key(limit: float | None) -> float | None:
    """A memory limit as a dictionary key: rounded to 9 decimals (None stays None)."""
    return None if limit is None else round(float(limit), 9)


def memory_quantum(inst: Instance) -> float:
    """The step of the values a device's held memory can take (the gcd of the stage
    activations and their ``released_by_input`` parts, to 6 decimals): the front can only
    change at multiples of it above :meth:`Instance.min_memory_limit`."""
    r = inst.released_by_input
    vals = {round(x * 1e6) for a in inst.activation for x in (a, a * r, a * (1 - r))}
    g = 0
    for v in vals:
        g = math.gcd(g, v)
    return g / 1e6 if g else 1.0
