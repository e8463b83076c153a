"""The ``cpsched`` command line: ``app`` (typer) and ``main`` (the console script).

Modules: :mod:`~cpsched.cli.app` (the app and ``main``), :mod:`~cpsched.cli.options` (shared
options, the instance flags as :class:`~cpsched.cli.options.InstanceOptions`),
:mod:`~cpsched.cli.output` (tables, files, messages), and one module per group of commands:
:mod:`~cpsched.cli.solve`, :mod:`~cpsched.cli.inspect` (simulate, schedules, validate),
:mod:`~cpsched.cli.study` (compare), :mod:`~cpsched.cli.torch` (export, import-torch).
"""

from cpsched.cli.app import app, main

__all__ = ["app", "main"]
