"""Generate the notebooks of this folder, without outputs, from the cell sources below.

    python notebooks/_build.py            # rewrite notebooks/*.ipynb
    python notebooks/_build.py OUT_DIR    # write them elsewhere (the tests compare)

The notebooks are reviewed here, as plain Python strings; the ``.ipynb`` files are generated
(cell ids are fixed, so the output is byte-for-byte reproducible).  Each notebook runs from
the ``notebooks/`` folder in well under a minute on 2 cores: small instances, one CP-SAT
worker per solve and a deterministic time budget, so its numbers do not depend on the
machine.  Each ends with a conclusion printed from its own numbers.
"""

from __future__ import annotations

import sys
from pathlib import Path
from textwrap import dedent

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent

#: Appended to the first code cell (after its imports): where the repository is, display.
SETUP = """
ROOT = Path.cwd().parent if (Path.cwd().parent / "instances").is_dir() else Path.cwd()
pd.set_option("display.width", 160)
pd.set_option("display.max_columns", 30)
"""


def first_cell(imports: str, body: str = "") -> tuple[str, str]:
    """The first code cell: the notebook's imports, :data:`SETUP`, then ``body``."""
    parts = [dedent(imports).strip("\n"), SETUP.strip("\n")]
    if body.strip():
        parts.append(dedent(body).strip("\n"))
    return ("code", "\n\n".join(parts))


def md(text: str) -> tuple[str, str]:
    return ("markdown", dedent(text).strip("\n"))


def code(text: str) -> tuple[str, str]:
    return ("code", dedent(text).strip("\n"))


# ------------------------------------------------------------------------ 01 quick start
QUICK_START = [
    md("""
    # 01 — Quick start: load, solve, plot, compare

    The article's interleaved example (4 GPUs, 2 chunks each, 8 microbatches, F = 5,
    B = 10) with a **memory limit of 6 activations per device**: what do the known schedules
    do, what is the optimum, and how far apart are they?

    Every solve here uses one CP-SAT worker and a *deterministic* time budget
    (`max_deterministic_time`), so the numbers are the same on any machine.
    """),
    first_cell('''
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import display

from cpsched import plots
from cpsched.compare import compare
from cpsched.instance import load_instance
from cpsched.schedules import run_all
from cpsched.solver import solve
from cpsched.validate import validate
''', '''
DET = {"max_deterministic_time": 5.0}
'''),
    md("""
    ## 1. Load an instance

    An instance is a TOML file (SPEC §2).  `load_instance` validates it and fills in the
    defaults; `overrides` change fields without editing the file.
    """),
    code('''
inst = load_instance(ROOT / "instances" / "article-memory6.toml")
print(inst.to_toml())
print(f"p={inst.p} v={inst.v} m={inst.m}, memory limit {inst.memory_limit:g} "
      f"(the least any schedule needs: {inst.min_memory_limit():g})")
'''),
    md("""
    ## 2. The known schedules

    `run_all` times every registered schedule whose preconditions hold, with one simulator;
    `validate` checks each against every rule of the instance — here, mostly, the memory
    limit.
    """),
    code('''
known = run_all(inst)
rows = []
for name, sch in known.items():
    problems = validate(sch)
    rows.append({"schedule": name, "makespan": sch.makespan,
                 "bubble": round(sch.bubble_fraction, 3), "peak memory": max(sch.peak_memory),
                 "valid": not problems, "first problem": problems[0] if problems else ""})
known_table = pd.DataFrame(rows)
display(known_table)
'''),
    md("""
    ## 3. Solve

    `solve` builds the CP-SAT model, warm-starts it from the best *valid* known schedule
    (the sequential one-microbatch-at-a-time schedule if none fits) and returns a `Result`
    with the schedule, the proven lower bound and the gap.
    """),
    code('''
res = solve(inst, time_limit=60, workers=1, parameters=DET)
assert validate(res.schedule) == []
print(f"{res.status}: makespan {res.makespan}, lower bound {res.lower_bound}, "
      f"gap {res.gap:.1%}, warm start {res.hint_method}, {res.solve_seconds:.1f} s")
'''),
    md("""
    ## 4. Plot

    Each plot function takes an `ax` and returns it, so figures compose: the Gantt chart of
    the optimum above, the memory each device holds below (the dashed line is the limit).
    """),
    code('''
w, h = plots.gantt_figsize(res.schedule)
fig, (ax_g, ax_m) = plt.subplots(2, 1, figsize=(w, h + 2.4), sharex=True,
                                 height_ratios=[h - 1, 1.8], layout="constrained")
plots.gantt(res.schedule, ax=ax_g)
plots.memory(res.schedule, ax=ax_m)
plt.show()
'''),
    md("""
    ## 5. Compare, in one call

    `compare` puts every known schedule next to two optima: without a memory limit, and at
    the schedule's **own peak memory** ("same memory": what the schedule leaves on the table
    for the memory it uses).  The `cpsat` row is the optimum under the instance's own limit.
    Here on this instance and on the unlimited version of it.
    """),
    code('''
unlimited = inst.replace(**{"name": "article-unlimited", "memory.limit": None})
df = compare([inst, unlimited], time_limit=60, workers=1, jobs=1, progress=False,
             parameters=DET)
cols = ["instance", "schedule", "makespan", "bubble_fraction", "peak_memory", "valid",
        "opt_makespan_unlimited", "opt_makespan_same_memory",
        "improvement_same_memory_pct", "status"]
display(df[cols].round(3))
plots.bubble_bars(df)
plt.show()
'''),
    md("## Conclusion"),
    code('''
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
'''),
]


