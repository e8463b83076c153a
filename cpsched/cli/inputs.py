"""Command-line inputs checked before any work (docs/spec.md §4.1, docs/guarantees.md): time
limits, worker and job counts, the seed, and ``--param NAME=VALUE`` typed against the CP-SAT
parameter's own field type.  Each wrong input is one ``error:`` line and exit code 2."""

from __future__ import annotations

import math
import time
from typing import Any

from cpsched.cli.output import fail
from cpsched.instance import InstanceError, parse_override

#: Largest ``--workers`` (CP-SAT threads per solve) and ``--jobs`` (processes).
MAX_WORKERS = 64
MAX_JOBS = 64

#: Largest ``--time-limit``, seconds (about 11.6 days).
MAX_TIME_LIMIT = 1e6

#: ``--seed`` is CP-SAT's ``random_seed``, a 32-bit signed integer.
SEED_RANGE = (-(2**31), 2**31 - 1)

#: CP-SAT parameters the command line sets itself, and the option to use instead.
MANAGED_PARAMETERS = {
    "num_workers": "--workers", "num_search_workers": "--workers", "random_seed": "--seed",
    "max_time_in_seconds": "--time-limit",
    "catch_sigint_signal": "nothing (cpsched handles Ctrl-C itself)",
}


class _Clock:
    """When the current command started (``time.perf_counter()`` values)."""

    process: float | None = None  # set by ``main``: the process's own start
    command: float | None = None


def begin_command() -> None:
    """Mark the start of a command: the process's start when run as ``cpsched`` (so the
    imports count), else now (e.g. a command invoked in-process by a test runner)."""
    _Clock.command = _Clock.process if _Clock.process is not None else time.perf_counter()
    _Clock.process = None  # one command per process start


def set_process_start(started: float) -> None:
    """Called by ``main`` with :data:`cpsched.cli.STARTED`."""
    _Clock.process = started


def command_start() -> float:
    """When the current command started; ``--time-limit`` counts from here."""
    if _Clock.command is None:
        begin_command()
    assert _Clock.command is not None
    return _Clock.command


#: CP-SAT parameters that change the problem solved, so that CP-SAT's bound is no longer a
#: bound on the instance's optimum (cpsched would report a false OPTIMAL).
UNSOUND_PARAMETERS = {
    "fix_variables_to_their_hinted_value": "it fixes the search to the warm start, so CP-SAT's "
    "bound would be the warm start's makespan, not a bound on the optimum",
}


def check_time_limit(seconds: float, option: str = "--time-limit") -> float:
    """``seconds`` if it is a finite number in (0, :data:`MAX_TIME_LIMIT`]; else exit 2."""
    if not math.isfinite(seconds) or seconds <= 0 or seconds > MAX_TIME_LIMIT:
        raise fail(f"{option} = {seconds}: must be a number of seconds > 0 and <= "
                   f"{MAX_TIME_LIMIT:g}")
    return seconds


def check_count(value: int | None, option: str, high: int) -> int | None:
    """``value`` if it is None or an integer in ``[1, high]``; else exit 2."""
    if value is not None and not 1 <= value <= high:
        raise fail(f"{option} = {value}: must be an integer from 1 to {high}")
    return value


def check_seed(seed: int) -> int:
    """``seed`` if it fits CP-SAT's 32-bit ``random_seed``; else exit 2."""
    lo, hi = SEED_RANGE
    if not lo <= seed <= hi:
        raise fail(f"--seed = {seed}: must be an integer from {lo} to {hi}")
    return seed


