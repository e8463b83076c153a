# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 03 — The memory–makespan Pareto front
#
# One model, three ways to place it.  An 8-layer model on `p = 4` devices, 8 microbatches,
# split backward with `F = I = W = 1` and 1 activation unit per layer:
#
# * `loop`, `v = 1`: 2 layers per stage (F = I = W = 2, activation 2): 1F1B, ZB-H1, ZB-H2
#   and the Zero Bubble authors' automatic schedule ZB-auto;
# * `loop`, `v = 2`: 1 layer per stage: Megatron's interleaved 1F1B, interleaved ZB;
# * `v`, `v = 2`: the V placement: ZB-V, DualPipe-V, and the Zero Bubble authors'
#   memory-controllable V-Half and V-Min and their greedy ZBV.
#
# `pareto_fronts` solves each instance under every per-device memory limit from the least
# possible up to what the unconstrained optimum uses — every (instance, limit) solve a
# task on a local Dask cluster (pass `scheduler="tcp://HOST:PORT"` for a real cluster, and
# `study=DIR` to keep each solve on disk and resume; docs/studies.md).  The known schedules
# are placed at their own peak memory.  Filled dots are proven optimal, hollow ones the best
# found within the deterministic budget (CP-SAT `max_deterministic_time`, one thread per
# solve: the same front on any machine).

# %%
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import display

from cpsched import Instance, plots
from cpsched.study import pareto_fronts, schedule_points

ROOT = Path.cwd().parent if (Path.cwd().parent / "instances").is_dir() else Path.cwd()
pd.set_option("display.width", 160)
pd.set_option("display.max_columns", 30)

DET = {"max_deterministic_time": 1.0}


def model(v: int, placement: str, name: str) -> Instance:
    """The 8-layer model on 4 devices with v chunks per device (2 // v layers per stage)."""
    k = 2 // v
    return Instance.from_dict({
        "name": name,
        "pipeline": {"devices": 4, "stages_per_device": v, "microbatches": 8,
                     "placement": placement, "split_backward": True},
        "costs": {"forward": k, "backward_input": k, "backward_weight": k},
        "memory": {"activation": k},
    })


CASES = [
    (model(1, "loop", "loop-v1"), ["1f1b", "zb-h1", "zb-h2", "zb-auto"]),
    (model(2, "loop", "loop-v2"), ["interleaved-1f1b", "interleaved-zb"]),
    (model(2, "v", "v-shape"), ["zbv", "dualpipev", "v-half", "v-min", "zbv-greedy"]),
]

# %%
fronts = pareto_fronts([inst for inst, _ in CASES], time_limit=None, workers=1,
                       parameters=DET, jobs=2)
points = {inst.name: schedule_points(inst, names) for inst, names in CASES}
for inst, names in CASES:
    missing = set(names) - {name for name, _, _ in points[inst.name]}
    assert not missing, f"{inst.name}: not applicable: {missing}"
    print(inst.name, [(pt.limit, pt.makespan, pt.status) for pt in fronts[inst.name]])

# %%
fig, axes = plt.subplots(1, 3, figsize=(16, 4.6), sharey=True, layout="constrained")
for ax, (inst, _) in zip(axes, CASES, strict=True):
    plots.pareto(fronts[inst.name], ax=ax, schedules=points[inst.name])
    ax.set_title(inst.name, loc="left", fontsize=11)
plt.show()

# %% [markdown]
# ## Each schedule against the front
#
# For each known schedule: the front's makespan at the schedule's peak memory (the best
# any schedule can do with that much memory), and the least memory at which the front
# reaches the schedule's makespan (how much memory the schedule could save).

# %%
rows = []
for inst, _ in CASES:
    front = fronts[inst.name]
    for name, peak, makespan in points[inst.name]:
        at_peak = min(pt.makespan for pt in front if pt.limit <= peak + 1e-9)
        enough = min((pt.limit for pt in front if pt.makespan <= makespan + 1e-9),
                     default=float("nan"))
        proven = all(pt.status == "OPTIMAL" for pt in front if pt.limit <= peak + 1e-9
                     and pt.makespan == at_peak)
        below = all(pt.status == "OPTIMAL" for pt in front if pt.limit < peak - 1e-9)
        rows.append({"placement": inst.name, "schedule": name, "peak_memory": peak,
                     "makespan": makespan, "front_at_peak": at_peak,
                     "slower_pct": 100 * (makespan - at_peak) / makespan,
                     "memory_needed_on_front": enough, "front_proven_there": proven,
                     "front_proven_below": below})
table = pd.DataFrame(rows)
display(table.round(2))

# %% [markdown]
# ## Conclusion

# %%
for row in table.itertuples(index=False):
    name = f"{row.schedule} ({row.placement}, {row.makespan:g} at memory {row.peak_memory:g})"
    nothing = "nothing is" if row.front_proven_there else "nothing was found"
    if row.slower_pct > 1e-9:
        print(f"{name}: the front gives {row.front_at_peak:g} with that memory "
              f"({row.slower_pct:.1f}% faster) and matches {row.makespan:g} already at "
              f"memory {row.memory_needed_on_front:g}.")
    elif row.memory_needed_on_front < row.peak_memory - 1e-9:
        print(f"{name}: {nothing} faster with that memory, but the same makespan needs "
              f"only {row.memory_needed_on_front:g}.")
    else:
        less = ("nor as fast with less" if row.front_proven_below else
                "and nothing as fast was found with less (not all of those points proven)")
        print(f"{name}: on the front — {nothing} faster with that memory, {less}.")
for inst, _ in CASES:
    front = fronts[inst.name]
    lo, hi = front[0], front[-1]
    print(f"{inst.name}: from the least memory ({lo.limit:g}) to {hi.limit:g} the best "
          f"makespan falls from {lo.makespan:g} to {hi.makespan:g} "
          f"({lo.makespan / hi.makespan:.2f}x); "
          f"{sum(pt.status == 'OPTIMAL' for pt in front)} of {len(front)} points proven.")
