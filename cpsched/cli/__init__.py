"""The ``cpsched`` command line: ``app`` (typer) and ``main`` (the console script).

Modules: :mod:`~cpsched.cli.app` (the app and ``main``), :mod:`~cpsched.cli.options` (shared
options, the instance flags as :class:`~cpsched.cli.options.InstanceOptions`),
:mod:`~cpsched.cli.output` (tables, files, messages), and one module per group of commands:
:mod:`~cpsched.cli.solve`, :mod:`~cpsched.cli.inspect` (simulate, schedules, validate),
:mod:`~cpsched.cli.study` (compare), :mod:`~cpsched.cli.torch` (export, import-torch).

:data:`STARTED` is the ``time.perf_counter()`` value when the command line was imported — as
early as the process allows — from which ``--time-limit`` bounds the whole command.
"""

import time

#: When the command started (``time.perf_counter()``): ``--time-limit`` counts from here.
STARTED = time.perf_counter()

from cpsched.cli.app import app, main  # noqa: E402  (after STARTED: the imports count)

__all__ = ["STARTED", "app", "main"]
