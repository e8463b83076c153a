"""A Dask cluster started the way clusters are started — ``dask scheduler`` and ``dask worker``
as separate processes — and ``cpsched compare --scheduler tcp://127.0.0.1:PORT`` run against
it: the same table as the local default, every solve done by the cluster's worker.

The solves have a wall-clock limit too, so each forks its CP-SAT search inside the worker
process that the ``dask worker`` nanny started as a daemon; the deterministic limit ends
them first, so the table is still the deterministic one."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from conftest import INSTANCES, same_table
from distributed import Client

from cpsched.study import compare, load_grid

DASK = Path(sys.executable).parent / "dask"
GRID = INSTANCES / "grids" / "small-grid.toml"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(proc: subprocess.Popen) -> None:
    """End a process and everything it started (its own session)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture
def scheduler(tmp_path: Path) -> Iterator[str]:
    """``dask scheduler`` and one ``dask worker`` (one thread), as separate processes."""
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    logs = {n: (tmp_path / f"{n}.log").open("w") for n in ("scheduler", "worker")}
    procs = [subprocess.Popen([str(DASK), "scheduler", "--host", "127.0.0.1", "--port",
                               str(port), "--no-dashboard"], stdout=logs["scheduler"],
                              stderr=subprocess.STDOUT, start_new_session=True)]
    try:
        procs.append(subprocess.Popen(
            [str(DASK), "worker", address, "--nworkers", "1", "--nthreads", "1",
             "--host", "127.0.0.1", "--no-dashboard"], stdout=logs["worker"],
            stderr=subprocess.STDOUT, start_new_session=True))
        with Client(address, timeout="60s") as client:
            client.wait_for_workers(1, timeout=120)
        yield address
    finally:
        for proc in reversed(procs):
            _stop(proc)
        for f in logs.values():
            f.close()


def test_compare_on_a_dask_cluster_started_by_hand(scheduler: str, tmp_path: Path) -> None:
    det = {"max_deterministic_time": 0.5}
    reference = compare(load_grid(GRID), time_limit=None, workers=1, jobs=1, progress=False,
                        parameters=det)
    out = tmp_path / "out"
    run = subprocess.run(
        [sys.executable, "-m", "cpsched.cli", "compare", "--grid", str(GRID), "--scheduler",
         scheduler, "--deterministic-time", "0.5", "--time-limit", "120", "-o", str(out),
         "-q"], capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    # 8 unlimited solves + one per distinct peak memory of a known schedule below the
    # unlimited optimum's: 14 since list follows interleaved 1F1B's order (same peaks)
    assert "solved 14 tasks in this run" in run.stdout
    table = pd.read_csv(out / "compare.csv")

    same_table(table, reference)
    with Client(scheduler, timeout="30s") as client:
        pids = set(client.run(os.getpid).values())
    rows = pd.concat(pd.read_csv(p) for p in (out / "compare" / "results").iterdir())
    assert len(rows) == 14 and set(rows["status"]) == {"OPTIMAL"}
    assert {int(w.rsplit(":", 1)[1]) for w in rows["worker"]} == pids  # the cluster solved


def test_unreachable_scheduler_is_one_error_line(tmp_path: Path) -> None:
    port = _free_port()  # nothing listens there
    run = subprocess.run(
        [sys.executable, "-m", "cpsched.cli", "compare", "--grid", str(GRID), "--scheduler",
         f"tcp://127.0.0.1:{port}", "-o", str(tmp_path), "-q"],
        capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 2
    assert run.stderr.startswith(f"error: --scheduler = 'tcp://127.0.0.1:{port}': cannot "
                                 "connect") and run.stderr.count("\n") == 1, run.stderr
    assert "Traceback" not in run.stdout + run.stderr
