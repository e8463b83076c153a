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
# # 04 — List scheduling: AFAB and 1F1B from a tie-breaker
#
# A list scheduler advances from event to event; whenever a device is idle it starts the
# *best available* action by a priority rule.  The article's point: with a **breadth-first**
# tie-breaker (forwards first, lowest stage, lowest microbatch) it produces AFAB / GPipe;
# with a **depth-first** one (lowest microbatch, furthest along its chain) it produces 1F1B
# — the admission window that keeps 1F1B's memory low is the `p - d` microbatches in
# flight on device `d`.

# %%
import inspect
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from cpsched import Instance, load_instance, plots, simulate, solve
from cpsched.actions import format_orders
from cpsched.core import hls_example, list_schedule, makespan_of
from cpsched.schedules import REGISTRY
from cpsched.solver import solve_graph

ROOT = Path.cwd().parent if (Path.cwd().parent / "instances").is_dir() else Path.cwd()
pd.set_option("display.width", 160)
pd.set_option("display.max_columns", 30)

LIST = REGISTRY.get("list")
HAS_TIE_BREAK = LIST is not None and "tie_break" in inspect.signature(LIST.generate).parameters
print("list scheduler:", "registered, with tie_break" if HAS_TIE_BREAK else
      "not available in this version: the cells below only explain what they would show")

inst = Instance.from_dict({
    "name": "p4-m8", "pipeline": {"devices": 4, "microbatches": 8},
    "costs": {"forward": 1, "backward": 2},
})

# %% [markdown]
# ## Breadth-first vs depth-first
#
# Both rules are run through the same simulator as the named schedules; we compare the
# per-device orders themselves, not only the makespans.

# %%
runs = {}
if HAS_TIE_BREAK:
    for rule, named in (("bfs", "gpipe"), ("dfs", "1f1b")):
        orders = LIST.generate(inst, tie_break=rule)
        same = orders == REGISTRY[named].generate(inst)
        sch = simulate(inst, orders, method=f"list ({rule})")
        runs[rule] = (sch, named, same)
        print(f"tie_break={rule!r}: makespan {sch.makespan}, peak memory per device "
              f"{sch.peak_memory}; identical orders to {named}: {same}")
        print(format_orders(orders), end="\n\n")

# %%
if runs:
    fig, axes = plt.subplots(2, 1, figsize=(11, 6.5), layout="constrained")
    for ax, (rule, (sch, named, same)) in zip(axes, runs.items(), strict=True):
        plots.gantt(sch, ax=ax, title=f"list scheduling, tie_break={rule!r} "
                    f"({'same orders as' if same else 'compare with'} {named})")
    plt.show()

# %% [markdown]
# ## Under a memory limit
#
# With `memory.limit`, the list scheduler admits a microbatch on a device only when the
# memory it will need fits, and tries a small portfolio of rules.  How close does that
# get to the optimum?

# %%
limited = load_instance(ROOT / "instances" / "article-memory6.toml")
opt = solve(limited, time_limit=30, workers=1, parameters={"max_deterministic_time": 3.0})
print(f"{limited.name} (p={limited.p}, v={limited.v}, m={limited.m}, limit "
      f"{limited.memory_limit:g}): optimum {opt.makespan} ({opt.status}, bound "
      f"{opt.lower_bound})")
if HAS_TIE_BREAK:
    mem = simulate(limited, LIST.generate(limited), method="list")
    print(f"memory-aware list scheduling: {mem.makespan}, peak {max(mem.peak_memory):g}")

# %% [markdown]
# ## HLS: the tie-breaker matters more than the priority
#
# The same list scheduler works on cpsched's general core (`cpsched.core.ResourceGraph`:
# tasks, resources of any capacity, lags, memory buffers) — pipelines are one builder of it.
# The article's high-level-synthesis example evaluates `(a+b)*(c+d) + (e+f)*(g+h)` with
# **one multiplier and two adders**. Every addition has the same ALAP priority; only the
# tie-breaker decides which two additions run first.

# %%
hls = hls_example()
ties = {"same multiplication first": ["a+b", "c+d", "e+f", "g+h", "m1", "m2", "sum"],
        "cross pairs first": ["a+b", "e+f", "c+d", "g+h", "m1", "m2", "sum"]}
hls_runs = {}
for label, order in ties.items():
    st = list_schedule(hls, key=order.index)
    hls_runs[label] = st
    print(f"{label:>26}: multiplier starts at cycle {min(st['m1'], st['m2'])}, "
          f"result after {makespan_of(hls, st)} cycles  {st}")
hls_opt = solve_graph(hls, workers=1)
print(f"CP-SAT on the same graph: {hls_opt.makespan} cycles ({hls_opt.status})")

# %% [markdown]
# ## Conclusion

# %%
if runs:
    (bfs, _, bfs_same), (dfs, _, dfs_same) = runs["bfs"], runs["dfs"]
    print(f"Breadth-first tie-breaking {'reproduces' if bfs_same else 'does not reproduce'} "
          f"GPipe's orders and depth-first {'reproduces' if dfs_same else 'does not reproduce'}"
          f" 1F1B's; "
          + (f"both take {bfs.makespan:g}" if bfs.makespan == dfs.makespan else
             f"they take {bfs.makespan:g} and {dfs.makespan:g}")
          + f", but rank 0 holds "
          f"{bfs.peak_memory[0]:g} activations with breadth-first and "
          f"{dfs.peak_memory[0]:g} with depth-first "
          f"({bfs.peak_memory[0] / dfs.peak_memory[0]:.1f}x as much for the same time).")
    gap = 100 * (mem.makespan - opt.makespan) / mem.makespan
    print(f"On {limited.name} (limit {limited.memory_limit:g}) the memory-aware list "
          f"scheduler takes "
          f"{mem.makespan:g}, the optimum {opt.makespan:g} ({opt.status}): "
          + ("the same." if gap <= 1e-9 else f"{gap:.1f}% less."))
else:
    print(f"No list scheduler with a tie_break keyword is registered; the optimum on "
          f"{limited.name} takes {opt.makespan:g} ({opt.status}).")
same_st, cross_st = hls_runs["same multiplication first"], hls_runs["cross pairs first"]
print(f"HLS: pairing the additions of one multiplication first starts the multiplier at "
      f"cycle {min(same_st['m1'], same_st['m2'])} instead of "
      f"{min(cross_st['m1'], cross_st['m2'])} and finishes in {makespan_of(hls, same_st)} "
      f"instead of {makespan_of(hls, cross_st)} cycles; CP-SAT proves "
      f"{hls_opt.makespan} optimal ({hls_opt.status}).")