def _typed(name: str, value: Any, field: Any) -> Any:
    """``value`` converted to the type of the SatParameters ``field``.

    Raises:
        ValueError: what the field accepts.
    """
    from google.protobuf.descriptor import FieldDescriptor as FD  # noqa: N817

    t = field.type
    if t == FD.TYPE_BOOL:
        if isinstance(value, bool):
            return value
        raise ValueError("true or false")
    if t in (FD.TYPE_DOUBLE, FD.TYPE_FLOAT):
        if isinstance(value, int | float) and not isinstance(value, bool) and \
                not math.isnan(value):
            return float(value)
        raise ValueError("a number")
    if t == FD.TYPE_ENUM:
        names = [v.name for v in field.enum_type.values]
        match = [n for n in names if isinstance(value, str) and n.lower() == value.lower()]
        if match:
            from ortools.sat.python import cp_model_helper

            enum = getattr(cp_model_helper.SatParameters, field.enum_type.name, None)
            return getattr(enum, match[0]) if enum is not None else \
                field.enum_type.values_by_name[match[0]].number
        raise ValueError("one of " + ", ".join(names))
    if t == FD.TYPE_STRING:
        if isinstance(value, str):
            return value
        raise ValueError('a string, e.g. "x"')
    bits, signed = {FD.TYPE_INT32: (32, True), FD.TYPE_INT64: (64, True),
                    FD.TYPE_UINT32: (32, False), FD.TYPE_UINT64: (64, False)}.get(t, (0, True))
    if not bits:
        raise ValueError("a value --param cannot set (a message)")
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    if isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi:
        return value
    raise ValueError(f"an integer from {lo} to {hi}")


def cp_parameters(items: list[str] | None) -> dict[str, Any]:
    """``--param NAME=VALUE`` items as CP-SAT parameters ``{name: value}``, each VALUE read
    as TOML (``5``, ``0.5``, ``true``, ``"x"``; an enum by its name, e.g.
    ``search_branching=FIXED_SEARCH``) and typed against the ``SatParameters`` field, then
    the whole set checked by CP-SAT itself on a one-variable model.

    Raises:
        typer.Exit: code 2 naming the parameter, the value and what it accepts: not
            NAME=VALUE, not a CP-SAT parameter, a list parameter, one the command line sets
            itself (:data:`MANAGED_PARAMETERS`), one that would make the bound unsound
            (:data:`UNSOUND_PARAMETERS`), a value of the wrong type, or a set CP-SAT
            rejects.
    """
    from google.protobuf.descriptor import FieldDescriptor as FD  # noqa: N817
    from ortools.sat import sat_parameters_pb2

    known = sat_parameters_pb2.SatParameters.DESCRIPTOR.fields_by_name
    params: dict[str, Any] = {}
    for text in items or []:
        try:
            name, value = parse_override(text)
        except InstanceError:
            raise fail(f"--param {text!r}: expected NAME=VALUE") from None
        if name not in known:
            raise fail(f"--param {name}: not a CP-SAT parameter (see sat_parameters.proto)")
        if value is None:
            raise fail(f"--param {text!r}: expected NAME=VALUE with a value")
        if name in MANAGED_PARAMETERS:
            raise fail(f"--param {name}: set by the command line; use "
                       f"{MANAGED_PARAMETERS[name]}")
        if name in UNSOUND_PARAMETERS:
            raise fail(f"--param {name}: not allowed: {UNSOUND_PARAMETERS[name]}")
        field = known[name]
        repeated = field.is_repeated if hasattr(field, "is_repeated") else \
            field.label == FD.LABEL_REPEATED
        if repeated:
            raise fail(f"--param {name}: a list parameter; --param sets single values only")
        try:
            params[name] = _typed(name, value, field)
        except ValueError as exc:
            raise fail(f"--param {name} = {value!r}: must be {exc}") from None
    _check_with_cp_sat(params)
    return params


def _check_with_cp_sat(params: dict[str, Any]) -> None:
    """Let CP-SAT validate the parameter set on a one-variable model (milliseconds).

    Raises:
        typer.Exit: code 2 with CP-SAT's reason.
    """
    if not params:
        return
    from ortools.sat.python import cp_model

    model = cp_model.CpModel()
    x = model.new_int_var(0, 1, "x")
    model.minimize(x)
    solver = cp_model.CpSolver()
    for key, value in params.items():
        setattr(solver.parameters, key, value)
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = 5.0
    solver.parameters.catch_sigint_signal = False
    if solver.solve(model) == cp_model.MODEL_INVALID:
        raise fail(f"--param: CP-SAT rejects these parameters: {solver.solution_info()}")