# ---------------------------------------------------------------- 02 heuristic vs optimal
HEURISTIC_VS_OPTIMAL = [
    md("""
    # 02 — Heuristic vs optimal: bubbles across p, v, m and F:B:W

    How much idle time ("bubble") do the hand-made schedules leave, compared with the
    optimum, as the number of devices `p`, chunks per device `v`, microbatches `m` and the
    cost ratios change?  Small sizes, so that everything is solved (or nearly) in seconds.

    The fair comparison is at **the same memory**: for each schedule, the optimum under a
    memory limit equal to the schedule's own peak.  `compare` computes it warm-started from
    that schedule, so it is never worse.
    """),
    first_cell('''
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import display

from cpsched import plots
from cpsched.compare import compare, load_grid
''', '''
DET = {"max_deterministic_time": 1.0}
RUN = {"time_limit": 30, "workers": 1, "jobs": 2, "progress": False, "parameters": DET}
'''),
    md("""
    ## A. Fused backward (F : B = 1 : 2), varying p, v and m

    A grid file is an instance plus a `[grid]` table of dotted keys → lists of values
    (`cpsched compare --grid FILE` reads the same format).  Schedules: GPipe (all forwards,
    then all backwards), 1F1B (`v = 1`) and Megatron's interleaved 1F1B (`v = 2`).
    """),
    code('''
GRID_A = """
name = "fb"
[pipeline]
devices = 4
microbatches = 8
[costs]
forward = 1
backward = 2
[grid]
"pipeline.devices" = [2, 4]
"pipeline.stages_per_device" = [1, 2]
"pipeline.microbatches" = [4, 8]
"""
with tempfile.TemporaryDirectory() as tmp:
    path = Path(tmp) / "grid-a.toml"
    path.write_text(GRID_A)
    grid_a = load_grid(path)
print(", ".join(i.name for i in grid_a))
df_a = compare(grid_a, schedules=["gpipe", "1f1b", "interleaved-1f1b"], **RUN)
cols = ["instance", "schedule", "makespan", "bubble_fraction", "peak_memory",
        "opt_makespan_same_memory", "improvement_same_memory_pct", "opt_makespan_unlimited",
        "status"]
display(df_a[cols].round(3))
'''),
    md("""
    The textbook bubble of GPipe and 1F1B with `v = 1` is `(p - 1) / (m + p - 1)`; the
    simulator reproduces it exactly.
    """),
    code('''
v1 = df_a[(df_a["v"] == 1) & df_a["schedule"].isin(["gpipe", "1f1b"])].copy()
v1["textbook"] = (v1["p"] - 1) / (v1["m"] + v1["p"] - 1)
display(v1[["instance", "schedule", "bubble_fraction", "textbook"]].round(4))
assert (v1["bubble_fraction"] - v1["textbook"]).abs().max() < 1e-9
plots.bubble_bars(df_a)
plt.show()
'''),
    md("""
    ## B. Split backward, varying F : I : W (p = 4, v = 1, m = 8)

    With the backward split into `I` (input gradient, on the critical path) and `W` (weight
    gradient, free to move), Zero Bubble's ZB-H1 keeps 1F1B's memory and fills bubbles with
    `W`; ZB-H2 takes more memory to fill them all.
    """),
    code('''
GRID_B = """
name = "fiw"
[pipeline]
devices = 4
microbatches = 8
split_backward = true
[costs]
forward = 1
backward_input = 1
backward_weight = 1
[grid]
"costs.backward_input" = [1, 2]
"costs.backward_weight" = [1, 2]
"""
with tempfile.TemporaryDirectory() as tmp:
    path = Path(tmp) / "grid-b.toml"
    path.write_text(GRID_B)
    grid_b = load_grid(path)
df_b = compare(grid_b, schedules=["1f1b", "zb-h1", "zb-h2"], **RUN)
display(df_b[cols].round(3))
plots.bubble_bars(df_b)
plt.show()
'''),
    md("""
    ## Summary per schedule

    `gap to optimum` is the improvement of the same-memory optimum over the schedule, in
    percent of the schedule's makespan; `optimal at its memory` counts the instances where
    no schedule with that much memory is faster.
    """),
    code('''
both = pd.concat([df_a, df_b], ignore_index=True)
heur = both[both["schedule"] != "cpsat"].copy()
heur["at_optimum"] = heur["improvement_same_memory_pct"] <= 1e-9
summary = heur.groupby("schedule", sort=False).agg(
    instances=("instance", "count"),
    mean_bubble=("bubble_fraction", "mean"),
    mean_gap_pct=("improvement_same_memory_pct", "mean"),
    max_gap_pct=("improvement_same_memory_pct", "max"),
    optimal_at_its_memory=("at_optimum", "sum"),
)
display(summary.round(3))
proven = (both["status"] == "OPTIMAL").mean()
print(f"{proven:.0%} of the optima in these tables are proven optimal"
      + ("." if proven == 1 else "; the others are the best found within the budget."))
'''),
    md("## Conclusion"),
    code('''
worst = heur.loc[heur["improvement_same_memory_pct"].idxmax()]
opt_rows = both[both["schedule"] == "cpsat"]
fb = summary.loc["1f1b"]
zb1 = summary.loc["zb-h1"]
print(f"1F1B is optimal for its memory on {int(fb['optimal_at_its_memory'])} of "
      f"{int(fb['instances'])} instances (mean gap {fb['mean_gap_pct']:.1f}%, "
      f"mean bubble {fb['mean_bubble']:.1%}); ZB-H1 on {int(zb1['optimal_at_its_memory'])} "
      f"of {int(zb1['instances'])} (mean gap {zb1['mean_gap_pct']:.1f}%).")
print(f"The largest gap is {worst['improvement_same_memory_pct']:.1f}%: {worst['schedule']} "
      f"on {worst['instance']} takes {worst['makespan']:g} where {worst['peak_memory']:g} "
      f"activations allow {worst['opt_makespan_same_memory']:g}.")
opt_a = df_a[df_a["schedule"] == "cpsat"]
by_m = opt_a.groupby("m")["bubble_fraction"].mean()
gap_a = heur[heur["instance"].isin(opt_a["instance"])]["improvement_same_memory_pct"].max()
gap_b = heur[~heur["instance"].isin(opt_a["instance"])]["improvement_same_memory_pct"].max()
zb_gap = heur[heur["schedule"].str.startswith("zb")]["improvement_same_memory_pct"].max()
print(f"The optimal bubble ranges from {opt_rows['bubble_fraction'].min():.1%} to "
      f"{opt_rows['bubble_fraction'].max():.1%}; with a fused backward it averages "
      f"{by_m.iloc[0]:.1%} at m = {by_m.index[0]} and {by_m.iloc[-1]:.1%} at "
      f"m = {by_m.index[-1]}.")
print("With a fused backward (part A) "
      + ("every known schedule is already optimal for its memory"
         if gap_a <= 1e-9 else f"the known schedules leave up to {gap_a:.1f}%")
      + f"; with a split backward (part B) the largest gap is {gap_b:.1f}%, and the "
      f"Zero Bubble schedules, which fill bubbles with weight gradients, leave at most "
      f"{zb_gap:.1f}%.")
'''),
]


