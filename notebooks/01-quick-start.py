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
# # 01 — Quick start: load, solve, plot, compare
#
# The article's interleaved example (4 GPUs, 2 chunks each, 8 microbatches, F = 5,
# B = 10) with a **memory limit of 6 activations per device**: what do the known schedules
# do, what is the optimum, and how far apart are they?
#
# Every solve here uses one CP-SAT worker and a *deterministic* time budget
# (`max_deterministic_time`), so the numbers are the same on any machine.

# %%
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import display

from cpsched import load_instance, plots, run_all, solve, validate
from cpsched.study import compare

ROOT = Path.cwd().parent if (Path.cwd().parent / "instances").is_dir() else Path.cwd()
pd.set_option("display.width", 160)
pd.set_option("display.max_columns", 30)

DET = {"max_deterministic_time": 5.0}

# %% [markdown]
# ## 1. Load an instance
#
# An instance is a TOML file (docs/spec.md §2).  `load_instance` validates it and fills in the
# defaults; `overrides` change fields without editing the file.

# %%
inst = load_instance(ROOT / "instances" / "article-memory6.toml")
print(inst.to_toml())
print(f"p={inst.p} v={inst.v} m={inst.m}, memory limit {inst.memory_limit:g} "
      f"(the least any schedule needs: {inst.min_memory_limit():g})")

# %% [markdown]
# ## 2. The known schedules
#
# `run_all` times every registered schedule whose preconditions hold, with one simulator;
# `validate` checks each against every rule of the instance — here, mostly, the memory
# limit.

# %%
known = run_all(inst)
rows = []
for name, sch in known.items():
    problems = validate(sch)
    rows.append({"schedule": name, "makespan": sch.makespan,
                 "bubble": round(sch.bubble_fraction, 3), "peak memory": max(sch.peak_memory),
                 "valid": not problems, "first problem": problems[0] if problems else ""})
known_table = pd.DataFrame(rows)
display(known_table)

# %% [markdown]
# ## 3. Solve
#
# `solve` builds the CP-SAT model, warm-starts it from the best *valid* known schedule
# (the sequential one-microbatch-at-a-time schedule if none fits) and returns a `Result`
# with the schedule, the proven lower bound and the gap.

# %%
res = solve(inst, time_limit=60, workers=1, parameters=DET)
assert validate(res.schedule) == []
print(f"{res.status}: makespan {res.makespan}, lower bound {res.lower_bound}, "
      f"gap {res.gap:.1%}, warm start {res.warm_start}, {res.solve_seconds:.1f} s")

# %% [markdown]
# ## 4. Plot
#
# Each plot function takes an `ax` and returns it, so figures compose: the Gantt chart of
# the optimum above, the memory each device holds below (the dashed line is the limit).

# %%
w, h = plots.gantt_figsize(res.schedule)
fig, (ax_g, ax_m) = plt.subplots(2, 1, figsize=(w, h + 2.4), sharex=True,
                                 height_ratios=[h - 1, 1.8], layout="constrained")
plots.gantt(res.schedule, ax=ax_g)
plots.memory(res.schedule, ax=ax_m)
plt.show()

# %% [markdown]
# ## 5. Compare, in one call
#
# `compare` puts every known schedule next to two optima: without a memory limit, and at
# the schedule's **own peak memory** ("same memory": what the schedule leaves on the table
# for the memory it uses).  The `cpsat` row is the optimum under the instance's own limit.
# Here on this instance and on the unlimited version of it.

# %%
unlimited = inst.replace(**{"name": "article-unlimited", "memory.limit": None})
df = compare([inst, unlimited], time_limit=60, workers=1, jobs=1, progress=False,
             parameters=DET)
cols = ["instance", "schedule", "makespan", "bubble_fraction", "peak_memory", "valid",
        "opt_makespan_unlimited", "opt_makespan_same_memory",
        "improvement_same_memory_pct", "status"]
display(df[cols].round(3))
plots.bubble_bars(df)
plt.show()

# %% [markdown]
# ## Conclusion

# %%
lim = df[df["instance"] == inst.name]
heur = lim[lim["schedule"] != "cpsat"]
fits = heur[heur["valid"]]
opt = lim[lim["schedule"] == "cpsat"].iloc[0]
free_opt = opt["opt_makespan_unlimited"]
print(f"Under the limit of {inst.memory_limit:g} activations, {len(fits)} of the "
      f"{len(heur)} applicable known schedules {'fits' if len(fits) == 1 else 'fit'}"
      + (f" (the best, {fits.sort_values('makespan').iloc[0]['schedule']}, takes "
         f"{fits['makespan'].min():g})" if len(fits) else "")
      + f"; the optimum takes {opt['makespan']:g} ({opt['status']}), "
      f"{100 * (opt['makespan'] - free_opt) / free_opt:.1f}% more than the {free_opt:g} "
      f"possible without a limit, with a peak of {opt['peak_memory']:g} per device.")
il = heur.set_index("schedule").loc["interleaved-1f1b"]
same = il["opt_makespan_same_memory"]
if same >= il["makespan"]:
    verdict = ("no schedule does better at that memory, so it is optimal for the memory it "
               "uses" if il["status"] == "OPTIMAL" else
               "nothing better was found at that memory (not proven)")
else:
    verdict = (f"at that memory the optimum takes {same:g}, "
               f"{il['improvement_same_memory_pct']:.1f}% less")
print(f"Megatron's interleaved 1F1B takes {il['makespan']:g} with a peak of "
      f"{il['peak_memory']:g} activations: {verdict}; but it needs "
      f"{il['peak_memory'] / inst.memory_limit:.2g}x the memory this limit allows.")
