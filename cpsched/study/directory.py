"""A study directory: a study's definition and every finished solve, written as it arrives.

Layout (docs/studies.md)::

    DIR/study.toml          kind, cpsched version, solver settings (written once)
    DIR/runs/run.toml       one file per run: its instances and sources (run-2.toml, ...)
    DIR/results/ID.csv      one finished solve (one row), ID = task id (see :func:`task_id`)
    DIR/results/ID.error.csv  a failed task (retried by the next run; -2, -3: later attempts)

Every file is written atomically (temporary file, then a hard link to its final name) and none
is ever replaced (:mod:`cpsched.outputs`), so a killed or interrupted run leaves only complete
files, and a rerun reads what is done and computes only what is missing.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from importlib import metadata
from pathlib import Path
from typing import Any

from cpsched.instance import Instance, InstanceError, dumps_toml
from cpsched.outputs import OutputError, output_dir, write_file, write_set
from cpsched.study.memory import with_memory_limit
from cpsched.study.parallel import LimitSolve

STUDY_FILE = "study.toml"
RUNS = "runs"
RESULTS = "results"

#: Columns of a result file (one row), in order: the task id, the instance name and memory
#: limit it was solved for (empty: none), the worker that ran it, then :class:`LimitSolve`.
RESULT_COLUMNS = ["task_id", "instance", "memory_limit", "worker",
                  *[f.name for f in fields(LimitSolve)]]


def cpsched_version() -> str:
    """The installed cpsched version (``unknown`` when not installed)."""
    try:
        return metadata.version("cpsched")
    except metadata.PackageNotFoundError:  # pragma: no cover - always installed here
        return "unknown"


@dataclass(frozen=True)
class SolverSettings:
    """How every solve of a study runs (part of each task id).

    Attributes:
        time_limit: wall-clock seconds per solve (None: none — with ``workers = 1`` and
            ``parameters["max_deterministic_time"]`` the solve is reproducible).
        workers: CP-SAT ``num_workers`` per solve.
        seed: CP-SAT ``random_seed``.
        parameters: other CP-SAT parameters ``{name: value}``.
    """

    time_limit: float | None = None
    workers: int = 1
    seed: int = 0
    parameters: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain values (``time_limit`` left out when None, as TOML has no null)."""
        out: dict[str, Any] = {"workers": self.workers, "seed": self.seed,
                               "parameters": {k: _plain(v) for k, v in
                                              sorted(self.parameters.items())}}
        if self.time_limit is not None:
            out["time_limit"] = float(self.time_limit)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SolverSettings:
        """Inverse of :meth:`to_dict`."""
        tl = data.get("time_limit")
        return cls(time_limit=None if tl is None else float(tl), workers=int(data["workers"]),
                   seed=int(data.get("seed", 0)), parameters=dict(data.get("parameters", {})))

    def describe(self) -> str:
        """One line, e.g. ``time_limit=30 s, workers=1, seed=0, max_deterministic_time=2``."""
        tl = "none" if self.time_limit is None else f"{self.time_limit:g} s"
        extra = "".join(f", {k}={v}" for k, v in sorted(self.parameters.items()))
        return f"time_limit={tl}, workers={self.workers}, seed={self.seed}{extra}"


def _plain(v: Any) -> Any:
    """A CP-SAT parameter value as a TOML/JSON value (enums by their integer)."""
    if isinstance(v, bool | int | float | str):
        return v
    return int(v)


def task_id(instance: Instance, limit: float | None, settings: SolverSettings) -> str:
    """The stable id of one solve: a SHA-256 prefix (20 hex digits) of the instance's content
    at memory ``limit`` (its name and description left out) and the solver ``settings``.

    The same instance, limit and settings give the same id on any machine and in any run, so
    a rerun finds its earlier results; a changed instance or setting is a new task.
    """
    data = with_memory_limit(instance, limit).to_dict()
    data.pop("name", None)
    data.pop("description", None)
    text = json.dumps({"instance": _numbers(data), "solver": _numbers(settings.to_dict())},
                      sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]


