"""A read over MCP without a run (issue 39): a call of a tool the deployment declares ``read`` is
answered by the worker in a Temporal standalone activity (no workflow in the namespace, the
object read onto the worker's disk, into a directory of the call's own, removed once answered);
a read the worker refuses (its scope, its Cedar policies) or whose condition does not hold is
answered by the one-step run, exactly as before; a write is a run; and the worker answers no
forged request to call a write without a run. Judged by the world: files written (the effect
ledger's local writes), objects in S3, workflows and activities in Temporal."""

from __future__ import annotations

import asyncio
import hashlib
import subprocess
import sys
import uuid
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.common import RetryPolicy

from plangate.activities.catalogue import announced
from plangate.client.checked import check
from plangate.client.connection import connect
from plangate.client.reading import read_call
from plangate.dev._stack import choose_port
from plangate.dev._stack._temporal import TemporalDevServer
from plangate.records.interface import READ_CALL_ACTIVITY
from plangate.records.placement import catalogue_queue
from plangate.records.proofs import Submitter
from plangate.records.reading import ReadAnswer, ReadCall
from plangate.records.signing import SigningKey
from plangate.testing import running_worker
from plangate.world.settings import Settings
from tests.mcp_client import http_server, server_env

BASE = '@id("base")\npermit(principal, action, resource);\n'
NO_GET = ('@id("no-get")\nforbid(principal, action == Plangate::Action::"read", resource)\n'
          'when { resource.tool == "s3.get" };\n')


HELLO = hashlib.sha256(b"hello").hexdigest()


async def downloaded(pg: Any, run_id: str) -> list[str]:
    """The SHA-256 of each file the run (or read) wrote, as the effect ledger records it."""
    cur = await pg.execute("SELECT output->>'sha256' FROM plangate.effects WHERE run_id = %s "
                           "AND effect = 'local_write'", (run_id,))
    return [r[0] for r in await cur.fetchall()]


def content(path: str) -> bytes:
    return Path(path).read_bytes()


def exists(path: str) -> bool:
    return Path(path).exists()


def bucket_with_object(s3: Any) -> str:
    bucket = f"reads-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="k", Body=b"hello")
    return bucket


async def workflows(client: Client, run_id: str) -> int:
    return (await client.count_workflows(f"WorkflowId = '{run_id}'")).count


async def activities(client: Client, call_id: str) -> int:
    return (await client.count_activities(f"ActivityId = '{call_id}'")).count


async def call(settings: Settings, stack: Any, worker: Settings, tool: str,
               args: dict[str, Any], **extra: str) -> Any:
    """``tool`` called over MCP on a front with the test's settings, the worker with its own."""
    env = server_env(stack, settings, worker.temporal.task_queue, **extra)
    async with http_server(env) as srv, srv.client() as mcp:
        return await mcp.call_tool(tool, args)


async def test_a_read_is_answered_by_the_worker_without_a_workflow(
    client: Client, settings: Settings, stack: Any, s3: Any, pg: Any
) -> None:
    bucket = bucket_with_object(s3)
    dest = f"read-{uuid.uuid4().hex[:8]}.txt"
    async with running_worker(client, settings) as h:
        res = await call(settings, stack, h.settings, "s3_get",
                         {"bucket": bucket, "key": "k", "dest": dest})
    out = res.structured_content
    assert not res.is_error and out is not None, res
    assert (out["status"], out["state"], out["tool"]) == ("succeeded", "DONE", "s3.get")
    assert out["result"]["size"] == 5 and out["failure"] is None and out["awaiting"] is None
    assert dest in out["result"]["dest"]
    # the worker read it into a directory of the call's own, removed once answered
    assert await downloaded(pg, out["run_id"]) == [HELLO]
    assert not exists(out["result"]["dest"])
    assert await workflows(client, out["run_id"]) == 0  # no run
    assert await activities(client, out["run_id"]) == 1  # the worker's standalone activity


async def refused(client: Client, settings: Settings, stack: Any, worker: Settings,
                  bucket: str, pg: Any) -> dict[str, Any]:
    dest = f"refused-{uuid.uuid4().hex[:8]}.txt"
    async with running_worker(client, worker) as h:
        res = await call(settings, stack, h.settings, "s3_get",
                         {"bucket": bucket, "key": "k", "dest": dest})
    assert res.is_error and res.structured_content is not None
    out: dict[str, Any] = res.structured_content
    assert await downloaded(pg, out["run_id"]) == []  # nothing was read
    assert await workflows(client, out["run_id"]) == 1  # the run answered, as before
    return out


