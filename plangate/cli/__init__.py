"""The command line: the ``plangate`` console script (``entry``) and ``python -m plangate``,
on top of every other room. A module per group of commands (``plans``, ``runs``, ``answers``,
``keys``, ``report``, ``serve``, ``workers``, ``embedded``, ``policy``), each command declared
once as a ``command.Command``; ``commands``: the parser and dispatch built from them;
``ending``: an error's line and exit code; ``services``: reaching the configured services, with
one line naming the one that cannot be reached.

:func:`main` runs a command in-process and returns its exit code."""

from plangate.cli.commands import entry, main

__all__ = ["entry", "main"]