# --------------------------------------------------------------------- 03 memory pareto
MEMORY_PARETO = [
    md("""
    # 03 — The memory–makespan Pareto front

    One model, three ways to place it.  An 8-layer model on `p = 4` devices, 8 microbatches,
    split backward with `F = I = W = 1` and 1 activation unit per layer:

    * `loop`, `v = 1`: 2 layers per stage (F = I = W = 2, activation 2): 1F1B, ZB-H1, ZB-H2;
    * `loop`, `v = 2`: 1 layer per stage: Megatron's interleaved 1F1B, interleaved ZB;
    * `v`, `v = 2`: the V placement: ZB-V (and DualPipe-V).

    For each, `pareto_front` solves the instance under every per-device memory limit from
    the least possible up to what the unconstrained optimum uses; the known schedules are
    placed at their own peak memory.  Filled dots are proven optimal, hollow ones the best
    found within the (deterministic) budget.
    """),
    first_cell('''
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import display

from cpsched import plots
from cpsched.compare import pareto_front, schedule_points
from cpsched.instance import Instance
''', '''
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
    (model(1, "loop", "loop-v1"), ["1f1b", "zb-h1", "zb-h2"]),
    (model(2, "loop", "loop-v2"), ["interleaved-1f1b", "interleaved-zb"]),
    (model(2, "v", "v-shape"), ["zbv", "dualpipev"]),
]
'''),
    code('''
fronts, points = {}, {}
for inst, names in CASES:
    fronts[inst.name] = pareto_front(inst, time_limit=30, workers=1, parameters=DET)
    points[inst.name] = schedule_points(inst, names)
    print(inst.name, [(pt.limit, pt.makespan, pt.status) for pt in fronts[inst.name]])
'''),
    code('''
fig, axes = plt.subplots(1, 3, figsize=(16, 4.6), sharey=True, layout="constrained")
for ax, (inst, _) in zip(axes, CASES, strict=True):
    plots.pareto(fronts[inst.name], ax=ax, schedules=points[inst.name])
    ax.set_title(inst.name, loc="left", fontsize=11)
plt.show()
'''),
    md("""
    ## Each schedule against the front

    For each known schedule: the front's makespan at the schedule's peak memory (the best
    any schedule can do with that much memory), and the least memory at which the front
    reaches the schedule's makespan (how much memory the schedule could save).
    """),
    code('''
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
'''),
    md("## Conclusion"),
    code('''
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
'''),
]


