"""Writes instances/scale/*.toml: the production-size set of issue 9 (kept for the record;
the TOML files are the source of truth).  With ``--unseen DIR`` it writes instead, into DIR,
the six instances *not shipped* that session 12 measured (README, "At production scale"):

    python benchmarks/make_scale_instances.py --unseen /tmp/unseen
    python benchmarks/scale.py --dir /tmp/unseen --no-simulator

With ``--random SEED N DIR`` it writes N random instances of the same families (p 8-32, loop
with v 1-4, V, bidirectional; fused or split backward; uniform, profiled or random uneven
costs with latency; no limit or a limit at V-Min, V-Half, half of 1F1B's or 1F1B's level;
F&B overlap on some bidirectional ones): instances nobody tuned for, to check that ``solve``
stays valid, within its time limit and reports honest gaps (session 20's sweep, README).

Profiled costs follow what large-model runs measure: middle stages F:B:W = 1 : 1 : 0.65, the
last stage carries the vocabulary (~1.4x F, ~1.7x W), p2p about 1.6 % of F.  Memory limits
are given in microbatches' worth of a device's activation: V-Min (p+4)/3, V-Half (p+2)/2,
1F1B p.
"""

from __future__ import annotations

import argparse
import random
import tempfile
from pathlib import Path
from typing import Any

from cpsched.instance import Instance

OUT = Path(__file__).resolve().parents[1] / "instances" / "scale"
#: Memory limit levels of the random instances, in microbatches' worth of a device's
#: activation for ``p`` devices: V-Min, V-Half, 1F1B and half of 1F1B.
LEVELS = {"vmin": lambda p: (p + 4) / 3, "vhalf": lambda p: (p + 2) / 2, "1f1b": lambda p: p,
          "half1f1b": lambda p: p / 2}


def level_limit(activation: float, v: int, level: str, p: int) -> float:
    """The memory limit at ``level`` for ``p`` devices with ``v`` chunks of ``activation``
    each, as the random instances write it (two decimals)."""
    return round(activation * v * LEVELS[level](p), 2)


def profiled(S: int, split: bool) -> dict[str, Any]:
    """Per-stage profiled costs for S stages (stage S-1 holds the output layer)."""
    f = [1.0] * S
    i = [1.0] * S
    w = [0.65] * S
    f[-1], w[-1] = 1.4, 1.105
    costs: dict[str, Any] = {"forward": f, "p2p_latency": 0.016}
    if split:
        costs |= {"backward_input": i, "backward_weight": w}
    else:
        costs["backward"] = [a + b for a, b in zip(i, w, strict=True)]
    return costs


def write(name: str, description: str, pipeline: dict[str, Any], costs: dict[str, Any],
          memory: dict[str, Any], out: Path = OUT) -> None:
    """Validate one instance and write it to ``out/name.toml``."""
    inst = Instance.from_dict({"name": name, "description": description,
                               "pipeline": pipeline, "costs": costs, "memory": memory})
    (out / f"{name}.toml").write_text(inst.to_toml(), encoding="utf-8")


