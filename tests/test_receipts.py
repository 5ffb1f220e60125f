"""Signed receipts (issue 51, item 3): the worker signs one receipt per ledgered effect with its
receipt key, keeps it in ``plangate.receipts``, the run's report and the MCP answer carry it,
``plangate receipt RUN`` exports a run's and ``plangate receipt verify`` checks them offline.
Real Temporal, Postgres and S3; the CLI as a process."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from credits.workflows import ArchiveWorkflow
from temporalio.client import Client
from temporalio.worker import Worker

from plangate.activities.bootstrap import ensure_schema
from plangate.activities.tool_activity import tool_activities
from plangate.cli import main
from plangate.client.api import Plangate
from plangate.demo.schema import Account, seed_account
from plangate.plans.model import Effect
from plangate.records.calls import ToolCall, ToolResult
from plangate.records.receipts import (
    DOMAIN,
    ReceiptProblem,
    line,
    sha256_of,
    sign,
    verify_receipt,
)
from plangate.records.report import (
    RECEIPTS_BUDGET,
    Phase,
    RunReport,
    StepReport,
    StepTimings,
)
from plangate.records.signing import SigningKey
from plangate.testing import Harness, ended, running_worker
from plangate.workflows import bookkeeping
from plangate.world.clients import World
from plangate.world.settings import Settings
from tests.mcp_client import http_server, server_env
from tests.temporal_team import bucket, team_env
from tests.test_ledger import as_run, scheduled_call
from tests.test_temporal_plugin import ACTIVITIES, plugin, team_client

__all__ = ["bucket", "team_client", "team_env"]  # fixtures

ROOT = Path(__file__).resolve().parents[1]
KEY = SigningKey.generate("worker-receipts")
PERMIT_ALL = '@id("base")\npermit(principal, action, resource);\n'
CREDIT = "billing.issue_credit"


@dataclass
class Deployment:
    h: Harness
    settings: Settings
    aid: str
    bucket: str
    env: dict[str, str]  # the CLI's: the stack's variables, no receipt key


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def deployed(client: Client, settings: Settings, stack: Any, s3: Any,
                   tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Deployment]:
    """A worker that signs receipts, under a Cedar bundle (permit all), a closed account to
    credit and a bucket to write."""
    tag = uuid.uuid4().hex[:8]
    policies = tmp_path_factory.mktemp("receipt-policies")
    (policies / "base.cedar").write_text(PERMIT_ALL)
    signing = replace(settings, policy=replace(settings.policy, policies=policies,
                                               receipt_key=KEY))
    aid, bucket = f"acct_{tag}", f"receipts-{tag}"
    world = World(signing.world)
    try:
        await ensure_schema(world, signing.catalogue)
        await seed_account(world, Account(aid, f"ar@{aid}.example", status="closed"))
    finally:
        await world.close()
    s3.create_bucket(Bucket=bucket)
    env = {k: v for k, v in {**os.environ, **stack.env()}.items()
           if k != "PLANGATE_RECEIPT_KEY"}
    async with running_worker(client, signing) as h:
        yield Deployment(h, signing, aid, bucket, env)


def two_effects(d: Deployment, amount: float, key: str) -> dict[str, Any]:
    """A credit a person approves, then an S3 put whose version is read at the call (absent)."""
    return {"goal": "credit and record", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": CREDIT, "approval": "required",
         "args": {"account_id": d.aid, "amount_eur": amount}},
        {"n": 2, "tool": "s3.put", "depends_on": [1],
         "args": {"bucket": d.bucket, "key": key, "body": "credited"},
         "pre": [{"probe": "object_version", "bucket": d.bucket, "key": key}]},
    ]}


async def approved_run(d: Deployment, plan: dict[str, Any]) -> RunReport:
    api = Plangate(d.h.client, d.h.settings)
    handle = await d.h.start(plan)
    for _ in range(1200):  # 60 s on a loaded machine
        pending = [a for a in (await api.report(handle.id)).approvals if a.status == "pending"]
        if pending:
            await api.approve(handle.id, pending[0].step, pending[0].digest, by="erin")
            break
        await asyncio.sleep(0.05)
    return await ended(handle)


async def effect_rows(pg: Any, run_id: str) -> dict[str, dict[str, Any]]:
    cur = await pg.execute(
        "SELECT idempotency_key, tool, args_sha256, principal, run_id, step, plan_version, "
        "card_digest, approver, state, output FROM plangate.effects WHERE run_id = %s",
        (run_id,))
    names = [c.name for c in cur.description]
    return {r[0]: dict(zip(names, r, strict=True)) for r in await cur.fetchall()}


async def receipt_rows(pg: Any, run_id: str) -> dict[str, str]:
    cur = await pg.execute(
        "SELECT idempotency_key, receipt FROM plangate.receipts WHERE run_id = %s", (run_id,))
    return {k: v for k, v in await cur.fetchall()}


async def cli(env: dict[str, str], *args: str, stdin: str | None = None
              ) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "plangate", "receipt", *args]
    return await asyncio.to_thread(subprocess.run, argv, capture_output=True, text=True,
                                   env=env, cwd=ROOT, timeout=60, input=stdin)


async def test_a_receipt_per_effect_equal_to_the_ledger_and_the_report_verified_offline(
    deployed: Deployment, pg: Any, tmp_path: Path
) -> None:
    d = deployed
    rep = await approved_run(d, two_effects(d, 12.5, f"r-{uuid.uuid4().hex[:6]}.txt"))
    assert rep.status == "succeeded", rep.failure
    effects = await effect_rows(pg, rep.run_id)
    stored = await receipt_rows(pg, rep.run_id)
    assert set(stored) == set(effects) and len(effects) == 2  # one receipt per effect row
    receipts: list[dict[str, Any]] = []
    for step in rep.steps:
        assert step.ledger is not None and step.ledger.receipt is not None
        assert line(step.ledger.receipt) == stored[step.ledger.key]  # the report's is the one kept
        receipt: dict[str, Any] = json.loads(stored[step.ledger.key])
        receipts.append(receipt)
        row = effects[step.ledger.key]
        call, approval, outcome = receipt["call"], receipt["approval"], receipt["outcome"]
        assert (call["tool"], call["args_sha256"], call["principal"], call["run_id"],
                call["step"], call["plan_version"], call["idempotency_key"]) == (
            row["tool"], row["args_sha256"], row["principal"], row["run_id"], row["step"],
            row["plan_version"], row["idempotency_key"])
        assert approval["card_digest"] == row["card_digest"]
        assert approval["approvers"] == ([row["approver"]] if row["approver"] else [])
        assert approval["grant"] is None
        assert (outcome["state"], outcome["error"]) == (row["state"], None) == ("done", None)
        assert step.result_digest is not None
        assert outcome["result_sha256"] == step.result_digest.sha256 == sha256_of(row["output"])
        assert step.policy is not None and receipt["policy"]["decision"] is not None
        assert receipt["policy"]["bundle"] == step.policy.bundle
        decision = receipt["policy"]["decision"]
        assert (decision["outcome"], decision["policies"]) == (
            step.policy.outcome, list(step.policy.policies))
        assert step.timings.tool_started_at is not None
        assert receipt["times"]["started_at"] == step.timings.tool_started_at.isoformat()
    credit, put = receipts
    assert credit["approval"]["approvers"] == ["erin"]
    # what the probes saw: the put's check at the call (absent), as the report recorded it
    at_call = [c for c in rep.steps[1].checks if c.phase is Phase.AT_CALL]
    assert [(r["probe"], r["outcome"], r["observed"]) for r in put["before"]["results"]] == [
        (r.condition.probe, r.outcome.value, r.observed) for r in at_call[-1].results]
    assert put["before"]["results"][0]["observed"] == {"absent": True}
    assert [r["args_sha256"] for r in put["before"]["results"]] == [
        sha256_of(r.condition.args) for r in at_call[-1].results]
    # the credit's read after the act: its post check as reported, then the put's first read
    # (fused with it: the next step's conditions ride on the same read)
    post = [c for c in rep.steps[0].checks if c.phase is Phase.POST]
    mine = [(r["probe"], r["outcome"]) for r in credit["after"]["results"]]
    mine = mine[:len(post[0].results)]
    assert mine == [(r.condition.probe, r.outcome.value) for r in post[0].results]
    assert mine == [("field_present", "holds"), ("field_not_equals", "holds")]

    # exported as JSON lines, verified offline by the deployment's public key
    exported = await cli(d.env, rep.run_id)
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout.splitlines() == [line(r) for r in receipts]
    file = tmp_path / "receipts.jsonl"
    file.write_text(exported.stdout)
    public = tmp_path / "receipt.pub"
    public.write_text(f"public: {KEY.public_entry()}\n")
    ok = await cli(d.env, "verify", str(file), "--public-key", str(public))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.splitlines()[:2] == [
        f"line {n}: verified: {r['effect']}: {r['call']['tool']} step {n} of run {rep.run_id}: "
        "done" for n, r in enumerate(receipts, 1)]

    # one byte altered in a value of line 2, then in line 1's signature: that line fails
    lines = exported.stdout.splitlines()
    altered = lines[1].replace('"step":2', '"step":3', 1)
    assert altered != lines[1]
    file.write_text(f"{lines[0]}\n{altered}\n")
    bad = await cli(d.env, "verify", str(file), "--public-key", KEY.public_entry())
    assert bad.returncode == 1
    assert bad.stdout.splitlines()[1] == (
        "line 2: FAILED: the signature does not verify: the receipt was altered, or signed by "
        "another key")
    assert "1 of 2 receipts do not verify" in bad.stderr
    first = json.loads(lines[0])
    sig = bytearray(base64.b64decode(first["signature"]))
    sig[0] ^= 1
    first["signature"] = base64.b64encode(bytes(sig)).decode()
    file.write_text(f"{line(first)}\n{lines[1]}\n")
    bad = await cli(d.env, "verify", str(file), "--public-key", KEY.public_entry())
    assert bad.returncode == 1 and bad.stdout.splitlines()[0].startswith(
        "line 1: FAILED: the signature does not verify"), bad.stdout
    # a key other than the worker's: every line fails, naming both keys' fingerprints
    other = SigningKey.generate("someone")
    file.write_text(exported.stdout)
    wrong = await cli(d.env, "verify", "-", "--public-key", other.public_entry(),
                      stdin=exported.stdout)
    assert wrong.returncode == 1
    assert wrong.stdout.splitlines()[0].startswith("line 1: FAILED: signed by the key "), wrong
    with pytest.raises(ReceiptProblem, match="signed by the key"):
        verify_receipt(lines[0], other.public)


async def test_a_call_answered_from_the_ledger_makes_no_second_receipt(
    deployed: Deployment, pg: Any, world: World
) -> None:
    """The put's activity run again with the call its run scheduled (a retry, a reset): the
    ledger answers it, the tool is not called, and it carries the one receipt there is."""
    d = deployed
    key = f"again-{uuid.uuid4().hex[:6]}.txt"
    handle = await d.h.start({"goal": "put", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "s3.put", "args": {"bucket": d.bucket, "key": key, "body": "one"}}]})
    rep = await ended(handle)
    assert rep.status == "succeeded", rep.failure
    before = await receipt_rows(pg, handle.id)
    call: ToolCall = await scheduled_call(d.h.client, handle.id, "s3.put")
    put = tool_activities(world, d.settings.catalogue, d.settings.policy)["s3.put"]
    again: ToolResult = await as_run(handle.id).run(put, call)
    assert again.ledger == "answered"
    assert await receipt_rows(pg, handle.id) == before and len(before) == 1
    assert again.receipt is not None and line(again.receipt) == before[call.idempotency_key]


async def test_a_receipt_that_cannot_be_written_fails_no_call(
    deployed: Deployment, pg: Any
) -> None:
    """``plangate.receipts`` refuses the run's row (a trigger): the run succeeds, its report
    carries its signed receipt as ever, and the ledger has its outcome."""
    d = deployed
    run_id = f"unkept-{uuid.uuid4().hex[:8]}"
    fn = f"refuse_{run_id.replace('-', '_')}"
    await pg.execute(
        f"CREATE FUNCTION plangate.{fn}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"IF NEW.run_id = '{run_id}' THEN RAISE EXCEPTION 'no receipts here'; END IF; "
        "RETURN NEW; END $$")
    await pg.execute(f"CREATE TRIGGER {fn} BEFORE INSERT ON plangate.receipts FOR EACH ROW "
                     f"EXECUTE FUNCTION plangate.{fn}()")
    try:
        handle = await d.h.start({"goal": "put", "budget": {"replans_max": 0}, "steps": [
            {"n": 1, "tool": "s3.put",
             "args": {"bucket": d.bucket, "key": f"{run_id}.txt", "body": "x"}}]},
            run_id=run_id)
        rep = await ended(handle)
    finally:
        await pg.execute(f"DROP TRIGGER {fn} ON plangate.receipts")
        await pg.execute(f"DROP FUNCTION plangate.{fn}()")
    assert rep.status == "succeeded", rep.failure
    assert await receipt_rows(pg, run_id) == {}
    (step,) = rep.steps
    assert step.ledger is not None and not step.ledger.owed and step.ledger.receipt is not None
    verify_receipt(line(step.ledger.receipt), KEY.public)
    assert [r["state"] for r in (await effect_rows(pg, run_id)).values()] == ["done"]


async def test_a_refused_effect_has_its_receipt_with_the_refusals_code(
    deployed: Deployment, pg: Any, s3: Any
) -> None:
    """S3 refuses the put (the object is there, the call said only if absent): the ledger row
    is failed, and so is the receipt, with the code the run's report names."""
    d = deployed
    key = f"taken-{uuid.uuid4().hex[:6]}.txt"
    s3.put_object(Bucket=d.bucket, Key=key, Body=b"first")
    rep = await d.h.run({"goal": "put once", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "s3.put",
         "args": {"bucket": d.bucket, "key": key, "body": "second", "if_none_match": "*"}}]})
    assert rep.failure is not None, rep.status
    (row,) = (await effect_rows(pg, rep.run_id)).values()
    stored = await receipt_rows(pg, rep.run_id)
    receipt = verify_receipt(stored[row["idempotency_key"]], KEY.public).receipt
    assert (receipt["outcome"]["state"], receipt["outcome"]["error"]) == (
        row["state"], rep.failure.code) == ("failed", rep.failure.code)
    assert receipt["outcome"]["result_sha256"] is None
    assert s3.get_object(Bucket=d.bucket, Key=key)["Body"].read() == b"first"


