"""What libraries log on the command line. psycopg's pool logs each failed connection (a
warning, libpq's hint on a second line) for seconds before plangate's own line says what broke
and what to do: a command that ends shows them only with ``--debug``. The commands that serve
(a worker, the approval page, the MCP server, the codec server, ``dev``) keep them: there a
connection lost and found again is the operator's to see."""

from __future__ import annotations

import logging
import sys

QUIETED = ("psycopg",)  # and its children: psycopg.pool
SERVING = frozenset({"worker", "ui", "mcp", "codec-server", "dev"})


def library_logs(command: str, debug: bool) -> None:
    """Set the libraries' loggers for ``command``: quiet, or with ``debug`` every record on
    stderr under the logger's name."""
    if command in SERVING:
        return
    for name in QUIETED:
        log = logging.getLogger(name)
        log.propagate = False  # not to the root's last-resort handler, which prints warnings
        if debug:
            shown = logging.StreamHandler(sys.stderr)
            shown.setFormatter(logging.Formatter("%(name)s: %(levelname)s: %(message)s"))
            log.handlers[:] = [shown]
            log.setLevel(logging.DEBUG)
        else:
            log.handlers[:] = [logging.NullHandler()]
