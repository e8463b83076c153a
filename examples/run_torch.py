"""Run a cpsched schedule for real in PyTorch and check it against a single-process reference.

    python examples/run_torch.py SCHEDULE.json [SCHEDULE.json ...] [--steps 1]
        [--format compute_only|compute_comms|both] [--trace-dir DIR]

What it does:

1. reads the schedule (JSON, docs/spec.md §3) and exports it with
   :func:`cpsched.torch_io.to_torch_csv`
   (``compute_only``: PyTorch inserts the send/recv itself, the path torchtitan's custom CSV
   option takes; ``compute_comms``: cpsched's own send/recv order);
2. builds a small MLP of ``S = p * v`` blocks (``Linear(width, width)`` + ``tanh``), stage ``s``
   = block ``s``, placed on rank ``instance.device_of(s)`` (``loop`` or ``v`` placement);
3. launches ``p`` CPU processes (spawn, gloo backend, a free 127.0.0.1 port); each wraps its
   local blocks in ``torch.distributed.pipelining.PipelineStage`` and runs
   ``_PipelineScheduleRuntime`` after ``_load_csv(exported CSV, format)`` for ``--steps``
   training steps (plain SGD between steps), with the schedule's split backward (I/W) and
   overlapped F&B pairs exactly as exported;
4. compares every step's loss (mean of the microbatch losses) and every parameter gradient with
   the same model trained in one process on the same data (loss = mean over microbatches).

With ``--trace-dir DIR`` (one schedule, one format) the last step runs under the PyTorch
profiler on every rank and ``DIR/rank{r}.json`` (Chrome traces) and ``DIR/trace-meta.json``
are written, for ``cpsched import-trace DIR`` (docs/trace.md).

Several schedule files with the same ``p`` run in one launch (one after the other).  Exit 0
and a one-line summary per schedule and format when everything matches within
``--tolerance``; exit 1 on a mismatch or a failed/hung run; exit 2 on bad input.  Needs
``torch`` (the CPU build is enough); uses only localhost networking.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from cpsched.instance import InstanceError
from cpsched.model import Schedule, ScheduleFileError
from cpsched.torch_io import TorchCsvError, stage_to_rank, to_torch_csv

FORMATS = ("compute_only", "compute_comms")


# --------------------------------------------------------------------------- model
def build_blocks(num_stages: int, width: int, seed: int, dtype: torch.dtype) -> list[nn.Module]:
    """``num_stages`` blocks ``Linear(width, width) -> tanh`` with deterministic weights."""
    gen = torch.Generator().manual_seed(seed)
    blocks = []
    for _ in range(num_stages):
        lin = nn.Linear(width, width).to(dtype)
        with torch.no_grad():
            lin.weight.copy_(torch.randn(width, width, generator=gen, dtype=dtype) / width**0.5)
            lin.bias.copy_(torch.randn(width, generator=gen, dtype=dtype) * 0.1)
        blocks.append(nn.Sequential(lin, nn.Tanh()))
    return blocks


def make_data(m: int, mb_size: int, width: int, seed: int,
              dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Input and target batches of ``m * mb_size`` rows."""
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(m * mb_size, width, generator=gen, dtype=dtype)
    y = torch.randn(m * mb_size, width, generator=gen, dtype=dtype)
    return x, y