def unseen(out: Path) -> None:
    """The six instances of session 12's unseen sweep (not shipped), written to ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    write("u-p16-zb-m64-latency", "p16 split F=I=W=1, p2p latency 0.2, limit 16",
          {"devices": 16, "microbatches": 64, "split_backward": True},
          {"forward": 1, "backward_input": 1, "backward_weight": 1, "p2p_latency": 0.2},
          {"limit": 16}, out)
    write("u-p16-dualpipe-m128-profiled", "DualPipe m128, profiled, pair 2.6",
          {"devices": 16, "microbatches": 128, "placement": "bidirectional",
           "split_backward": True},
          profiled(16, True) | {"overlap_forward_backward": 2.6}, {}, out)
    write("u-p24-dualpipe-m48-lim13", "DualPipe's shape p24 m48, profiled, pair 2.6, limit 13",
          {"devices": 24, "microbatches": 48, "placement": "bidirectional",
           "split_backward": True},
          profiled(24, True) | {"overlap_forward_backward": 2.6}, {"limit": 13}, out)
    write("u-p32-v1-m256-fused-lim16", "p32 m256, profiled, fused backward, limit 16 (half "
          "of 1F1B's)", {"devices": 32, "microbatches": 256}, profiled(32, False),
          {"limit": 16}, out)
    write("u-p24-loop-v2-m96-split-lim12", "p24 VPP2 m96, profiled, split backward, limit 12",
          {"devices": 24, "stages_per_device": 2, "microbatches": 96, "split_backward": True},
          profiled(48, True), {"activation": 0.5, "limit": 12}, out)
    write("u-p32-v-m128-fused-vmin", "p32 V m128, F=1 B=2 (fused), V-Min memory "
          "((p+4)/3 = 12)",
          {"devices": 32, "stages_per_device": 2, "microbatches": 128, "placement": "v"},
          {"forward": 1, "backward": 2}, {"activation": 0.5, "limit": 12}, out)


def _random_costs(rng: random.Random, S: int, split: bool, kind: str) -> dict[str, Any]:
    """Costs of one random instance: ``uniform`` (F = I = 1, W 0.5 or 1, or B = 2; latency 0
    or 0.1), ``profiled`` (:func:`profiled`) or ``random`` (F in [0.5, 2] per stage, I within
    20 % of F, W 0.4-1 F, B = 2 F; latency up to 0.3)."""
    if kind == "profiled":
        return profiled(S, split)
    if kind == "uniform":
        costs: dict[str, Any] = {"forward": 1, "p2p_latency": rng.choice([0, 0.1])}
        if split:
            return costs | {"backward_input": 1, "backward_weight": rng.choice([0.5, 1])}
        return costs | {"backward": 2}
    f = [round(rng.uniform(0.5, 2), 2) for _ in range(S)]
    costs = {"forward": f, "p2p_latency": round(rng.uniform(0, 0.3), 2)}
    if split:
        return costs | {"backward_input": [round(x * rng.uniform(0.8, 1.2), 2) for x in f],
                        "backward_weight": [round(x * rng.uniform(0.4, 1), 2) for x in f]}
    return costs | {"backward": [round(2 * x, 2) for x in f]}


def _overlap(rng: random.Random, p: int, costs: dict[str, Any]) -> list[float]:
    """Per-stage F&B pair durations for bidirectional placement (device d holds stages d and
    p-1-d): a random point, the same fraction for every stage, between the longer half and
    the two back to back (docs/spec.md §2.2), with B the device's longest backward."""
    def per_stage(key: str) -> list[float]:
        x = costs[key]
        return list(x) if isinstance(x, list) else [float(x)] * p
    f, i, w = per_stage("forward"), per_stage("backward_input"), per_stage("backward_weight")
    back = [a + b for a, b in zip(i, w, strict=True)]
    frac = rng.uniform(0.3, 0.8)
    out = []
    for s in range(p):
        b = max(back[s], back[p - 1 - s])
        lo, hi = max(f[s], b), f[s] + b
        out.append(round(lo + frac * (hi - lo), 2))
    return out


