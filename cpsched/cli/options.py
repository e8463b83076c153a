"""Options shared by the commands, and the instance flags declared once.

The instance flags (``--devices``, ``--stages-per-device``, ``--forward``, ...) are the fields
of :class:`InstanceOptions`; each field carries its command-line option and the instance key it
sets (docs/spec.md §2), so the mapping from flag to instance field exists in one place.  A
command takes them all with :func:`instance_options`::

    @instance_options
    def simulate(instance: InstanceArg = None, *, options: InstanceOptions) -> None:
        inst = load(instance, None, options)
"""

from __future__ import annotations

import functools
import inspect
import typing
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Annotated, Any

import typer

from cpsched.cli.output import err_console, fail
from cpsched.instance import (
    Instance,
    InstanceError,
    TickRoundingWarning,
    load_instance,
    parse_override,
)

# ------------------------------------------------------------- plain shared options
InstanceArg = Annotated[Path | None, typer.Argument(
    help="Instance TOML file (docs/spec.md §2). Omit it to build the instance from flags alone.",
    show_default=False)]
SetOpt = Annotated[list[str] | None, typer.Option(
    "--set", help="Override a field: KEY=VALUE, e.g. --set pipeline.microbatches=16 "
    "(repeatable; VALUE is read as TOML).", show_default=False)]
OutDir = Annotated[Path, typer.Option(
    "--out", "-o", help="Output directory (created; checked before any work). A result never "
    "replaces an existing file: when NAME.json or NAME.png exists, the run writes NAME-2.json "
    "and NAME-2.png (then -3, ...); files are written whole (temporary file, then renamed).")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress and no table.")]
NoPlot = Annotated[bool, typer.Option("--no-plot", help="Do not write the Gantt PNG.")]

_PANEL = "Instance from flags"


def _flag(key: str, *decls: str, help: str, panel: str | None = _PANEL,
          alias: str | None = None) -> Any:
    """A field of :class:`InstanceOptions`: its instance ``key``, its option, and an optional
    hidden ``alias`` flag (an older name that keeps working)."""
    option = typer.Option(*decls, help=help, rich_help_panel=panel, show_default=False)
    return field(default=None, metadata={"key": key, "flag": decls[0], "option": option,
                                         "alias": alias})


@dataclass(frozen=True)
class InstanceOptions:
    """Instance fields given as command-line flags; None: not given (the file's or the
    default value stays).  Times are in the instance's time units, memory in activation
    units (docs/spec.md §2)."""

    memory_limit: float | None = _flag(
        "memory.limit", "--memory-limit",
        help="Memory limit per device (overrides memory.limit).", panel=None)
    name: str | None = _flag("name", "--name", help="Instance name (output file stem).")
    devices: int | None = _flag("pipeline.devices", "--devices", "-p", help="Devices p.")
    stages_per_device: int | None = _flag(
        "pipeline.stages_per_device", "--stages-per-device", "-v",
        help="Virtual stages (chunks) per device, v.", alias="--chunks")
    microbatches: int | None = _flag("pipeline.microbatches", "--microbatches", "-m",
                                     help="Microbatches m.")
    placement: str | None = _flag("pipeline.placement", "--placement",
                                  help="loop | v | bidirectional.")
    split_backward: bool | None = _flag("pipeline.split_backward",
                                        "--split-backward/--fused-backward",
                                        help="Split backward into I and W.")
    forward: float | None = _flag("costs.forward", "--forward", help="F time per stage.")
    backward: float | None = _flag("costs.backward", "--backward", help="B time per stage.")
    backward_input: float | None = _flag("costs.backward_input", "--backward-input",
                                         help="I time per stage.")
    backward_weight: float | None = _flag("costs.backward_weight", "--backward-weight",
                                          help="W time per stage.")
    overlap_forward_backward: float | None = _flag(
        "costs.overlap_forward_backward", "--overlap", help="Overlapped F&B pair duration.")
    p2p_latency: float | None = _flag("costs.p2p_latency", "--p2p-latency",
                                      help="Latency between devices.")
    activation: float | None = _flag("memory.activation", "--activation",
                                     help="Activation memory per stage per microbatch.")
    released_by_input: float | None = _flag(
        "memory.released_by_input", "--released-by-input",
        help="Fraction of activation freed at the end of I.")

    def overrides(self) -> dict[str, Any]:
        """The flags given, as instance overrides ``{dotted key: value}`` for
        :func:`cpsched.instance.load_instance`."""
        return {f.metadata["key"]: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) is not None}


