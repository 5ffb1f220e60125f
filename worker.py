"""Starts a plangate worker against the configured services (same as `plangate worker`).

It leaves the way the ``plangate`` command does (``plangate.cli.entry``): one line for a
service it cannot reach, exit codes as documented there, and no interpreter teardown.
"""

from __future__ import annotations

import sys

from plangate.cli import entry

if __name__ == "__main__":
    entry(["worker", *sys.argv[1:]])
