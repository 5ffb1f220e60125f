"""The command line: the ``plangate`` console script (``entry``) and ``python -m plangate``,
on top of every other room. ``commands``: the parser and each command; ``services``: reaching
the configured services, with one line naming the one that cannot be reached.

:func:`main` runs a command in-process and returns its exit code."""

from plangate.cli.commands import entry, main

__all__ = ["entry", "main"]
