"""``create_app``: the Dash app of ``cpsched serve`` (docs/serve.md).

State lives in the browser tab (``dcc.Store`` components: the instance, the selected
schedules, the solve job id, the hand edit), so two tabs work independently; the server keeps
only caches of pure results and the running solve jobs, keyed by job id.  An exception in a
callback is logged with its traceback on the server (logger ``cpsched.serve``) and shown on
the page as one line, never as a traceback.
"""

from __future__ import annotations

import logging
from typing import Any

from dash import Dash, set_props

from cpsched.instance import Instance
from cpsched.model import Schedule
from cpsched.serve import callbacks, form, views
from cpsched.serve.edit_ui import edited_schedule, register_edit
from cpsched.serve.jobs import JobManager
from cpsched.serve.layout import INDEX, page
from cpsched.serve.solve_ui import register_solve

log = logging.getLogger("cpsched.serve")


def _on_error(err: Exception) -> None:
    """Dash's global callback error handler: log the traceback, show one line."""
    log.error("callback failed: %s", err, exc_info=err)
    set_props("server-error", {"children": f"internal error ({type(err).__name__}); the "
                                           "details are in the server log"})


def create_app(instance: Instance | None = None, *, jobs: JobManager | None = None,
               group: int | None = None) -> Dash:
    """The schedule explorer as a Dash app (not started: call ``app.run(host, port)``, or
    serve ``app.server``, a Flask WSGI app).

    Args:
        instance: the instance the form starts with (default: the article's interleaved
            example, p=4 v=2 m=8 F=5 B=10); a URL query naming instance fields replaces it.
        jobs: where solves run (default: a new :class:`~cpsched.serve.jobs.JobManager` with
            :func:`cpsched.solve`).
        group: Megatron's ``microbatch_group_size_per_vp_stage`` to start with.

    Returns:
        The :class:`dash.Dash` app; its ``jobs`` attribute is the job manager.
    """
    defaults = (form.values_from_instance(instance, group) if instance is not None
                else dict(form.DEFAULT_VALUES))
    jobs = jobs or JobManager()
    app = Dash(__name__, title="cpsched serve", suppress_callback_exceptions=True,
               on_error=_on_error, update_title=None)
    app.index_string = INDEX
    app.layout = page(defaults)

    def schedule_of(src: str, inst_data: dict[str, Any], job: dict[str, Any] | None,
                    edit: dict[str, Any] | None) -> Schedule | None:
        """The schedule a download button's source names (None: none)."""
        if src == "cpsat":
            found = jobs.get(job.get("id")) if job else None
            return found.schedule if found and job.get("key") == inst_data["key"] else None
        if src == "edited":
            return edited_schedule(edit)
        return views.known(inst_data["key"], src, inst_data["group"])

    callbacks.register_form(app, defaults)
    callbacks.register_cards(app)
    callbacks.register_panels(app)
    callbacks.register_downloads(app, schedule_of)
    register_solve(app, jobs)
    register_edit(app, jobs)
    app.jobs = jobs  # type: ignore[attr-defined]
    return app


__all__ = ["create_app"]
