"""The Temporal team example's worker (examples/temporal_team/run_worker.py) as a newcomer starts
it from docs/temporal-agents.md: without the team's own variables, or without a Temporal server,
one line on stderr naming what is missing and exit 2, not a traceback. (Its guarded runs are
tests/test_temporal_plugin.py's.)"""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from tests.temporal_team import EXAMPLE
from tests.test_docs import DOCS, session_free_env

VARS = ("TEAM_DATABASE_URL", "TEAM_S3_ENDPOINT_URL")


def worker(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "run_worker.py", "--queue", "credits"], cwd=EXAMPLE,
                          env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("missing", VARS)
def test_a_missing_team_variable_is_one_line_and_exit_2(missing: str) -> None:
    env = {k: v for k, v in session_free_env().items() if k not in VARS}
    env |= {k: "postgresql://127.0.0.1:1/x" for k in VARS if k != missing}
    proc = worker(env)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"run_worker: {missing} is not set: "), line
    assert proc.stdout == ""


def test_no_temporal_server_is_one_line_and_exit_2() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        env = session_free_env() | {k: "http://127.0.0.1:1" for k in VARS}
        env["TEMPORAL_ADDRESS"] = f"127.0.0.1:{port}"
        proc = worker(env)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"run_worker: no Temporal server answers at 127.0.0.1:{port} "), line


def test_the_page_that_shows_the_example_names_its_variables() -> None:
    page = (DOCS / "temporal-agents.md").read_text()
    section = page[page.index("## Running the example"):]
    for name in VARS:
        assert f"export {name}" in section or f" {name}=" in section, name
