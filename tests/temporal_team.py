"""The example team project (examples/temporal_team, on pytest's ``pythonpath``) as the tests of
plangate.temporal use it: its world (the team's own variables) pointed at the session's stack, a
bucket of a test's own. Fixtures are imported by the test modules that use them."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from plangate.testing import Recorded

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "temporal_team"


def team_world(stack: Any) -> dict[str, str]:
    """The team's variables for its Postgres and S3 (the stack's), its AWS credentials too."""
    env = stack.env()
    return {"TEAM_DATABASE_URL": env["PLANGATE_DATABASE_URL"],
            "TEAM_S3_ENDPOINT_URL": env["PLANGATE_S3_ENDPOINT_URL"],
            **{k: env[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                   "AWS_DEFAULT_REGION")}}


@pytest.fixture
def team_env(stack: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in team_world(stack).items():
        monkeypatch.setenv(k, v)


@pytest.fixture
def bucket(s3: Any) -> str:
    name = f"team-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    return name


__all__ = ["EXAMPLE", "bucket", "team_env", "team_world"]


async def ledger_of(pg: psycopg.AsyncConnection[Any], wf: str) -> list[tuple[Any, ...]]:
    """The effect ledger's rows of a team's guarded run."""
    cur = await pg.execute(
        "SELECT tool, effect, state, amount, principal FROM plangate.effects WHERE run_id = %s",
        (wf,))
    return list(await cur.fetchall())


def tool_results(req: Recorded) -> list[str]:
    """The tool results a chat/completions request carries back to the model."""
    return [str(m["content"]) for m in req.messages if m.get("role") == "tool"]
