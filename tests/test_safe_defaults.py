"""Safe defaults (issue 34): where ``PLANGATE_APPROVE_EFFECTS`` is unset, a money or external
step waits for a person. ``plangate dev`` started as a new user starts it (a fresh shell's
environment, none of this session's variables), then ``examples/credit.json`` from the command
line and the same credit over ``plangate mcp``: each waits for a card and nothing is credited
(rows in the dev stack's ``demo.credits``, the tool's activity never scheduled) until the
``plangate approve ...`` line each printed is run; then exactly one credit per approved call."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from plangate.client.connection import connect
from plangate.demo.schema import EXAMPLE_ACCOUNT
from plangate.testing import scheduled
from plangate.world.settings import Settings
from tests.mcp_client import stdio
from tests.test_docs import ROOT
from tests.test_readme import RUN_ID, DevProcess, running_dev, second_terminal, sh

CREDIT = "billing.issue_credit"
EXAMPLE = ROOT / "examples" / "credit.json"
RULE = ("# money and external steps wait for a person (the default; "
        "PLANGATE_APPROVE_EFFECTS=none turns it off)")


@pytest.fixture(scope="module")
def dev() -> Iterator[DevProcess]:
    with running_dev("defaults") as proc:
        yield proc


def credits(env: dict[str, str]) -> list[tuple[Any, ...]]:
    with psycopg.connect(env["PLANGATE_DATABASE_URL"]) as conn:
        return conn.execute(
            "SELECT amount_eur::float, applied_to FROM demo.credits WHERE account_id = %s",
            (EXAMPLE_ACCOUNT,),
        ).fetchall()


def approve_line(run_id: str, env: dict[str, str]) -> str:
    """The ``plangate approve ...`` line ``plangate status`` prints once the run's card is
    published (asked again until then: the card comes after the step's first read)."""
    for _ in range(120):
        status = sh(f".venv/bin/plangate status {run_id}", env)
        found = [line.strip() for line in status.stdout.splitlines()
                 if line.strip().startswith("plangate approve ")]
        if found:
            (line,) = found
            assert f"will call {CREDIT}(account_id='{EXAMPLE_ACCOUNT}', amount_eur=7.25) [money]" \
                in status.stdout, status.stdout
            return line
        time.sleep(0.5)
    raise AssertionError(f"no card for {run_id}: {status.stdout}{status.stderr}")


def approved_and_ended(line: str, run_id: str, env: dict[str, str]) -> None:
    approve = sh(f".venv/bin/{line}", env)
    assert approve.returncode == 0, approve.stdout + approve.stderr
    watch = sh(f".venv/bin/plangate watch {run_id}", env)
    assert watch.returncode == 0, watch.stdout + watch.stderr
    assert f"run {run_id}: succeeded" in watch.stdout, watch.stdout


async def test_with_no_settings_a_credit_waits_for_a_card_from_the_cli_and_over_mcp(
    dev: DevProcess,
) -> None:
    assert RULE in dev.lines  # said at the worker's start
    env = second_terminal(dev)
    assert "PLANGATE_APPROVE_EFFECTS" not in env
    (step,) = json.loads(EXAMPLE.read_text())["steps"]
    assert step["args"] == {"account_id": EXAMPLE_ACCOUNT, "amount_eur": 7.25}
    assert credits(env) == []  # the example's customer is seeded, with no credit

    # the command line: the example as written
    run = sh(".venv/bin/plangate run examples/credit.json", env)
    assert run.returncode == 0, run.stdout + run.stderr
    (cli_run,) = RUN_ID.findall(run.stdout)
    cli_approve = approve_line(cli_run, env)
    assert cli_approve.startswith(f"plangate approve {cli_run} --step 1 --digest ")

    # an MCP client: the same credit as a tool call, answered with the card it waits on
    async with stdio(env) as mcp:
        answer = await mcp.call_tool("billing_issue_credit", step["args"])  # served name
    assert not answer.is_error, answer.content
    said = answer.structured_content
    assert said is not None and said["status"] == "awaiting_approval", said
    mcp_run, card = said["run_id"], said["awaiting"]
    assert (card["tool"], card["effect"], card["step"]) == (CREDIT, "money", 1)
    assert card["approve_with"].startswith(f"plangate approve {mcp_run} --step 1 --digest ")
    assert "This client cannot approve" in answer.content[0].text  # type: ignore[union-attr]

    # nothing credited, the tool never called, until a person approves
    client = await connect(Settings.from_env(env))
    assert credits(env) == []
    for run_id in (cli_run, mcp_run):
        assert (await scheduled(client, run_id)).get(CREDIT, 0) == 0

    approved_and_ended(cli_approve, cli_run, env)
    assert credits(env) == [(7.25, "account")]
    approved_and_ended(card["approve_with"], mcp_run, env)
    assert credits(env) == [(7.25, "account")] * 2
    for run_id in (cli_run, mcp_run):
        assert (await scheduled(client, run_id))[CREDIT] == 1
        report = json.loads(sh(f".venv/bin/plangate status {run_id} --json", env).stdout)
        (approval,) = report["approvals"]
        assert approval["answer"]["decision"] == "approve" and approval["answer"]["by"]