def _numbers(x: Any) -> Any:
    """``x`` with every int (not bool) as a float, so that ``1`` and ``1.0`` hash alike."""
    if isinstance(x, dict):
        return {k: _numbers(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_numbers(v) for v in x]
    if isinstance(x, int) and not isinstance(x, bool):
        return float(x)
    return x


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, list):
        return " ".join(repr(float(x)) for x in v)
    if isinstance(v, float):
        return repr(v)
    return str(v)


def _outcome(row: Mapping[str, str]) -> LimitSolve:
    """A result row (strings) back to a :class:`LimitSolve` (floats round-trip exactly)."""

    def num(key: str) -> float | None:
        text = row.get(key, "")
        return float(text) if text else None

    peaks = row.get("peak_memory", "")
    return LimitSolve(
        makespan=num("makespan"), status=row["status"], gap=num("gap"),
        lower_bound=num("lower_bound"), solve_seconds=num("solve_seconds"),
        warm_start=row.get("warm_start") or None, bubble_fraction=num("bubble_fraction"),
        peak_memory=[float(x) for x in peaks.split()] if peaks else None,
        message=row.get("message", ""), reused=row.get("reused") == "True")


_ERROR_FILE = re.compile(r"^([0-9a-f]{20})\.error(?:-(\d+))?\.csv$")
_DONE_FILE = re.compile(r"^([0-9a-f]{20})\.csv$")


