"""The ``cpsched`` command line (docs/spec.md §4): the typer app, its commands, ``main``.

Exit codes: 0 success; 1 invalid schedule; 2 bad input (one message naming the field, the
value and what is allowed; never a traceback); 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import sys

import typer

from cpsched.cli import inspect, serve, solve, study, torch, trace
from cpsched.cli.inputs import begin_command, set_process_start
from cpsched.cli.output import err_console
from cpsched.instance import InstanceError
from cpsched.model import ScheduleFileError
from cpsched.outputs import OutputError

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


@app.callback()
def _begin() -> None:
    """Provably optimal pipeline-parallel training schedules."""
    begin_command()


app.command("solve")(solve.solve)
app.command("simulate")(inspect.simulate)
app.command("schedules")(inspect.schedules)
app.command("validate")(inspect.validate)
app.command("compare")(study.compare)
app.command("report")(study.report)
app.command("export")(torch.export)
app.command("import-torch")(torch.import_torch)
app.command("import-trace")(trace.import_trace)
app.command("serve")(serve.serve)


def main() -> None:
    """Entry point (``cpsched``): run the app; bad input (an instance, a schedule file, an
    output path, an unreadable file) exits 2 with one message, never a traceback; Ctrl-C
    exits 130."""
    from cpsched.cli import STARTED

    set_process_start(STARTED)
    try:
        app()
    except (InstanceError, ScheduleFileError, OutputError) as exc:
        err_console.print(f"error: {exc}", markup=False)
        sys.exit(2)
    except OSError as exc:
        err_console.print(f"error: {exc.filename or ''}: {exc.strerror or exc}", markup=False)
        sys.exit(2)


if __name__ == "__main__":
    main()
