"""Record the Zero Bubble authors' schedulers' per-device orders as test data.

Usage (from the repository root)::

    python tests/data/zb/record.py REFERENCE_DIR

REFERENCE_DIR is the directory holding ``zb_scheduler_graph.py.txt``,
``zb_vhalf_vmin_greedy.py.txt``, ``zb_zbv_greedy.py.txt`` and ``zb_auto_scheduler.py.txt``
(docs/references.md#zero-bubble, #controllable-memory).  Their code is run as it is, exec'd
into namespaces with its imports stubbed (Megatron's ``graph`` module = the graph file;
``torch`` only for a type annotation; ``pulp.value`` = identity, as for a number).  Writes
``v-half.json``, ``v-min.json``, ``zbv-greedy.json`` and ``zb-auto.json`` next to this file.
The tests read the JSON files; they never import this script or the reference.

Each case is an instance (``p``, ``m``, per-stage or scalar ``F``, ``I``, ``W``, latency
``lat``, ``act``, ``released_by_input`` ``r``, ``limit``) and the reference's orders for it,
mapped to the reference's inputs here independently of cpsched's code:

* durations and latency in integer ticks (the smallest power of ten ``<= 1000`` making all
  of them integers, as cpsched's ``Instance.time_scale``);
* V schedules (``placement = "v"``, device ``d`` holds stages ``d`` and ``2p - 1 - d``): F, B
  (= I), W = mean over a device's two stages, then ``sorted(..)[p // 2]``; memory ``f`` the
  same of the activations, ``b = -r f``, ``w = -(f + b)``; ``max_mem = limit`` (None: theirs);
* zb-auto (``placement = "loop"``, ``v = 1``): per-stage costs, ``mem_f = act``,
  ``mem_b = -r act``, ``mem_w = -(mem_f + mem_b)``, ``max_mem = [limit] * p`` or None.

Orders are stored per device as a string of letters, one per action: ``F``, ``I``, ``W`` for
the device's down stage (``d``), ``f``, ``i``, ``w`` for its up stage (``2p - 1 - d``);
compressed: ``F3`` = three in a row, ``(FfiIwW)40`` = that block forty times.  Microbatches
are implied: each (kind, stage) runs them in increasing order (checked when encoding).  A
case whose reference run fails (an assertion or ValueError of theirs) has ``"orders": null``
and the error.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import re
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
GRAPH_MODULE = "megatron.core.pipeline_parallel.zerobubble.scheduler.graph"


def _compiled(refdir: Path, stem: str) -> types.CodeType:
    """Compile a reference file as its own module (without this file's __future__ flags)."""
    return compile((refdir / f"{stem}.py.txt").read_text(), stem, "exec", dont_inherit=True)


def load_reference(refdir: Path) -> dict[str, dict[str, Any]]:
    """The three reference files exec'd into namespaces (``graph`` too), imports stubbed."""
    graph = types.ModuleType("zb_graph")
    exec(_compiled(refdir, "zb_scheduler_graph"), graph.__dict__)
    parents = GRAPH_MODULE.split(".")
    stubs: dict[str, types.ModuleType] = {
        ".".join(parents[:k]): types.ModuleType(".".join(parents[:k]))
        for k in range(1, len(parents))}
    stubs[GRAPH_MODULE] = graph
    stubs["torch"] = types.ModuleType("torch")
    stubs["torch"].Tensor = object  # type: ignore[attr-defined]
    stubs["pulp"] = types.ModuleType("pulp")
    stubs["pulp"].value = lambda x: x  # type: ignore[attr-defined]
    saved = {name: sys.modules.get(name) for name in stubs}
    sys.modules.update(stubs)
    out: dict[str, dict[str, Any]] = {"graph": graph.__dict__}
    try:
        for key in ("zb_vhalf_vmin_greedy", "zb_zbv_greedy", "zb_auto_scheduler"):
            ns: dict[str, Any] = {"__name__": key}
            exec(_compiled(refdir, key), ns)
            out[key] = ns
    finally:
        for name, mod in saved.items():
            if mod is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = mod
    return out


# ------------------------------------------------------------------- mapping


def per_stage(x: Any, n: int) -> list[float]:
    return [float(y) for y in x] if isinstance(x, list) else [float(x)] * n


def tick_scale(values: list[float]) -> int:
    for k in range(4):
        if all(abs(v * 10**k - round(v * 10**k)) < 1e-6 for v in values):
            return 10**k
    return 1000


def costs_in_ticks(case: dict[str, Any], n: int) -> tuple[list[list[float]], float]:
    """F, I, W per stage and the latency, in integer ticks (as floats)."""
    raw = [per_stage(case[k], n) for k in ("F", "I", "W")]
    scale = tick_scale([v for xs in raw for v in xs] + [float(case["lat"])])
    return ([[float(round(v * scale)) for v in xs] for xs in raw],
            float(round(case["lat"] * scale)))


def median_device(xs: list[float], p: int) -> float:
    means = [sum([xs[d], xs[2 * p - 1 - d]]) / 2 for d in range(p)]
    return sorted(means)[p // 2]


def v_inputs(case: dict[str, Any]) -> dict[str, Any]:
    p = case["p"]
    (f, b, w), c = costs_in_ticks(case, 2 * p)
    mf = median_device(per_stage(case["act"], 2 * p), p)
    mb = -(case["r"] * mf)
    return {"cost": [median_device(x, p) for x in (f, b, w)], "c": c,
            "mem": [mf, mb, -(mf + mb)], "max_mem": case["limit"]}


# ------------------------------------------------------------ reference runs


def run_length(letters: str) -> str:
    """``FFFf`` -> ``F3f``."""
    return "".join(k + (str(n) if n > 1 else "")
                   for k, n in ((k, len(list(g))) for k, g in itertools.groupby(letters)))


def compress(letters: str) -> str:
    """Run-length letters with repeated blocks as ``(unit)count``, greedily taking at each
    position the repetition (unit of 2..12 letters, at least twice) that saves most."""
    out, i, n = [], 0, len(letters)
    while i < n:
        best = (0, 0, 0)  # (characters saved, unit length, repetitions)
        for size in range(2, 13):
            unit = letters[i:i + size]
            if len(unit) < size:
                break
            k = 1
            while letters[i + k * size:i + (k + 1) * size] == unit:
                k += 1
            saved = len(run_length(unit * k)) - len(run_length(unit)) - 2 - len(str(k))
            if k >= 2 and saved > best[0]:
                best = (saved, size, k)
        if best[0] > 0:
            _, size, k = best
            out.append(f"({run_length(letters[i:i + size])}){k}")
            i += size * k
        else:
            j = i
            while j < n and letters[j] == letters[i]:
                j += 1
            out.append(run_length(letters[i:j]))
            i = j
    return "".join(out)


def encode(p: int, nodes_per_device: list[list[Any]]) -> list[str]:
    """Reference ``ScheduledNode`` lists as compressed letter strings (module docstring)."""
    out = []
    for d, nodes in enumerate(nodes_per_device):
        letters, seen = [], {}
        for node in nodes:
            kind = {"F": "F", "B": "I", "W": "W"}[node.type.value]
            stage = node.layer_group_idx
            assert stage in (d, 2 * p - 1 - d), (d, stage)
            key = (kind, stage)
            assert node.microbatch == seen.get(key, 0), "microbatches out of order"
            seen[key] = node.microbatch + 1
            letters.append(kind if stage == d else kind.lower())
        text = compress("".join(letters))
        assert expand(text) == "".join(letters)
        out.append(text)
    return out


def expand(text: str) -> str:
    """Inverse of :func:`compress` (as the tests decode)."""
    text = re.sub(r"\(([^()]*)\)(\d+)", lambda mt: mt[1] * int(mt[2]), text)
    return "".join(k * int(n or 1) for k, n in re.findall(r"([FIWfiw])(\d*)", text))


def run_v_min_half(ref: dict[str, Any], variant: str) -> Callable[[dict[str, Any]], Any]:
    def run(case: dict[str, Any]) -> Any:
        p, m, inp = case["p"], case["m"], v_inputs(case)
        cfg = ref["graph"]["GraphConfig"](
            cost_f=[1.0] * p, cost_b=[1.0] * p, cost_w=[1.0] * p, cost_comm=1.0, mem_f=[],
            mem_b=[], mem_w=[], max_chunks=2, n_stages=p, n_micro=m)
        graph = ref["zb_vhalf_vmin_greedy"]["PipelineGraph"](
            p, m, variant, *inp["cost"], inp["c"])
        return graph.create_schedule(cfg)

    return run


def run_zbv(ref: dict[str, Any]) -> Callable[[dict[str, Any]], Any]:
    def run(case: dict[str, Any]) -> Any:
        p, m, inp = case["p"], case["m"], v_inputs(case)
        cfg = ref["graph"]["GraphConfig"](
            cost_f=[1.0] * p, cost_b=[1.0] * p, cost_w=[1.0] * p, cost_comm=1.0, mem_f=[],
            mem_b=[], mem_w=[], max_chunks=2, n_stages=p, n_micro=m)
        graph = ref["zb_zbv_greedy"]["PipelineGraph"](
            p, m, *inp["cost"], inp["c"], *inp["mem"], max_mem=inp["max_mem"])
        return graph.create_schedule(cfg)

    return run


def run_auto(ref: dict[str, Any]) -> Callable[[dict[str, Any]], Any]:
    def run(case: dict[str, Any]) -> Any:
        p, m = case["p"], case["m"]
        (f, b, w), c = costs_in_ticks(case, p)
        act = per_stage(case["act"], p)
        mb = [-(case["r"] * a) for a in act]
        cfg = ref["graph"]["GraphConfig"](
            cost_f=f, cost_b=b, cost_w=w, cost_comm=c, mem_f=act, mem_b=mb,
            mem_w=[-(a + x) for a, x in zip(act, mb, strict=True)],
            max_mem=None if case["limit"] is None else [float(case["limit"])] * p,
            n_stages=p, n_micro=m)
        return ref["zb_auto_scheduler"]["create_schedule"](cfg)

    return run


# ---------------------------------------------------------------------- grid


def uneven(n: int, base: int, spread: int, seed: int) -> list[int]:
    """Deterministic uneven per-stage integers in ``base .. base + spread - 1``."""
    return [base + (seed * 7 + s * 5 + s * s) % spread for s in range(n)]


def v_profiles(p: int) -> list[dict[str, Any]]:
    n = 2 * p
    return [
        {"F": 1, "I": 1, "W": 1, "lat": 0, "act": 1, "r": 0.0, "limit": None},
        {"F": 3, "I": 4, "W": 2, "lat": 1, "act": 1, "r": 0.5, "limit": 2 * p + 3},
        {"F": uneven(n, 2, 5, p), "I": uneven(n, 3, 6, p + 1), "W": uneven(n, 1, 4, p + 2),
         "lat": 2, "act": 1, "r": 0.0, "limit": None},
        {"F": 1.5, "I": 2.5, "W": 0.5, "lat": 0.5, "act": 1, "r": 0.25, "limit": 3 * p},
        {"F": 2, "I": 2, "W": 1, "lat": 0, "act": 1, "r": 0.0, "limit": 2 * p - 1},
        {"F": 2, "I": 3, "W": 2, "lat": 3, "act": uneven(n, 1, 3, p), "r": 0.5,
         "limit": 8 * p},
    ]


def controllable_profiles(p: int) -> list[dict[str, Any]]:
    """V-Half / V-Min: their orders ignore costs and memory; activation 1, all released by
    W, no limit (the peak-memory test reads these)."""
    n = 2 * p
    return [
        {"F": 1, "I": 1, "W": 1, "lat": 0, "act": 1, "r": 0.0, "limit": None},
        {"F": 3, "I": 4, "W": 2, "lat": 1, "act": 1, "r": 0.0, "limit": None},
        {"F": uneven(n, 2, 5, p), "I": uneven(n, 3, 6, p + 1), "W": uneven(n, 1, 4, p + 2),
         "lat": 2, "act": 1, "r": 0.0, "limit": None},
    ]


def auto_profiles(p: int) -> list[dict[str, Any]]:
    return [
        {"F": 1, "I": 1, "W": 1, "lat": 0, "act": 1, "r": 0.0, "limit": None},
        {"F": 3, "I": 4, "W": 2, "lat": 1, "act": 1, "r": 0.0, "limit": p // 2 + 1},
        {"F": uneven(p, 1, 9, p), "I": uneven(p, 1, 12, p + 1), "W": uneven(p, 0, 8, p + 2),
         "lat": 2, "act": 1, "r": 0.5, "limit": 2},
        {"F": 2, "I": 2, "W": 0, "lat": 0, "act": 1, "r": 0.0, "limit": None},
        {"F": 2, "I": 3, "W": 2, "lat": 3, "act": uneven(p, 1, 3, p), "r": 0.25, "limit": 6},
        {"F": 1.5, "I": 2.5, "W": 1, "lat": 0.5, "act": 1, "r": 0.0, "limit": 1},
    ]


def m_values(p: int) -> list[int]:
    return sorted({1, 2, p, 2 * p + 1, 64})


def grid(ps: list[int], profiles: Callable[[int], list[dict[str, Any]]],
         per_cell: int) -> list[dict[str, Any]]:
    """``per_cell`` profiles per (p, m), rotating through the list."""
    cases, k = [], 0
    for p in ps:
        prof = profiles(p)
        for m in m_values(p):
            for _ in range(per_cell):
                cases.append({"p": p, "m": m, **prof[k % len(prof)]})
                k += 1
    return cases


def record(name: str, run: Callable[[dict[str, Any]], Any], cases: list[dict[str, Any]],
           source: str) -> None:
    out, failures = [], 0
    for case in cases:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                nodes = run(case)
            out.append({**case, "orders": encode(case["p"], nodes)})
        except (AssertionError, ValueError) as exc:
            failures += 1
            out.append({**case, "orders": None, "error": repr(exc)})
    head = json.dumps({"schedule": name, "reference": source})[:-1]
    rows = ",\n".join(json.dumps(case, separators=(",", ":")) for case in out)
    path = HERE / f"{name}.json"
    path.write_text(f'{head}, "cases": [\n{rows}\n]}}\n')
    print(f"{name}: {len(out)} cases, {failures} reference failures, "
          f"{path.stat().st_size} bytes")


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print(__doc__)
        return 2
    ref = load_reference(Path(argv[0]))
    vcases = grid(list(range(2, 17)), controllable_profiles, 1)
    for variant in ("half", "min"):
        record(f"v-{variant}", run_v_min_half(ref, variant), vcases,
               f"zb_vhalf_vmin_greedy.py.txt PipelineGraph(p, m, '{variant}', ...)"
               ".create_schedule")
    record("zbv-greedy", run_zbv(ref), grid([2, 3, 4, 5, 6, 8, 12, 16], v_profiles, 3),
           "zb_zbv_greedy.py.txt PipelineGraph(...).create_schedule")
    record("zb-auto", run_auto(ref), grid([2, 3, 4, 5, 6, 8, 12, 16], auto_profiles, 3),
           "zb_auto_scheduler.py.txt create_schedule(GraphConfig)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