async def test_the_mcp_answer_carries_a_receipt_that_verifies(
    deployed: Deployment, stack: Any, pg: Any
) -> None:
    d = deployed
    env = server_env(stack, d.settings, d.h.settings.temporal.task_queue)
    args = {"bucket": d.bucket, "key": f"mcp-{uuid.uuid4().hex[:6]}.txt", "body": "via mcp"}
    async with http_server(env) as srv, srv.client() as mcp:
        res = await mcp.call_tool("s3_put", args)
    assert not res.is_error and res.structured_content is not None
    out = res.structured_content
    assert out["status"] == "succeeded", out
    receipt = out["receipt"]
    verified = verify_receipt(line(receipt), KEY.public)
    assert verified.receipt["call"]["run_id"] == out["run_id"]
    assert (await receipt_rows(pg, out["run_id"])) == {verified.effect: line(receipt)}


async def test_receipt_usage_errors_name_what_is_wrong(
    deployed: Deployment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """In-process (the CLI's process is tested above): each bad use, its line and exit."""
    for k, v in deployed.env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("PLANGATE_RECEIPT_KEY", raising=False)

    async def run(*args: str, stdin: str = "") -> tuple[int, str, str]:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        code = await asyncio.to_thread(main, ["receipt", *args])
        out = capsys.readouterr()
        return code, out.out, out.err

    code, _, err = await run(f"no-such-run-{uuid.uuid4().hex[:6]}")
    assert code == 1 and "no receipts of run no-such-run-" in err
    code, _, err = await run("verify", str(tmp_path / "x.jsonl"))
    assert code == 2 and "name the deployment's public receipt key with --public-key" in err
    code, _, err = await run("verify", "-", "--public-key", "erin:not-base64")
    assert code == 2 and "--public-key: the public key is not NAME:BASE64 nor base64" in err
    code, _, err = await run("verify", "-", "--public-key", KEY.public_entry(), stdin="\n")
    assert code == 1 and "holds no receipts" in err
    code, out, _ = await run("verify", "-", "--public-key", KEY.public_entry(),
                             stdin="{not json\n")
    assert code == 1 and out.startswith("line 1: FAILED: not JSON: "), out
    code, _, err = await run("verify")
    assert code == 2 and "receipt verify: name one FILE of receipts" in err
    code, _, err = await run("a-run", "--public-key", KEY.public_entry())
    assert code == 2 and "--public-key is for `receipt verify FILE`" in err
    # no --public-key: the public half of this process's PLANGATE_RECEIPT_KEY
    signed = line(sign(KEY, {"receipt": DOMAIN, "effect": "k", "call": {}, "outcome": {}}))
    monkeypatch.setenv("PLANGATE_RECEIPT_KEY", KEY.text())
    code, out, _ = await run("verify", "-", stdin=f"{signed}\n")
    assert code == 0 and out.startswith("line 1: verified: k: "), out


def test_a_reports_receipts_stop_at_their_budget() -> None:
    """Past 64 KiB of receipts a run's report keeps each step's ledger key, not its receipt
    (``plangate receipt RUN`` has every one)."""
    report = RunReport(run_id="r", goal="g")
    receipt = sign(KEY, {"receipt": DOMAIN, "pad": "x" * 1000})
    size = len(json.dumps(receipt, separators=(",", ":"), ensure_ascii=False).encode())
    steps = []
    for n in range(1, 100):
        rep = StepReport(n=n, tool="s3.put", plan_version=1, effect=Effect.WRITE,
                         timings=StepTimings(plan_made_at=datetime.now(UTC)))
        bookkeeping.record_ledger(rep, f"key-{n}", "recorded")
        bookkeeping.record_receipt(report, rep, receipt)
        steps.append(rep)
    kept = [s.n for s in steps if s.ledger is not None and s.ledger.receipt is not None]
    assert kept == list(range(1, RECEIPTS_BUDGET // size + 1)) and 30 < len(kept) < 99
    assert [s.ledger.key for s in steps if s.ledger] == [f"key-{n}" for n in range(1, 100)]
    assert report.metrics.receipt_bytes == len(kept) * size


async def test_a_teams_guarded_activity_gets_its_receipt(
    team_client: Client, settings: Settings, bucket: str, s3: Any, pg: Any
) -> None:
    """The plugin's guard at the call is the plan's (``run_guarded``): the team's archive, a
    write, has its effect row and one receipt that verifies, of the team's workflow."""
    s3.put_object(Bucket=bucket, Key="t.csv", Body=b"t")
    signing = replace(settings, policy=replace(settings.policy, receipt_key=KEY))
    queue, wf = f"team-rcpt-{uuid.uuid4().hex[:8]}", f"archive-{uuid.uuid4().hex[:8]}"
    async with Worker(team_client, task_queue=queue, workflows=[ArchiveWorkflow],
                      activities=ACTIVITIES, plugins=[plugin(signing)]):
        assert await team_client.execute_workflow(
            ArchiveWorkflow.run, args=[bucket, "t.csv"], id=wf, task_queue=queue,
            execution_timeout=timedelta(seconds=60)) == "archive/t.csv"
    (row,) = (await effect_rows(pg, wf)).values()
    stored = await receipt_rows(pg, wf)
    assert list(stored) == [row["idempotency_key"]]
    verified = verify_receipt(stored[row["idempotency_key"]], KEY.public)
    call = verified.receipt["call"]
    assert (call["tool"], call["run_id"], call["principal"], call["args_sha256"]) == (
        "archive_object", wf, row["principal"], row["args_sha256"]) == (
        "archive_object", wf, "support-agent", row["args_sha256"])
    assert verified.receipt["outcome"]["state"] == row["state"] == "done"
    assert [r["outcome"] for r in verified.receipt["before"]["results"]] == ["holds"]
