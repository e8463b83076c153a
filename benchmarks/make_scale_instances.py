"""Writes instances/scale/*.toml: the production-size set of issue 9 (kept for the record;
the TOML files are the source of truth).  With ``--unseen DIR`` it writes instead, into DIR,
the six instances *not shipped* that session 12 measured (README, "At production scale"):

    python benchmarks/make_scale_instances.py --unseen /tmp/unseen
    python benchmarks/scale.py --dir /tmp/unseen --no-simulator

Profiled costs follow what large-model runs measure: middle stages F:B:W = 1 : 1 : 0.65, the
last stage carries the vocabulary (~1.4x F, ~1.7x W), p2p about 1.6 % of F.  Memory limits
are given in microbatches' worth of a device's activation: V-Min (p+4)/3, V-Half (p+2)/2,
1F1B p.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cpsched.instance import Instance

OUT = Path(__file__).resolve().parents[1] / "instances" / "scale"


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--unseen", type=Path, metavar="DIR",
                    help="write session 12's unseen instances to DIR instead")
    args = ap.parse_args()
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
