"""Pipeline-parallel scheduling instances: load, validate, fill defaults (docs/spec.md §1–§2).

Modules, one idea each:

- :mod:`~cpsched.instance.errors`: :class:`InstanceError` (field, value, what is allowed) and
  the translation of pydantic's errors into it;
- :mod:`~cpsched.instance.sections`: the ``[pipeline]``, ``[costs]``, ``[memory]`` tables and
  the constrained types of their fields;
- :mod:`~cpsched.instance.model`: :class:`Instance` with its derived shape, placement,
  per-stage costs and integer ticks;
- :mod:`~cpsched.instance.checks`: the rules beyond field types (safe names, the tick grid
  within CP-SAT's integers, the overlap cost's physical range);
- :mod:`~cpsched.instance.overrides`: ``KEY=VALUE`` overrides and dotted keys;
- :mod:`~cpsched.instance.io`: reading TOML files into an :class:`Instance`;
- :mod:`~cpsched.instance.toml_writer`: writing TOML with per-stage lists on one line
  (:func:`dumps_toml`, used by :meth:`Instance.to_toml`).

Errors in an instance raise :class:`InstanceError` naming the field, the value and what is
allowed; the command line turns it into one message and exit code 2.
"""

from cpsched.instance.checks import NAME_RULE, OVERLAP_RULE, TickGrid, TickRoundingWarning
from cpsched.instance.errors import InstanceError
from cpsched.instance.io import load_instance, read_toml
from cpsched.instance.model import MAX_ACTIONS, MAX_TIME_DECIMALS, Instance
from cpsched.instance.overrides import parse_override, set_dotted
from cpsched.instance.sections import (
    Costs,
    Fraction,
    Memory,
    NonNegative,
    Number,
    PerStage,
    Pipeline,
    PositiveInt,
)
from cpsched.instance.toml_writer import dumps_toml

__all__ = [
    "MAX_ACTIONS",
    "MAX_TIME_DECIMALS",
    "NAME_RULE",
    "OVERLAP_RULE",
    "Costs",
    "Fraction",
    "Instance",
    "InstanceError",
    "Memory",
    "NonNegative",
    "Number",
    "PerStage",
    "Pipeline",
    "PositiveInt",
    "TickGrid",
    "TickRoundingWarning",
    "dumps_toml",
    "load_instance",
    "parse_override",
    "read_toml",
    "set_dotted",
]