def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-microbatch loss (the pipeline averages gradients over microbatches)."""
    return nn.functional.mse_loss(output, target)


def reference(job: dict[str, Any], cfg: dict[str, Any]) -> list[dict[str, Any]]:
    """One process, same blocks and data: per step the loss (mean over microbatches) and the
    gradients ``{stage: {param_name: tensor}}``; SGD with ``cfg['lr']`` between steps."""
    dtype = getattr(torch, cfg["dtype"])
    m = job["m"]
    blocks = build_blocks(job["S"], cfg["width"], cfg["seed"], dtype)
    x, y = make_data(m, cfg["mb_size"], cfg["width"], cfg["seed"], dtype)
    out = []
    for _ in range(cfg["steps"]):
        for b in blocks:
            b.zero_grad(set_to_none=True)
        total = torch.zeros((), dtype=dtype)
        for xi, yi in zip(x.tensor_split(m), y.tensor_split(m), strict=True):
            h = xi
            for b in blocks:
                h = b(h)
            total = total + loss_fn(h, yi)
        loss = total / m
        loss.backward()
        out.append({"loss": loss.item(),
                    "grads": {s: {n: p.grad.clone() for n, p in b.named_parameters()}
                              for s, b in enumerate(blocks)}})
        with torch.no_grad():
            for b in blocks:
                for p in b.parameters():
                    p -= cfg["lr"] * p.grad
    return out


# --------------------------------------------------------------------------- workers
def run_job(rank: int, job: dict[str, Any], cfg: dict[str, Any]) -> list[dict[str, Any]]:
    """This rank's part of one schedule: ``PipelineStage`` per local stage, the runtime loading
    the exported CSV, ``cfg['steps']`` training steps.  Returns per step the losses (on the
    rank holding the last stage) and the local gradients."""
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

    dtype = getattr(torch, cfg["dtype"])
    S, m = job["S"], job["m"]
    mine = [s for s in range(S) if job["ranks"][s] == rank]
    x, y = make_data(m, cfg["mb_size"], cfg["width"], cfg["seed"], dtype)
    blocks = build_blocks(S, cfg["width"], cfg["seed"], dtype)  # same weights on every rank
    # Shapes are inferred at the first step ("dynamic" mode).  To give them statically, pass
    # input_args/output_args example tensors with requires_grad=True (PyTorch 2.13 sets up no
    # gradient receive for outputs whose example does not require grad).
    stages = [PipelineStage(blocks[s], s, S, torch.device("cpu")) for s in mine]
    sched = _PipelineScheduleRuntime(stages, m, loss_fn=loss_fn, scale_grads=True)
    sched._load_csv(job["csv"], format=job["fmt"])
    has_first, has_last = 0 in mine, S - 1 in mine
    results = []
    for k in range(cfg["steps"]):
        for s in mine:
            blocks[s].zero_grad(set_to_none=True)
        losses: list[torch.Tensor] = []
        args = (x,) if has_first else ()
        if cfg.get("trace_dir") and k == cfg["steps"] - 1:  # profile the last step
            traced_step(sched, args, y if has_last else None, losses if has_last else None,
                        Path(cfg["trace_dir"]) / f"rank{rank}.json")
        else:
            sched.step(*args, target=y if has_last else None,
                       losses=losses if has_last else None)
        results.append({
            "losses": [v.detach().item() for v in losses] if has_last else None,
            "grads": {s: {n: (p.grad.clone() if p.grad is not None else None)
                          for n, p in blocks[s].named_parameters()} for s in mine},
        })
        with torch.no_grad():
            for s in mine:
                for p in blocks[s].parameters():
                    if p.grad is not None:
                        p -= cfg["lr"] * p.grad
    return results


def traced_step(sched: Any, args: tuple[torch.Tensor, ...], target: torch.Tensor | None,
                losses: list[torch.Tensor] | None, path: Path) -> None:
    """One training step under the PyTorch profiler (CPU activity), its Chrome trace written to
    ``path``.  The runtime wraps every action of the rank in ``record_function("PP:{action}")``
    (e.g. ``PP:1F0``, ``PP:0RECV_B2``); ``cpsched import-trace`` reads those ranges.  A barrier
    first, so that the ranks enter the step together (the importer does not rely on it)."""
    from torch.profiler import ProfilerActivity, profile

    dist.barrier()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        sched.step(*args, target=target, losses=losses)
    prof.export_chrome_trace(str(path))


def worker(rank: int, cfg: dict[str, Any]) -> None:
    """One pipeline rank (a spawned process): run every job, save its results to files."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{cfg['port']}",
                            rank=rank, world_size=cfg["p"])
    try:
        for job in cfg["jobs"]:
            results = run_job(rank, job, cfg)
            torch.save(results, Path(cfg["out"]) / f"job{job['id']}-rank{rank}.pt")
            dist.barrier()
    except BaseException:
        traceback.print_exc()
        raise
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(cfg: dict[str, Any], timeout: float) -> str | None:
    """Run :func:`worker` on ``p`` spawned processes; None on success, else the reason."""
    if sys.platform.startswith("linux"):
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    ctx = mp.start_processes(worker, args=(cfg,), nprocs=cfg["p"], join=False,
                             start_method="spawn")
    deadline = time.monotonic() + timeout
    try:
        while not ctx.join(timeout=0.5):
            if time.monotonic() > deadline:
                for proc in ctx.processes:
                    if proc.is_alive():
                        proc.terminate()
                return f"timed out after {timeout:g} s (a hang or deadlock)"
    except mp.ProcessRaisedException as exc:
        return f"a rank raised: {str(exc).strip().splitlines()[-1]}"
    except mp.ProcessExitedException as exc:
        return f"a rank exited: {exc}"
    return None


