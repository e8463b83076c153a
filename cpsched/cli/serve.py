"""``cpsched serve``: the interactive schedule explorer in the browser (docs/serve.md).

Starts the Dash app of :mod:`cpsched.serve` on ``--host``/``--port`` (default
``127.0.0.1:8050``, reachable from this machine only).  An instance given as a file, flags or
``--set`` is checked first, exactly as the other commands check it (one ``error:`` line, exit
2); without one the page starts with the article's interleaved example.
"""

from __future__ import annotations

import logging
import socket
from typing import Annotated

import typer

from cpsched.cli.options import InstanceArg, InstanceOptions, SetOpt, instance_options, load
from cpsched.cli.output import fail, say

HostOpt = Annotated[str, typer.Option(
    "--host", help="Address to listen on (0.0.0.0: every interface; the app has no login, "
    "so only do that on a trusted network).")]
PortOpt = Annotated[int, typer.Option("--port", help="TCP port, 1 to 65535.")]
DebugOpt = Annotated[bool, typer.Option(
    "--debug", help="Dash debug mode: reload on code changes and show Dash's developer "
    "tools (tracebacks appear in the page; never use it on a shared machine).")]
GroupOpt = Annotated[int | None, typer.Option(
    "--group-size", help="Megatron's microbatch_group_size_per_vp_stage for interleaved-1f1b "
    "(default: PyTorch's rule).", show_default=False)]


@instance_options
def serve(
    instance: InstanceArg = None,
    host: HostOpt = "127.0.0.1",
    port: PortOpt = 8050,
    debug: DebugOpt = False,
    group_size: GroupOpt = None,
    sets: SetOpt = None,
    *,
    options: InstanceOptions,
) -> None:
    """Interactive schedule explorer in the browser (Dash): the instance as a form, the known
    schedules side by side as Gantt charts, Solve with live progress, hand edits, downloads.

    Runs until Ctrl-C. Open http://HOST:PORT/ in a browser; the URL carries the instance, so a
    view can be shared.
    """
    if not 1 <= port <= 65535:
        raise fail(f"--port = {port}: must be an integer from 1 to 65535")
    if group_size is not None and group_size < 1:
        raise fail(f"--group-size = {group_size}: must be an integer >= 1")
    given = instance is not None or bool(sets) or bool(options.overrides())
    inst = load(instance, sets, options) if given else None
    _check_listen(host, port)
    from cpsched.serve import create_app

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s "
                        "%(message)s")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # not a line per request
    app = create_app(inst, group=group_size)
    say(f"cpsched serve: http://{host}:{port}/ (Ctrl-C stops)")
    try:
        app.run(host=host, port=port, debug=debug)
    except SystemExit as exc:  # werkzeug exits when it cannot listen after all
        if exc.code:
            raise fail(f"--host {host} --port {port}: cannot listen") from None
        raise


def _check_listen(host: str, port: int) -> None:
    """Exit 2 with one line when ``host:port`` cannot be listened on (taken, not an address
    of this machine, a privileged port)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        with socket.socket(infos[0][0], socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(infos[0][4])
    except OSError as exc:
        raise fail(f"--host {host} --port {port}: cannot listen "
                   f"({getattr(exc, 'strerror', None) or exc})") from None


__all__ = ["serve"]