# -------------------------------------------------------------------- 04 list scheduling
LIST_SCHEDULING = [
    md("""
    # 04 — List scheduling: AFAB and 1F1B from a tie-breaker

    A list scheduler advances from event to event; whenever a device is idle it starts the
    *best available* action by a priority rule.  The article's point: with a **breadth-first**
    tie-breaker (forwards first, lowest stage, lowest microbatch) it produces AFAB / GPipe;
    with a **depth-first** one (lowest microbatch, furthest along its chain) it produces 1F1B
    — the admission window that keeps 1F1B's memory low is the `p - d` microbatches in
    flight on device `d`.
    """),
    first_cell('''
import inspect
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from cpsched import plots
from cpsched.instance import Instance, load_instance
from cpsched.model import format_orders
from cpsched.schedules import REGISTRY
from cpsched.simulate import simulate
from cpsched.solver import solve
''', '''
LIST = REGISTRY.get("list")
HAS_TIE_BREAK = LIST is not None and "tie_break" in inspect.signature(LIST.generate).parameters
print("list scheduler:", "registered, with tie_break" if HAS_TIE_BREAK else
      "not available in this version: the cells below only explain what they would show")

inst = Instance.from_dict({
    "name": "p4-m8", "pipeline": {"devices": 4, "microbatches": 8},
    "costs": {"forward": 1, "backward": 2},
})
'''),
    md("""
    ## Breadth-first vs depth-first

    Both rules are run through the same simulator as the named schedules; we compare the
    per-device orders themselves, not only the makespans.
    """),
    code('''
runs = {}
if HAS_TIE_BREAK:
    for rule, named in (("bfs", "gpipe"), ("dfs", "1f1b")):
        orders = LIST.generate(inst, tie_break=rule)
        same = orders == REGISTRY[named].generate(inst)
        sch = simulate(inst, orders, method=f"list ({rule})")
        runs[rule] = (sch, named, same)
        print(f"tie_break={rule!r}: makespan {sch.makespan}, peak memory per device "
              f"{sch.peak_memory}; identical orders to {named}: {same}")
        print(format_orders(orders), end="\\n\\n")
'''),
    code('''
if runs:
    fig, axes = plt.subplots(2, 1, figsize=(11, 6.5), layout="constrained")
    for ax, (rule, (sch, named, same)) in zip(axes, runs.items(), strict=True):
        plots.gantt(sch, ax=ax, title=f"list scheduling, tie_break={rule!r} "
                    f"({'same orders as' if same else 'compare with'} {named})")
    plt.show()
'''),
    md("""
    ## Under a memory limit

    With `memory.limit`, the list scheduler admits a microbatch on a device only when the
    memory it will need fits, and tries a small portfolio of rules.  How close does that
    get to the optimum?
    """),
    code('''
limited = load_instance(ROOT / "instances" / "article-memory6.toml")
opt = solve(limited, time_limit=30, workers=1, parameters={"max_deterministic_time": 3.0})
print(f"{limited.name} (p={limited.p}, v={limited.v}, m={limited.m}, limit "
      f"{limited.memory_limit:g}): optimum {opt.makespan} ({opt.status}, bound "
      f"{opt.lower_bound})")
if HAS_TIE_BREAK:
    mem = simulate(limited, LIST.generate(limited), method="list")
    print(f"memory-aware list scheduling: {mem.makespan}, peak {max(mem.peak_memory):g}")
'''),
    md("""
    ## HLS: the tie-breaker matters more than the priority

    The same list scheduler works on cpsched's general core (`cpsched.core.ResourceGraph`:
    tasks, resources of any capacity, lags, memory buffers) — pipelines are one builder of it.
    The article's high-level-synthesis example evaluates `(a+b)*(c+d) + (e+f)*(g+h)` with
    **one multiplier and two adders**. Every addition has the same ALAP priority; only the
    tie-breaker decides which two additions run first.
    """),
    code('''
from cpsched.core import hls_example, list_schedule, makespan_of
from cpsched.solver import solve_graph

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
'''),
    md("## Conclusion"),
    code('''
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
'''),
]