# --------------------------------------------------------------------------- compare
def compare(job: dict[str, Any], cfg: dict[str, Any],
            ref: list[dict[str, Any]]) -> tuple[float, float]:
    """(max abs loss difference, max abs gradient difference) over all steps and stages."""
    per_rank = [torch.load(Path(cfg["out"]) / f"job{job['id']}-rank{r}.pt")
                for r in range(cfg["p"])]
    m = job["m"]
    loss_diff = grad_diff = 0.0
    for k, want in enumerate(ref):
        losses = [res[k]["losses"] for res in per_rank if res[k]["losses"] is not None]
        if len(losses) != 1 or len(losses[0]) != m:
            raise RuntimeError(f"step {k}: expected {m} losses from the last stage's rank, "
                               f"got {losses}")
        loss_diff = max(loss_diff, abs(sum(losses[0]) / m - want["loss"]))
        got: dict[int, dict[str, torch.Tensor | None]] = {}
        for res in per_rank:
            got.update(res[k]["grads"])
        for s, params in want["grads"].items():
            if s not in got:
                raise RuntimeError(f"step {k}: no gradients for stage {s}")
            for name, g in params.items():
                h = got[s][name]
                if h is None:
                    raise RuntimeError(f"step {k}: stage {s} {name}: no gradient")
                grad_diff = max(grad_diff, (h - g).abs().max().item())
    return loss_diff, grad_diff


# --------------------------------------------------------------------------- tracing
TRACE_META = "trace-meta.json"


def trace_dir_problem(path: Path, n_schedules: int, n_formats: int) -> str | None:
    """Why ``--trace-dir`` cannot be used (None: it can); the directory is created."""
    if n_schedules != 1 or n_formats != 1:
        return "traces one run: give one schedule file and one --format"
    if path.exists() and not path.is_dir():
        return "exists and is not a directory"
    path.mkdir(parents=True, exist_ok=True)
    if any(path.glob("rank*.json")) or (path / TRACE_META).exists():
        return "holds traces already; give a new or empty directory"
    return None


