"""Benchmark: does ``cpsched solve --time-limit T`` end within T, on an idle machine and on one
loaded by other processes (docs/guarantees.md §7.4)?

For each instance and each load (0: idle; N: N busy-looping Python processes beside the
solve, as many as the machine has cores by default) it runs the command a user types,
``cpsched solve FILE -t T -q --no-plot``, in a fresh process and prints the wall time of the
whole process, the overrun past T, the makespan and status it wrote, and the bound.

    python benchmarks/time_limit.py                      # the default rows, -t 8 and -t 15
    python benchmarks/time_limit.py -t 10 --load 2 p32-v-m128-vhalf-profiled
    python benchmarks/time_limit.py --typed p16-loop-v2-m64-lim24 -t 30   # table and PNG
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
SCALE = ROOT / "instances" / "scale"
DEFAULT = ["p32-loop-v2-m256-1f1b", "p32-v-m128-vhalf-profiled", "p32-zb-m256-profiled",
           "p32-loop-v4-m64-lim8-profiled", "p16-dualpipe-m64-lim10-profiled"]


def _spin() -> None:
    """A busy loop: one core's worth of load."""
    while True:
        pass


def run(path: Path, limit: float, load: int, typed: bool = False) -> dict[str, object]:
    """One ``cpsched solve`` in a fresh process beside ``load`` busy processes: one row.
    With ``typed`` the command as a user types it (the table and the PNG), else with ``-q
    --no-plot``."""
    ctx = multiprocessing.get_context("spawn")
    spinners = [ctx.Process(target=_spin, daemon=True) for _ in range(load)]
    for p in spinners:
        p.start()
    try:
        with tempfile.TemporaryDirectory() as out:
            cmd = [sys.executable, "-m", "cpsched.cli", "solve", str(path), "-t", str(limit),
                   *([] if typed else ["-q", "--no-plot"]), "-o", out]
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            wall = time.perf_counter() - t0
            files = list(Path(out).glob("*.json"))
            png = any(Path(out).glob("*.png"))
            doc = json.loads(files[0].read_text()) if files else {}
    finally:
        for p in spinners:
            p.terminate()
    return {"instance": path.stem, "-t": limit, "load": load, "wall s": round(wall, 2),
            "overrun s": round(max(0.0, wall - limit), 2), "exit": proc.returncode,
            "makespan": doc.get("makespan"), "status": doc.get("status"),
            "bound": doc.get("lower_bound"), "warm start": doc.get("warm_start"),
            **({"png": png} if typed else {})}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help=f"instance names in instances/scale "
                    f"(default: {', '.join(DEFAULT)})")
    ap.add_argument("-t", "--time-limit", type=float, nargs="+", default=[8.0, 15.0])
    ap.add_argument("--load", type=int, nargs="+", default=[0, os.cpu_count() or 2],
                    help="busy processes beside the solve (default: 0 and one per core)")
    ap.add_argument("--typed", action="store_true",
                    help="the command as a user types it: the table and the PNG (default: "
                    "-q --no-plot)")
    args = ap.parse_args()
    rows = []
    for name in args.names or DEFAULT:
        for limit in args.time_limit:
            for load in args.load:
                rows.append(run(SCALE / f"{name}.toml", limit, load, args.typed))
                print(pd.DataFrame(rows[-1:]).to_string(index=False, header=len(rows) == 1),
                      flush=True)
    print()
    print(pd.DataFrame(rows).to_markdown(index=False))


if __name__ == "__main__":
    main()