# ------------------------------------------------------------------------ 05 p2p latency
P2P_LATENCY = [
    md("""
    # 05 — Point-to-point latency: where the optimum beats Megatron's fixed order

    Megatron's interleaved 1F1B fixes each device's order in advance.  With no
    communication latency it is optimal on the article's example (285); every hop between
    devices costs `p2p_latency`, and a fixed order waits for each one.  How much faster is
    the optimum as the latency grows — at the same memory, and with unlimited memory?

    Instance: p = 4, v = 2, m = 8, F = 5, B = 10; latency from 0 to 8 time units (a forward
    lasts 5).
    """),
    first_cell('''
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import display

from cpsched import plots
from cpsched.compare import compare
from cpsched.instance import load_instance
''', '''
DET = {"max_deterministic_time": 1.0}
LATENCIES = [0, 0.5, 1, 2, 3, 4, 6, 8]
base = load_instance(ROOT / "instances" / "article-interleaved.toml")
insts = [base.replace(**{"name": f"lat{x:g}", "costs.p2p_latency": x}) for x in LATENCIES]
df = compare(insts, time_limit=30, workers=1, jobs=2, progress=False, parameters=DET,
             schedules=["interleaved-1f1b"])
meg = df[df["schedule"] == "interleaved-1f1b"].set_index("p2p_latency")
opt = df[df["schedule"] == "cpsat"].set_index("p2p_latency")
table = pd.DataFrame({
    "megatron": meg["makespan"],
    "megatron_peak_memory": meg["peak_memory"],
    "optimum_same_memory": meg["opt_makespan_same_memory"],
    "status_same_memory": meg["status"],
    "faster_same_memory_pct": meg["improvement_same_memory_pct"],
    "optimum_unlimited": meg["opt_makespan_unlimited"],
    "faster_unlimited_pct": meg["improvement_unlimited_pct"],
    "unlimited_peak_memory": opt["peak_memory"],
})
display(table.round(2))
'''),
    code('''
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4), layout="constrained")
ax1.plot(table.index, table["megatron"], "o-", label="Megatron interleaved 1F1B")
ax1.plot(table.index, table["optimum_same_memory"], "s--", label="optimum, same memory")
ax1.plot(table.index, table["optimum_unlimited"], "^:", label="optimum, unlimited memory")
ax1.set_xlabel("p2p latency (time units)")
ax1.set_ylabel("makespan")
ax1.legend(frameon=False)
ax2.plot(table.index, table["faster_same_memory_pct"], "s--", label="same memory")
ax2.plot(table.index, table["faster_unlimited_pct"], "^:", label="unlimited memory")
ax2.set_xlabel("p2p latency (time units)")
ax2.set_ylabel("optimum faster than Megatron (%)")
ax2.legend(frameon=False)
plt.show()
plots.bubble_bars(df)
plt.show()
'''),
    md("## Conclusion"),
    code('''
first_gain = table[table["faster_same_memory_pct"] > 1e-9]
top = table["faster_unlimited_pct"].idxmax()
same_best = table["faster_same_memory_pct"].idxmax()
x0 = LATENCIES[0]
print(f"At latency {x0} Megatron's order takes {table.loc[x0, 'megatron']:g} and the "
      f"optimum {table.loc[x0, 'optimum_unlimited']:g}"
      + (": it is optimal." if table.loc[x0, "faster_unlimited_pct"] <= 1e-9 else "."))
if len(first_gain):
    x1 = first_gain.index[0]
    onwards = (table.loc[table.index >= x1, "faster_same_memory_pct"] > 1e-9).all()
    print(f"{'From' if onwards else 'At'} latency {x1:g}{' on' if onwards else ''}, the "
          f"optimum beats it even at the same peak memory "
          f"({table.loc[x1, 'megatron_peak_memory']:g}): by at most "
          f"{table.loc[same_best, 'faster_same_memory_pct']:.1f}% (latency {same_best:g}, "
          f"{table.loc[same_best, 'megatron']:g} vs "
          f"{table.loc[same_best, 'optimum_same_memory']:g}).")
else:
    print("At the same peak memory no latency here lets the optimum beat it.")
print(f"With memory to spare the gap grows to {table.loc[top, 'faster_unlimited_pct']:.1f}% "
      f"at latency {top:g} ({table.loc[top, 'megatron']:g} vs "
      f"{table.loc[top, 'optimum_unlimited']:g}; that optimum holds up to "
      f"{table.loc[top, 'unlimited_peak_memory']:g} activations per device, Megatron "
      f"{table.loc[top, 'megatron_peak_memory']:g}): with more microbatches in flight, "
      "devices have work to do while activations and gradients are in transit.")
last = LATENCIES[-1]
if same_best < last and table.loc[last, "faster_same_memory_pct"] < table.loc[
        same_best, "faster_same_memory_pct"]:
    print(f"At Megatron's memory the advantage peaks at latency {same_best:g} and falls to "
          f"{table.loc[last, 'faster_same_memory_pct']:.1f}% at latency {last:g}: there the "
          "memory limit, not the order, is what costs time.")
print(f"Same-memory optima proven: {(table['status_same_memory'] == 'OPTIMAL').sum()} of "
      f"{len(table)}.")
'''),
]


NOTEBOOKS: dict[str, list[tuple[str, str]]] = {
    "01-quick-start.ipynb": QUICK_START,
    "02-heuristic-vs-optimal.ipynb": HEURISTIC_VS_OPTIMAL,
    "03-memory-pareto.ipynb": MEMORY_PARETO,
    "04-list-scheduling.ipynb": LIST_SCHEDULING,
    "05-p2p-latency.ipynb": P2P_LATENCY,
}


def notebook(cells: list[tuple[str, str]]) -> nbformat.NotebookNode:
    """A notebook without outputs, with fixed cell ids (reproducible files)."""
    nb = new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    for k, (kind, source) in enumerate(cells):
        cell = new_markdown_cell(source) if kind == "markdown" else new_code_cell(source)
        cell["id"] = f"cell-{k:02d}"
        nb.cells.append(cell)
    return nb


def build(out_dir: Path = HERE) -> list[Path]:
    """Write every notebook to ``out_dir``; returns the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, cells in NOTEBOOKS.items():
        path = out_dir / name
        nbformat.write(notebook(cells), path)
        paths.append(path)
    return paths


if __name__ == "__main__":
    for p in build(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE):
        print(p)