async def test_a_read_out_of_the_workers_scope_is_refused_as_before(
    client: Client, settings: Settings, stack: Any, s3: Any, pg: Any
) -> None:
    bucket = bucket_with_object(s3)
    narrow = replace(settings, world=replace(settings.world, allowed_buckets="elsewhere"))
    out = await refused(client, settings, stack, narrow, bucket, pg)
    assert (out["status"], out["state"]) == ("failed", "VOID")
    assert out["failure"]["code"] == "bad_plan"
    assert out["failure"]["detail"] == (
        "the plan does not pass this deployment's check: step 1, field args.bucket: bucket "
        f"{bucket} is not in PLANGATE_ALLOWED_BUCKETS")


async def test_a_read_the_workers_policies_forbid_is_refused_as_before(
    client: Client, settings: Settings, stack: Any, s3: Any, tmp_path: Path, pg: Any
) -> None:
    bucket = bucket_with_object(s3)
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "base.cedar").write_text(BASE)
    (policies / "no-get.cedar").write_text(NO_GET)
    strict = replace(settings, policy=replace(settings.policy, policies=policies))
    out = await refused(client, settings, stack, strict, bucket, pg)
    assert (out["status"], out["failure"]["code"]) == ("halted", "policy_denied")
    assert out["failure"]["detail"].startswith(
        "step 1: s3.get is forbidden by the deployment's policy (no-get, bundle cedar:")


async def test_a_read_whose_object_is_missing_is_answered_by_the_run(
    client: Client, settings: Settings, stack: Any, s3: Any
) -> None:
    bucket = bucket_with_object(s3)
    async with running_worker(client, settings) as h:
        res = await call(settings, stack, h.settings, "s3_get",
                         {"bucket": bucket, "key": "missing", "dest": "missing.txt"})
    out = res.structured_content
    assert res.is_error and out is not None
    assert (out["status"], out["failure"]["code"]) == ("failed", "precondition_unmet")
    assert out["reason"] == ("failed (precondition_unmet); not re-planned: the plan allows "
                             "none (budget.replans_max 0)")
    assert await workflows(client, out["run_id"]) == 1


async def test_a_write_is_a_run(client: Client, settings: Settings, stack: Any, s3: Any
                                ) -> None:
    bucket = bucket_with_object(s3)
    async with running_worker(client, settings) as h:
        res = await call(settings, stack, h.settings, "s3_put",
                         {"bucket": bucket, "key": "w", "body": "written"})
    out = res.structured_content
    assert not res.is_error and out is not None and out["status"] == "succeeded"
    assert s3.get_object(Bucket=bucket, Key="w")["Body"].read() == b"written"
    assert await workflows(client, out["run_id"]) == 1
    assert await activities(client, out["run_id"]) == 0


async def test_the_worker_calls_no_write_without_a_run_whatever_the_request_says(
    client: Client, settings: Settings, s3: Any
) -> None:
    """A request forged past the front (the plan's step declared ``read``, or ``write``):
    the worker's catalogue says ``s3.put`` writes, so it answers that a run must, and writes
    nothing."""
    bucket = bucket_with_object(s3)
    async with running_worker(client, settings) as h:
        # the worker's own queue (its catalogue's), as the front finds it
        queue = catalogue_queue(h.settings.temporal.task_queue,
                                announced(h.settings.catalogue).digest)
        for effect in ("read", "write"):
            plan = {"goal": "forged", "budget": {"replans_max": 0}, "steps": [
                {"n": 1, "tool": "s3.put", "effect": effect,
                 "args": {"bucket": bucket, "key": f"forged-{effect}", "body": "x"}}]}
            req = ReadCall.model_validate({"plan": plan})
            call_id = f"forged-{uuid.uuid4().hex[:8]}"
            got = await client.execute_activity(
                READ_CALL_ACTIVITY, req, id=call_id, task_queue=queue, result_type=ReadAnswer,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=RetryPolicy(maximum_attempts=1))
            assert got.report is None
            assert got.run == "s3.put is effect write in this deployment's catalogue"
        # and through the client's own path, a checked plan of a write
        done = check({"goal": "write", "budget": {"replans_max": 0}, "steps": [
            {"n": 1, "tool": "s3.put", "effect": "write",
             "args": {"bucket": bucket, "key": "checked", "body": "x"}}]}, h.settings)
        got = await read_call(client, h.settings, done, f"forged-{uuid.uuid4().hex[:8]}",
                              take_within=timedelta(seconds=10))
        assert got.report is None and "effect write" in got.run
    listed = s3.list_objects_v2(Bucket=bucket).get("Contents", [])
    assert [o["Key"] for o in listed] == ["k"]  # nothing written