def _alias_name(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def _option_parameters() -> list[inspect.Parameter]:
    """One keyword parameter per :class:`InstanceOptions` field (and per hidden alias), with
    its typer option, for a command's signature."""
    hints = typing.get_type_hints(InstanceOptions)
    params = []
    for f in fields(InstanceOptions):
        params.append(inspect.Parameter(
            f.name, inspect.Parameter.KEYWORD_ONLY, default=None,
            annotation=Annotated[hints[f.name], f.metadata["option"]]))
        if f.metadata["alias"]:
            params.append(inspect.Parameter(
                _alias_name(f.metadata["alias"]), inspect.Parameter.KEYWORD_ONLY, default=None,
                annotation=Annotated[hints[f.name], typer.Option(f.metadata["alias"],
                                                                 hidden=True)]))
    return params


def _collect(values: dict[str, Any]) -> InstanceOptions:
    """Pop the instance flags (and aliases) from a command's keyword arguments."""
    given: dict[str, Any] = {}
    for f in fields(InstanceOptions):
        value = values.pop(f.name, None)
        alias = f.metadata["alias"]
        old = values.pop(_alias_name(alias), None) if alias else None
        if old is not None and value is not None and old != value:
            raise fail(f"{alias} = {old}: an old name of {f.metadata['flag']} (= {value}); "
                       "give one of them")
        given[f.name] = value if value is not None else old
    return InstanceOptions(**given)


def instance_options(command: Callable[..., None]) -> Callable[..., None]:
    """Give ``command`` every instance flag: its keyword parameter ``options:
    InstanceOptions`` is replaced, in the signature typer reads, by one option per field; the
    call receives them back as one :class:`InstanceOptions`."""
    hints = typing.get_type_hints(command, include_extras=True)
    own = [p.replace(annotation=hints.get(p.name, p.annotation))
           for p in inspect.signature(command).parameters.values() if p.name != "options"]

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> None:
        options = _collect(kwargs)
        command(**kwargs, options=options)

    params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]
    params += _option_parameters()
    wrapper.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in params}
    return wrapper


def load(path: Path | None, sets: list[str] | None,
         options: InstanceOptions | None = None) -> Instance:
    """The instance of a command: the file at ``path`` (or flags alone when None), then the
    flags in ``options``, then the ``--set KEY=VALUE`` overrides, validated.  A rounding of
    costs to the tick grid is printed as a ``warning:`` line.

    Raises:
        typer.Exit: code 2 with one message when the instance is missing or a field is wrong.
    """
    overrides = options.overrides() if options is not None else {}
    try:
        if path is None and not overrides and not sets:
            raise InstanceError("INSTANCE", None,
                                "give an instance file, or build one from flags "
                                "(--devices, --microbatches, --forward, --backward, ...)")
        for text in sets or []:
            key, value = parse_override(text)
            overrides[key] = value
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", TickRoundingWarning)
            inst = load_instance(path, overrides)
    except InstanceError as exc:
        raise fail(f"instance: {exc}") from None
    for w in caught:
        if issubclass(w.category, TickRoundingWarning):
            err_console.print(f"warning: instance {w.message}", markup=False)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return inst


def out_dir(out: Path, option: str = "--out") -> Path:
    """The output directory, created and checked writable before any work
    (:func:`cpsched.outputs.output_dir`).

    Raises:
        typer.Exit: code 2 naming the path and why it cannot be used.
    """
    from cpsched.outputs import OutputError, output_dir

    try:
        return output_dir(out, option)
    except OutputError as exc:
        raise fail(str(exc)) from None