def random_instances(seed: int, n: int, out: Path) -> list[str]:
    """Write ``n`` random instances (module docstring) drawn with ``seed`` to ``out``;
    returns their names.  The same seed gives the same files."""
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    names = []
    for k in range(n):
        p = rng.choice([8, 12, 16, 24, 32])
        placement = rng.choice(["loop", "loop", "v", "bidirectional"])
        v = {"v": 2, "bidirectional": 1}.get(placement) or rng.choice([1, 2, 3, 4])
        m = rng.choice([p, 2 * p, 4 * p, 8 * p] if p <= 16 else [2 * p, 4 * p])
        split = rng.random() < 0.6
        kind = rng.choice(["uniform", "profiled", "random"])
        costs = _random_costs(rng, p * v, split, kind)
        if placement == "bidirectional" and split and rng.random() < 0.7:
            costs["overlap_forward_backward"] = _overlap(rng, p, costs)
        act = rng.choice([1.0, 0.5])
        memory: dict[str, Any] = {"activation": act}
        if split and rng.random() < 0.3:
            memory["released_by_input"] = 0.5
        level = rng.choice(["none", "vmin", "vhalf", "1f1b", "half1f1b"])
        if level != "none":  # in microbatches' worth of a device's activation (act * v)
            memory["limit"] = level_limit(act, v, level, p)
        name = (f"r{seed}-{k}-p{p}-{placement}-v{v}-m{m}-{'split' if split else 'fused'}-"
                f"{kind}-{level}")
        write(name, f"random instance {k} of seed {seed}",
              {"devices": p, "stages_per_device": v, "microbatches": m,
               "placement": placement, "split_backward": split}, costs, memory, out)
        names.append(name)
    return names


def small_pair_instances(seed: int, n: int, out: Path) -> list[str]:
    """Write ``n`` small random bidirectional instances with overlapped pairs (p 4 or 6,
    m 2p or 4p, split backward, the random costs and pairs of :func:`random_instances`,
    activation 1, no limit or 1F1B's or V-Half's) drawn with ``seed`` to ``out``; returns
    their names (docs/modelling.md §29: ``b1-0`` is ``tests/data/b1-0-bidirectional-pairs``)."""
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    names = []
    for k in range(n):
        p = rng.choice([4, 6])
        m = rng.choice([2 * p, 4 * p])
        kind = rng.choice(["uniform", "profiled", "random"])
        costs = _random_costs(rng, p, True, kind)
        costs["overlap_forward_backward"] = _overlap(rng, p, costs)
        memory: dict[str, Any] = {"activation": 1.0}
        level = rng.choice(["none", "1f1b", "vhalf"])
        if level != "none":
            memory["limit"] = round(float({"1f1b": p, "vhalf": (p + 2) / 2}[level]), 2)
        name = f"b{seed}-{k}-p{p}-m{m}-{kind}-{level}"
        write(name, "small", {"devices": p, "stages_per_device": 1, "microbatches": m,
                              "placement": "bidirectional", "split_backward": True},
              costs, memory, out)
        names.append(name)
    return names