async def test_a_deployment_can_make_every_read_a_run(
    client: Client, settings: Settings, stack: Any, s3: Any, pg: Any
) -> None:
    bucket = bucket_with_object(s3)
    dest = f"run-{uuid.uuid4().hex[:8]}.txt"
    async with running_worker(client, settings) as h:
        res = await call(settings, stack, h.settings, "s3_get",
                         {"bucket": bucket, "key": "k", "dest": dest}, PLANGATE_MCP_READS="run")
    out = res.structured_content
    assert not res.is_error and out is not None and out["status"] == "succeeded"
    assert content(out["result"]["dest"]) == b"hello"  # in the run's own directory
    assert await downloaded(pg, out["run_id"]) == [HELLO]
    assert await workflows(client, out["run_id"]) == 1
    assert await activities(client, out["run_id"]) == 0


def test_a_reads_setting_that_is_neither_is_a_usage_error(stack: Any, settings: Settings
                                                          ) -> None:
    env = {**server_env(stack, settings, "unused"), "PLANGATE_MCP_READS": "fast"}
    done = subprocess.run([sys.executable, "-m", "plangate", "mcp"], env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "PLANGATE_MCP_READS='fast': give worker" in done.stderr


async def test_a_server_without_standalone_activities_answers_every_read_by_a_run(
    settings: Settings, stack: Any, s3: Any, tmp_path: Path
) -> None:
    """A Temporal server that refuses standalone activities: the read is a run all the same
    (the front learns it from the refusal, and says so once)."""
    bucket = bucket_with_object(s3)
    server = TemporalDevServer(
        port=choose_port("Temporal", None, fallback=True), ui_port=None,
        db_file=tmp_path / "temporal.db", log_file=tmp_path / "temporal.log",
        namespace=settings.temporal.namespace,
        dynamic_config={"activity.enableStandalone": "false"},
    )
    await server.start()
    try:
        own = replace(settings, temporal=replace(settings.temporal, address=server.address))
        other = await connect(own)
        async with running_worker(other, own) as h:
            for n in range(2):  # the second call is not offered: the front knows now
                dest = f"nostandalone-{n}-{uuid.uuid4().hex[:6]}.txt"
                res = await call(own, stack, h.settings, "s3_get",
                                 {"bucket": bucket, "key": "k", "dest": dest},
                                 TEMPORAL_ADDRESS=server.address)
                out = res.structured_content
                assert not res.is_error and out is not None and out["status"] == "succeeded"
                assert content(out["result"]["dest"]) == b"hello"
                assert await workflows(other, out["run_id"]) == 1
    finally:
        await asyncio.to_thread(server.stop)


async def test_a_deployment_of_listed_submitters_reads_only_for_a_proven_one(
    client: Client, settings: Settings, s3: Any, pg: Any
) -> None:
    """Where the deployment lists its submitters, the worker reads only on a submission signed
    for this very call (its activity id), by a listed submitter, for a principal it may act as;
    an unsigned call, or one signed by a key the deployment does not list, is a run's to refuse."""
    bucket = bucket_with_object(s3)
    agent, stranger = SigningKey.generate("agent"), SigningKey.generate("stranger")
    worker = replace(settings, policy=replace(
        settings.policy, submitters=(Submitter(agent.name, agent.public, ("dana",)),)))

    def plan(dest: str) -> dict[str, Any]:
        return {"goal": "s3.get called over MCP", "budget": {"replans_max": 0},
                "on_behalf_of": "dana", "steps": [{"n": 1, "tool": "s3.get", "effect": "read",
                "args": {"bucket": bucket, "key": "k", "dest": dest}}]}

    async with running_worker(client, worker) as h:
        for key, answered in ((agent, True), (stranger, False), (None, False)):
            signer = replace(h.settings, identity=replace(h.settings.identity,
                                                          submitter_key=key))
            dest = f"signed-{uuid.uuid4().hex[:8]}.txt"
            call_id = f"mcp-s3.get-{uuid.uuid4().hex[:16]}"
            got = await read_call(client, signer, check(plan(dest), h.settings), call_id,
                                  take_within=timedelta(seconds=10))
            assert (got.report is not None) is answered, got.run
            assert await downloaded(pg, call_id) == ([HELLO] if answered else [])
            if not answered:
                assert got.run.startswith("not_permitted: ")
