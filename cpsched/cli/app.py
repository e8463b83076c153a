"""The ``cpsched`` command line (docs/spec.md §4): the typer app, its commands, ``main``.

Exit codes: 0 success; 1 invalid schedule / infeasible instance; 2 bad input (one message
naming the field, the value and what is allowed; never a traceback).
"""

from __future__ import annotations

import sys

import typer

from cpsched.cli import inspect, solve, study, torch
from cpsched.cli.output import err_console
from cpsched.instance import InstanceError
from cpsched.model import ScheduleFileError

app = typer.Typer(
    name="cpsched",
    help="Provably optimal pipeline-parallel training schedules (OR-Tools CP-SAT), and every "
    "well-known schedule (GPipe, 1F1B, interleaved, Zero Bubble, DualPipe) measured against "
    "them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
app.command("solve")(solve.solve)
app.command("simulate")(inspect.simulate)
app.command("schedules")(inspect.schedules)
app.command("validate")(inspect.validate)
app.command("compare")(study.compare)
app.command("export")(torch.export)
app.command("import-torch")(torch.import_torch)


def main() -> None:
    """Entry point (``cpsched``): run the app; bad input exits 2 with one message, never a
    traceback."""
    try:
        app()
    except (InstanceError, ScheduleFileError) as exc:
        err_console.print(f"error: {exc}", markup=False)
        sys.exit(2)


if __name__ == "__main__":
    main()
