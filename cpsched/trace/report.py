"""What the measured step says, in numbers and sentences (docs/trace.md): where each device's
time went, and measured step time against the same order simulated on the measured costs
(the model's error) against the optimum (what a better schedule would gain).
"""

from __future__ import annotations

from dataclasses import dataclass

from cpsched.metrics import busy_time
from cpsched.model import Schedule
from cpsched.trace.importer import TraceImport


@dataclass(frozen=True)
class DeviceTime:
    """Where one device's step went (ms): computing, in other pipeline ranges (send,
    receive, gradient reduction; PyTorch traces only), waiting at the start of compute ranges
    for input, and idle otherwise (the four add up to the step time)."""

    device: int
    compute: float
    other_ranges: float | None
    waiting: float
    idle: float


@dataclass(frozen=True)
class Comparison:
    """Measured step time vs the measured order simulated vs the optimum (ms).

    Attributes:
        measured: the measured step time.
        replay: the measured orders simulated with the measured (median) costs and latency.
        optimum: the solver's makespan on the derived instance (None: not solved).
        optimum_status: ``OPTIMAL`` or ``FEASIBLE`` (None: not solved).
        lower_bound: a proven bound on the derived instance's optimum (None: not solved).
    """

    measured: float
    replay: float
    optimum: float | None
    optimum_status: str | None
    lower_bound: float | None

    @property
    def model_error(self) -> float:
        """``(measured - replay) / measured``: the share of the measured step the model does
        not explain (variation, overheads it does not see; negative: the model is slower)."""
        return (self.measured - self.replay) / self.measured if self.measured > 0 else 0.0

    @property
    def schedule_gain(self) -> float | None:
        """``(replay - optimum) / replay``: what the best schedule saves over the measured
        order, both on the measured costs (None: not solved)."""
        if self.optimum is None or self.replay <= 0:
            return None
        return (self.replay - self.optimum) / self.replay


def device_times(run: TraceImport) -> list[DeviceTime]:
    """One :class:`DeviceTime` per device, from the aligned measured schedule."""
    busy = busy_time(run.measured)
    step = run.measured.makespan
    ms = run.raw.to_ms
    waiting = [0.0] * run.shape.p
    seen: set[int] = set()
    for a, sp in run.shape.spans.items():
        if id(sp) not in seen:
            seen.add(id(sp))
            waiting[run.shape.device_of(a.stage)] += run.aligned.waited[a]
    out = []
    for rank, d in sorted(run.shape.device.items(), key=lambda kv: kv[1]):
        other = run.raw.overhead.get(rank)
        other_ms = None if other is None else round(other * ms, 6)
        idle = step - busy[d] - (other_ms or 0.0) - waiting[d]
        out.append(DeviceTime(d, round(busy[d], 6), other_ms, round(waiting[d], 6),
                              round(max(0.0, idle), 6)))
    return out


def compare(run: TraceImport, optimum: Schedule | None) -> Comparison:
    """The three step times of the module docstring."""
    return Comparison(run.measured.makespan, run.replay.makespan,
                      None if optimum is None else optimum.makespan,
                      None if optimum is None else str(optimum.status),
                      None if optimum is None else optimum.lower_bound)


def _ms(x: float) -> str:
    return f"{x:.3f} ms"


def summary_lines(run: TraceImport, cmp: Comparison) -> list[str]:
    """The report's sentences: clocks, skew, latency, the three step times."""
    a = run.aligned
    k, n = run.raw.step
    lines = [f"trace: {run.raw.source}, {run.raw.p} ranks, step {k + 1} of {n}; "
             f"p={run.shape.p} v={run.shape.v} m={run.shape.m} {run.shape.placement}"
             + (" split backward" if run.shape.split_backward else "")]
    if a.mode == "none":
        lines.append("clocks: one host, kept as read (offset 0 on every rank)")
    else:
        lines.append("clocks aligned on the dependencies: " + "; ".join(
            f"device {d} {off:+.6f} ms ({why})" for d, (off, why) in enumerate(
                zip(a.offsets, a.why, strict=True))))
    if a.skew:
        worst = min(a.skew, key=lambda g: g.gap)
        lines.append(f"clock skew: {len(a.skew)} dependenc{'y' if len(a.skew) == 1 else 'ies'}"
                     f" look violated after alignment, up to {-worst.gap:.6f} ms "
                     f"({worst.consumer} on device {worst.target} starts before "
                     f"{worst.producer} on device {worst.source} ends)")
    lat = run.latency
    span = "" if lat.low is None else f"; gaps {lat.low:.3f}..{lat.high:.3f} ms"
    lines.append(f"p2p latency: {lat.value:g} ms ({lat.basis}, {lat.n} dependencies{span})")
    lines.append(f"step time: measured {_ms(cmp.measured)}; the same order simulated with "
                 f"the measured costs {_ms(cmp.replay)} (model error "
                 f"{100 * cmp.model_error:+.1f}% of the measured step)")
    if cmp.optimum is not None:
        gain = cmp.schedule_gain or 0.0
        lines.append(f"optimum on the measured costs: {_ms(cmp.optimum)} ({cmp.optimum_status}"
                     f"{'' if cmp.lower_bound is None else f', lower bound {_ms(cmp.lower_bound)}'}"
                     f"): a better schedule saves {100 * gain:.1f}% of the simulated step")
    return lines


__all__ = ["Comparison", "DeviceTime", "compare", "device_times", "summary_lines"]
