"""``cpsched serve``: the interactive schedule explorer in the browser (docs/serve.md).

A Dash + Plotly app: the instance as a form, every registered schedule as a card, one
interactive Gantt chart and memory curve per selected schedule, a background CP-SAT solve with
live progress, hand edits re-timed by the one simulator and checked by the one validator, and
downloads (schedule JSON, PyTorch CSV, PNG/SVG).  Modules, one idea each:

- :mod:`~cpsched.serve.form`: form values ⇄ instance (the CLI's messages), URL query, upload;
- :mod:`~cpsched.serve.figures`: the Plotly Gantt chart (vectorised) and memory figure;
- :mod:`~cpsched.serve.views`: cards, cached known schedules, files to download;
- :mod:`~cpsched.serve.jobs`: background solves keyed by job id, with progress and cancel;
- :mod:`~cpsched.serve.edit`: hand edits of device orders, re-timed and validated;
- :mod:`~cpsched.serve.layout`, :mod:`~cpsched.serve.callbacks`,
  :mod:`~cpsched.serve.solve_ui`, :mod:`~cpsched.serve.edit_ui`: the page and its callbacks;
- :mod:`~cpsched.serve.app`: :func:`create_app`.

``from cpsched.serve import create_app`` imports Dash; nothing else in cpsched does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cpsched.serve.app import create_app


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from cpsched.serve.app import create_app

        return create_app
    raise AttributeError(f"module 'cpsched.serve' has no attribute {name!r}")


__all__ = ["create_app"]