class StudyDir:
    """A study directory (module docstring): its settings, runs and results.

    Args (constructor):
        path: the directory.
        create: create it (and ``runs/``, ``results/``) if needed, checked writable; False
            only reads (e.g. for a report) and creates nothing.

    Raises (constructor):
        OutputError: ``path`` cannot be used as a directory (``create``), or is not a
            directory (not ``create``).
    """

    def __init__(self, path: str | Path, create: bool = True) -> None:
        if create:
            self.path = output_dir(path, "study directory")
            self.results_dir = output_dir(self.path / RESULTS, "study directory")
            self.runs_dir = output_dir(self.path / RUNS, "study directory")
            return
        self.path = Path(path)
        if not self.path.is_dir():
            raise OutputError(f"{path}: not a study directory (not a directory)")
        self.results_dir, self.runs_dir = self.path / RESULTS, self.path / RUNS

    # ------------------------------------------------------------------ definition
    def read_settings(self) -> dict[str, Any] | None:
        """The content of ``study.toml`` (None: a new study)."""
        f = self.path / STUDY_FILE
        if not f.is_file():
            return None
        try:
            return tomllib.loads(f.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise OutputError(f"{f}: not a study file ({exc})") from None

    def begin(self, kind: str, settings: SolverSettings, extra: Mapping[str, Any]) -> None:
        """Create ``study.toml`` for a new study, or check that an existing one has the same
        kind and solver settings.

        Args:
            kind: ``compare`` or ``pareto``.
            settings: the solver settings of every solve.
            extra: other fixed definition keys (e.g. ``schedules``), checked likewise.

        Raises:
            OutputError: the directory holds a study of another kind or other settings
                (naming both), since its results would not be comparable.
        """
        want = {"kind": kind, "solver": settings.to_dict(), **extra}
        have = self.read_settings()
        if have is None:
            doc = {**want, "cpsched_version": cpsched_version(),
                   "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
            try:
                write_file(self.path / STUDY_FILE,
                           lambda p: p.write_text(dumps_toml(doc), encoding="utf-8"),
                           option="study file")
                return
            except OutputError:  # another run created it meanwhile
                have = self.read_settings()
        assert have is not None
        for key, value in want.items():
            if have.get(key) != value:
                there, here = have.get(key), value
                if key == "solver" and isinstance(there, dict):
                    there, here = (SolverSettings.from_dict(there).describe(),
                                   settings.describe())
                raise OutputError(
                    f"study directory {self.path}: {key} {there!s} there, {here!s} in this "
                    f"run; a study keeps its {key} (use another --stem or --out for a new "
                    "study)")

    def settings(self) -> SolverSettings:
        """The solver settings recorded in ``study.toml``.

        Raises:
            OutputError: there is no ``study.toml``.
        """
        have = self.read_settings()
        if have is None:
            raise OutputError(f"{self.path}: not a study directory (no {STUDY_FILE}; "
                              "cpsched compare --out writes one)")
        return SolverSettings.from_dict(have["solver"])

    def add_run(self, instances: Sequence[Instance], sources: Sequence[str]) -> Path:
        """Record one run: its instances (full content) and where they came from."""
        doc = {"cpsched_version": cpsched_version(),
               "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
               "sources": list(sources),
               "instances": [i.to_dict() for i in instances]}
        paths = write_set(self.runs_dir, "run", {".toml": lambda p: p.write_text(
            dumps_toml(doc), encoding="utf-8")})
        return paths[0]

    def instances(self) -> list[Instance]:
        """Every instance of the study: the union over its runs in order of first appearance
        (an instance a later run changed under the same name takes its latest content).

        Raises:
            OutputError: a run file cannot be read.
        """
        by_name: dict[str, Instance] = {}
        runs = self.runs_dir.glob("run*.toml") if self.runs_dir.is_dir() else []
        for f in sorted(runs, key=_run_number):
            try:
                doc = tomllib.loads(f.read_text(encoding="utf-8"))
                for data in doc.get("instances", []):
                    inst = Instance.from_dict(data)
                    by_name[inst.name] = inst
            except (OSError, tomllib.TOMLDecodeError, InstanceError) as exc:
                raise OutputError(f"{f}: not a study run file ({exc})") from None
        return list(by_name.values())

    # --------------------------------------------------------------------- results
    def write_result(self, tid: str, instance: str, limit: float | None, worker: str,
                     outcome: LimitSolve) -> Path | None:
        """Write one finished solve atomically: ``results/ID.csv``, or for an ``ERROR``
        outcome ``results/ID.error.csv`` (``-2``, ... for later attempts).

        Returns:
            The file written, or None when ``ID.csv`` existed already (written by another
            run: results are never replaced).
        """
        values = {"task_id": tid, "instance": instance, "memory_limit": limit,
                  "worker": worker, **asdict(outcome)}

        def writer(path: Path) -> None:
            with path.open("w", encoding="utf-8", newline="") as fh:
                w = csv.writer(fh)
                w.writerow(RESULT_COLUMNS)
                w.writerow([_cell(values[c]) for c in RESULT_COLUMNS])

        if outcome.status == "ERROR":
            return write_set(self.results_dir, f"{tid}.error", {".csv": writer})[0]
        try:
            return write_file(self.results_dir / f"{tid}.csv", writer, option="result")
        except OutputError:
            return None

    def read_results(self) -> tuple[dict[str, LimitSolve], dict[str, LimitSolve]]:
        """``(done, failed)``: per task id, its finished solve, and its latest failure (only
        for ids with no finished solve)."""
        done: dict[str, LimitSolve] = {}
        failed: dict[str, tuple[int, LimitSolve]] = {}
        files = self.results_dir.iterdir() if self.results_dir.is_dir() else iter(())
        for f in files:
            m_done, m_err = _DONE_FILE.match(f.name), _ERROR_FILE.match(f.name)
            if not (m_done or m_err):
                continue
            row = _read_row(f)
            if row is None:
                continue
            if m_done:
                done[m_done.group(1)] = _outcome(row)
            elif m_err:
                k = int(m_err.group(2) or 1)
                if m_err.group(1) not in failed or failed[m_err.group(1)][0] < k:
                    failed[m_err.group(1)] = (k, _outcome(row))
        return done, {t: o for t, (_, o) in failed.items() if t not in done}


def _read_row(path: Path) -> dict[str, str] | None:
    """The one row of a result file (None: unreadable; it is then solved again)."""
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            rows = list(csv.DictReader(fh))
    except (OSError, csv.Error, UnicodeDecodeError):
        return None
    return rows[0] if len(rows) == 1 and rows[0].get("status") else None


def _run_number(path: Path) -> int:
    """``run.toml`` → 1, ``run-7.toml`` → 7."""
    m = re.match(r"^run(?:-(\d+))?\.toml$", path.name)
    return int(m.group(1) or 1) if m else 10**9