def write_trace_meta(path: Path, job: dict[str, Any], args: argparse.Namespace) -> None:
    """``DIR/trace-meta.json``: what ran (ranks, CSV format, the planned schedule's file and
    instance shape, model size) so that a trace can be told apart from another."""
    import json

    meta = {"format": "cpsched.torch-trace/1", "ranks": job["p"], "stages": job["S"],
            "microbatches": job["m"], "csv_format": job["fmt"],
            "files": [f"rank{r}.json" for r in range(job["p"])],
            "schedule": str(Path(args.schedules[0]).resolve()), "label": job["label"],
            "width": args.width, "microbatch_size": args.microbatch_size,
            "dtype": args.dtype, "steps": args.steps, "profiled_step": args.steps - 1}
    (path / TRACE_META).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("schedules", nargs="+", metavar="SCHEDULE.json",
                    help="cpsched schedule file(s); files with the same p share one launch")
    ap.add_argument("--steps", type=int, default=1, help="training steps (default 1)")
    ap.add_argument("--format", choices=(*FORMATS, "both"), default="compute_only",
                    help="CSV format to load (default compute_only, as torchtitan)")
    ap.add_argument("--width", type=int, default=8, help="hidden width (default 8)")
    ap.add_argument("--microbatch-size", type=int, default=2, help="rows per microbatch")
    ap.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    ap.add_argument("--tolerance", type=float, default=None,
                    help="max abs difference allowed (default 1e-9 float64, 1e-5 float32)")
    ap.add_argument("--lr", type=float, default=0.1, help="SGD step between steps")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="seconds before giving up on a launch")
    ap.add_argument("--no-reduce-grad", action="store_true",
                    help="compute_comms without REDUCE_GRAD cells: gradients are then not "
                         "scaled by 1/m, so the check must fail (a negative control)")
    ap.add_argument("--keep", metavar="DIR", default=None,
                    help="write the exported CSVs and per-rank results here")
    ap.add_argument("--trace-dir", metavar="DIR", default=None,
                    help="profile the last step on every rank and write the PyTorch profiler "
                         "Chrome traces DIR/rank{r}.json and DIR/trace-meta.json (one schedule "
                         "and one format; read them with `cpsched import-trace DIR`)")
    args = ap.parse_args(argv)
    if args.steps < 1 or args.width < 1 or args.microbatch_size < 1:
        print("error: --steps, --width and --microbatch-size must be >= 1", file=sys.stderr)
        return 2
    formats = FORMATS if args.format == "both" else (args.format,)
    if args.trace_dir is not None:
        problem = trace_dir_problem(Path(args.trace_dir), len(args.schedules), len(formats))
        if problem:
            print(f"error: --trace-dir {args.trace_dir}: {problem}", file=sys.stderr)
            return 2
    jobs: list[dict[str, Any]] = []
    try:
        for k, path in enumerate(args.schedules):
            schedule = Schedule.from_json(path)
            inst = schedule.instance
            kinds = sorted({str(a.kind) for a in schedule.actions})
            pairs = len({a.overlap for a in schedule.actions if a.overlap is not None})
            for fmt in formats:
                jobs.append({
                    "id": len(jobs), "p": inst.p, "S": inst.num_stages, "m": inst.m,
                    "ranks": stage_to_rank(inst), "fmt": fmt,
                    "text": to_torch_csv(schedule, fmt, reduce_grad=not args.no_reduce_grad),
                    "name": f"{k}-{inst.name}",
                    "label": f"{Path(path).name} ({schedule.method}, p={inst.p} v={inst.v} "
                             f"m={inst.m} {inst.placement}, kinds {','.join(kinds)}, "
                             f"{pairs} overlap pairs) {fmt}",
                })
    except (ScheduleFileError, InstanceError, TorchCsvError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    tol = args.tolerance if args.tolerance is not None else (
        1e-9 if args.dtype == "float64" else 1e-5)
    ok = True
    with tempfile.TemporaryDirectory(prefix="cpsched-torch-") as tmp:
        out = Path(args.keep) if args.keep else Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        for job in jobs:
            job["csv"] = str(out / f"{job['name']}.{job['fmt']}.csv")
            Path(job["csv"]).write_text(job.pop("text"), encoding="utf-8")
        for p in sorted({job["p"] for job in jobs}):
            group = [job for job in jobs if job["p"] == p]
            cfg = {"p": p, "jobs": group, "width": args.width, "mb_size": args.microbatch_size,
                   "dtype": args.dtype, "seed": args.seed, "lr": args.lr, "steps": args.steps,
                   "out": str(out), "port": free_port(), "trace_dir": args.trace_dir}
            t0 = time.monotonic()
            failure = launch(cfg, args.timeout)
            seconds = time.monotonic() - t0
            if failure:
                ok = False
                for job in group:
                    print(f"FAIL {job['label']}: {failure}")
                continue
            for job in group:
                try:
                    loss_diff, grad_diff = compare(job, cfg, reference(job, cfg))
                except RuntimeError as exc:
                    print(f"FAIL {job['label']}: {exc}")
                    ok = False
                    continue
                good = loss_diff <= tol and grad_diff <= tol
                ok &= good
                print(f"{'OK  ' if good else 'FAIL'} {job['label']}: steps={args.steps} "
                      f"max|dloss|={loss_diff:.3g} max|dgrad|={grad_diff:.3g} (tol {tol:g}); "
                      f"{p} ranks ran {len(group)} job(s) in {seconds:.1f} s")
                if args.trace_dir is not None:
                    write_trace_meta(Path(args.trace_dir), job, args)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