def benchmark_files(description: str, prefix: str) -> list[Path]:
    """The instances a benchmark script runs on, from its command line ``[FILE ...]
    [--random SEED N]``: the files given, or the shipped scale set (``instances/scale``);
    ``--random`` adds N instances of :func:`random_instances` written to a temporary
    directory named with ``prefix``."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--random", nargs=2, type=int, metavar=("SEED", "N"))
    args = ap.parse_args()
    files = list(args.files) or sorted(OUT.glob("*.toml"))
    if args.random:
        tmp = Path(tempfile.mkdtemp(prefix=prefix))
        random_instances(args.random[0], args.random[1], tmp)
        files += sorted(tmp.glob("*.toml"))
    return files


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--unseen", type=Path, metavar="DIR",
                    help="write session 12's unseen instances to DIR instead")
    ap.add_argument("--random", nargs=3, metavar=("SEED", "N", "DIR"),
                    help="write N random instances drawn with SEED to DIR instead")
    args = ap.parse_args()
    if args.random is not None:
        seed, n, out = args.random
        print("\n".join(random_instances(int(seed), int(n), Path(out))))
        return
    if args.unseen is not None:
        unseen(args.unseen)
        return
    OUT.mkdir(parents=True, exist_ok=True)
    write("p16-loop-v2-m64-lim24", "Megatron PP16 x VPP2 layout, 64 microbatches, F=5 B=10, "
          "limit 24 stage activations (interleaved 1F1B needs 47)",
          {"devices": 16, "stages_per_device": 2, "microbatches": 64},
          {"forward": 5, "backward": 10}, {"limit": 24})
    write("p16-v-m64-vhalf", "V placement, split backward, F=I=W=1, V-Half memory "
          "((p+2)/2 = 9 microbatches of a device's activation)",
          {"devices": 16, "stages_per_device": 2, "microbatches": 64, "placement": "v",
           "split_backward": True},
          {"forward": 1, "backward_input": 1, "backward_weight": 1},
          {"activation": 0.5, "limit": 9})
    write("p16-v-m128-vmin-profiled", "V placement, profiled uneven costs with p2p latency, "
          "V-Min memory ((p+4)/3 = 6.67 microbatches)",
          {"devices": 16, "stages_per_device": 2, "microbatches": 128, "placement": "v",
           "split_backward": True},
          profiled(32, True), {"activation": 0.5, "limit": 6.67})
    write("p16-dualpipe-m32", "DualPipe: bidirectional, split backward F=I=W=1, "
          "overlapped F&B pair 2.5",
          {"devices": 16, "microbatches": 32, "placement": "bidirectional",
           "split_backward": True},
          {"forward": 1, "backward_input": 1, "backward_weight": 1,
           "overlap_forward_backward": 2.5}, {})
    write("p32-split-m128-lim32", "1F1B memory level (32 microbatches), split backward, "
          "F=I=W=1",
          {"devices": 32, "microbatches": 128, "split_backward": True},
          {"forward": 1, "backward_input": 1, "backward_weight": 1}, {"limit": 32})
    write("p32-loop-v2-m256-1f1b", "PP32 x VPP2, 256 microbatches, F=1 B=2, 1F1B memory "
          "level (32 microbatches of a device's activation)",
          {"devices": 32, "stages_per_device": 2, "microbatches": 256},
          {"forward": 1, "backward": 2}, {"activation": 0.5, "limit": 32})
    write("p16-loop-v4-m128-profiled", "PP16 x VPP4, 128 microbatches, profiled uneven "
          "costs with p2p latency, fused backward, 1F1B memory level",
          {"devices": 16, "stages_per_device": 4, "microbatches": 128},
          profiled(64, False), {"activation": 0.25, "limit": 16})
    write("p32-v-m128-vhalf-profiled", "V placement, PP32, profiled uneven costs with p2p "
          "latency, V-Half memory ((p+2)/2 = 17)",
          {"devices": 32, "stages_per_device": 2, "microbatches": 128, "placement": "v",
           "split_backward": True},
          profiled(64, True), {"activation": 0.5, "limit": 17})
    write("p32-zb-m256-profiled", "PP32, 256 microbatches, split backward, profiled uneven "
          "costs with p2p latency, 1F1B memory level",
          {"devices": 32, "microbatches": 256, "split_backward": True},
          profiled(32, True), {"limit": 32})
    write("p16-dualpipe-m64-profiled", "DualPipe: bidirectional, 64 microbatches, split "
          "backward, profiled uneven costs, overlapped F&B pair 2.6 (F + I + W = 2.65)",
          {"devices": 16, "microbatches": 64, "placement": "bidirectional",
           "split_backward": True},
          profiled(16, True) | {"overlap_forward_backward": 2.6}, {})

    write("p32-loop-v4-m64-lim8-profiled", "PP32 x VPP4, 64 microbatches, split backward, "
          "profiled uneven costs with p2p latency, memory-starved: 8 microbatches of a "
          "device's activation (a quarter of 1F1B's 32; interleaved 1F1B needs 39.75)",
          {"devices": 32, "stages_per_device": 4, "microbatches": 64, "split_backward": True},
          profiled(128, True), {"activation": 0.25, "limit": 8})
    write("p16-dualpipe-m64-lim10-profiled", "DualPipe's shape under a memory cap: "
          "bidirectional, 64 microbatches, split backward, profiled uneven costs, overlapped "
          "F&B pair 2.6, limit 10 microbatches' activations (DualPipe itself holds 17)",
          {"devices": 16, "microbatches": 64, "placement": "bidirectional",
           "split_backward": True},
          profiled(16, True) | {"overlap_forward_backward": 2.6}, {"limit": 10})


if __name__ == "__main__":
    main()
