"""A policy file edited in place with its size and modification time kept (``rsync -a``,
``cp -p``, ``tar``) is in force at the next call: the worker reads the files' bytes, not their
size or time (issue 46). Real Cedar, the tool's activity, Postgres rows."""

from __future__ import annotations

import os
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from plangate.activities.catalogue import catalogue
from plangate.activities.tool_activity import tool_activities
from plangate.records import keys
from plangate.records.calls import StepRef, ToolCall, ToolFailure
from plangate.world.clients import World
from plangate.world.policies import load_bundle
from plangate.world.settings import Settings
from tests.test_mcp_guarded import account, credits
from tests.test_policy_runs import BASE, CREDIT, kept, policies, with_policies

# the same length: the second forbids every credit over 0.01 EUR
LAX = ('@id("cap")\nforbid(principal, action == Plangate::Action::"money", resource)\n'
       'when { context.amount_cents > 90000000 };\n')
TIGHT = ('@id("cap")\nforbid(principal, action == Plangate::Action::"money", resource)\n'
         'when { context.amount_cents > 1        };\n')


async def test_a_policy_edited_with_its_size_and_time_kept_decides_the_next_call(
    settings: Settings, world: World, pg: Any, tmp_path: Path
) -> None:
    assert len(LAX) == len(TIGHT) and LAX != TIGHT
    directory = policies(tmp_path, BASE, LAX)
    strict = with_policies(settings, directory)
    act = tool_activities(world, strict.catalogue, strict.policy)[CREDIT]
    aid = await account(world)

    async def credit(run: str, bundle: str) -> None:
        call = ToolCall(step=StepRef(run_id=run, plan_version=1, n=1, tool=CREDIT,
                                     args={"account_id": aid, "amount_eur": 50.0}),
                        idempotency_key=keys.idempotency_key(run, uuid.uuid4().hex[:16], "v1/1"),
                        policy_bundle=bundle)
        env = ActivityEnvironment()
        env.info = replace(env.info, workflow_id=run)
        await env.run(act, call)

    def bundle() -> str:
        return load_bundle(strict.policy, strict.world.scope, catalogue(strict.catalogue)).bundle

    before = bundle()
    await credit(f"plan-{uuid.uuid4().hex[:12]}", before)  # the lax cap: credited
    assert await credits(pg, aid) == 1
    path = directory / "p1.cedar"
    st = path.stat()
    path.write_text(TIGHT)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    now = path.stat()
    assert (now.st_size, now.st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    after = bundle()
    assert after != before
    run = f"plan-{uuid.uuid4().hex[:12]}"
    with pytest.raises(ApplicationError) as refused:
        await credit(run, after)
    failure = ToolFailure.model_validate(refused.value.details[0])
    assert (refused.value.type, failure.status) == ("policy_denied", 403)
    assert failure.detail.startswith(
        "not called: billing.issue_credit forbidden by the deployment's policy (cap)")
    assert await credits(pg, aid) == 1
    cur = await pg.execute("SELECT bundle FROM plangate.policy_decisions WHERE run_id = %s",
                           (run,))
    assert [r[0] for r in await cur.fetchall()] == [after]  # decided by the new bytes
    assert await kept(pg, run) == [("forbid", ["cap"], True, True)]
    cur = await pg.execute("SELECT count(*) FROM plangate.effects WHERE run_id = %s", (run,))
    assert (await cur.fetchone())[0] == 0
