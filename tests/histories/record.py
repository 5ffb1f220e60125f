"""Records workflow histories for the replay test: one per path a plan run can take. Run by hand
to add a path (a new one, or a patch's new branch); never to make a failing replay pass
(docs/versioning.md). Every history was recorded again once on each baseline before the first
release (the last: baseline-39, issue 39):

    .venv/bin/python -m tests.histories.record            # the paths not recorded yet
    .venv/bin/python -m tests.histories.record NAME ...   # these, again

A run that continued as new is recorded run by run (``NAME_run1``, ``NAME_run2``, ...), a
re-plan's child as ``NAME_replanN``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import boto3
import psycopg
from temporalio import activity

from bench._stack import Bench, bench_stack
from plangate.activities.tool_activity import as_application_error, tool_activities
from plangate.client.api import AnswerRefused, Plangate
from plangate.demo.replay import BUCKET, KEY, invoice_csv, saturday_plan
from plangate.demo.scenarios import closeout_plan
from plangate.demo.schema import seed_acct_3319f
from plangate.plans.load import parse_plan
from plangate.records.calls import ToolCall, ToolResult
from plangate.records.interface import GUARD_ACTIVITY, WINDOWS_ACTIVITY
from plangate.records.options import TOOL_ATTEMPTS
from plangate.records.proofs import Submitter
from plangate.records.report import RunReport
from plangate.records.run import GuardRequest, Resolved, RunInput
from plangate.records.signing import SigningKey
from plangate.records.windows import WindowsRow
from plangate.testing import Harness, ended, running_worker
from plangate.worker.assembly import activities
from plangate.workflows.plan_run import PlanRunWorkflow
from plangate.world.errors import ToolError
from tests.crash_harness import LostPut, put_plan
from tests.harness import MovedBeforeCall

HERE = Path(__file__).parent
Scenario = Callable[[Bench], Awaitable[RunReport]]


def job_step(n: int, job: str, state: str = "done", **extra: Any) -> dict[str, Any]:
    return {"n": n, "tool": "warehouse.run_sql",
            "args": {"statement": "set_job_state", "params": {"job_id": job, "state": state}},
            "post": [{"probe": "job_state", "job_id": job, "want": "done"}], **extra}


async def until(b: Bench, run_id: str, ready: Callable[[RunReport], bool]) -> RunReport:
    for _ in range(600):
        rep = await b.client.get_workflow_handle(run_id).query(PlanRunWorkflow.report)
        if ready(rep):
            return rep
        await asyncio.sleep(0.1)
    raise SystemExit(f"{run_id} never got where the scenario needs it")


async def set_job(b: Bench, job: str, state: str) -> None:
    async with await psycopg.AsyncConnection.connect(b.database_url, autocommit=True) as c:
        await c.execute("UPDATE plangate.jobs SET state = %s WHERE job_id = %s", (state, job))


def bucket(b: Bench) -> str:
    name = f"rec-{uuid.uuid4().hex[:8]}"
    boto3.client("s3", endpoint_url=b.settings.world.s3_endpoint_url).create_bucket(Bucket=name)
    return name


async def saturday_succeeded(b: Bench) -> RunReport:
    s3 = boto3.client("s3", endpoint_url=b.settings.world.s3_endpoint_url)
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key=KEY, Body=invoice_csv(700))
    return await b.run(saturday_plan("staging.rec_ok"))


async def saturday_export_deleted(b: Bench) -> RunReport:  # failed: the rest of the plan void
    s3 = boto3.client("s3", endpoint_url=b.settings.world.s3_endpoint_url)
    s3.create_bucket(Bucket=BUCKET)
    s3.delete_object(Bucket=BUCKET, Key=KEY)
    # no re-plan: the path is the failure itself (the demo's plan re-plans, then halts, since
    # 7ecf827)
    plan = saturday_plan("staging.rec_gone")
    return await b.run({**plan, "budget": {**plan["budget"], "replans_max": 0}})


async def closeout_replanned(b: Bench) -> RunReport:
    """The close-out re-planned; its re-planned money and external steps wait for fresh cards,
    each approved."""
    await seed_acct_3319f(b.world)
    return await b.run_approving(closeout_plan(), by="bench")


async def refused_unsigned(b: Bench) -> RunReport:
    """A deployment that lists its submitters, given a raw start with no submission: the run
    halts before any step."""
    agent = SigningKey.generate("agent")
    submitters = (Submitter(agent.name, agent.public, ("dana",)),)
    listed = replace(b.settings, policy=replace(b.settings.policy, submitters=submitters))
    async with running_worker(b.client, listed) as h:
        plan = parse_plan(publish(bucket(b)))
        rep: RunReport = await ended(await h.client.start_workflow(
            PlanRunWorkflow.run, RunInput(plan=plan),
            id=f"unsigned-{uuid.uuid4().hex[:8]}", task_queue=h.queue,
        ))
        return rep


async def halted(b: Bench) -> RunReport:
    job = f"halt-{uuid.uuid4().hex[:6]}"
    return await b.run({"goal": "halt", "budget": {"replans_max": 2}, "steps": [
        job_step(1, job, pre=[{"probe": "job_state", "job_id": job, "want": "requested"}],
                 on_unmet="halt"),
    ]})


async def halted_after_wait(b: Bench) -> RunReport:
    """A wait read on its schedule (timers with summaries) runs out, the step halts, and the
    execution fails with the report in its failure's details."""
    job = f"hw-{uuid.uuid4().hex[:6]}"
    api = Plangate(b.client, b.settings)
    handle = await api.submit({"goal": "wait, then halt", "budget": {"replans_max": 2},
                               "steps": [
        job_step(1, job, "requested", on_unmet="halt",
                 post=[{"probe": "job_state", "job_id": job, "want": "done",
                        "wait": {"timeout_s": 2, "interval_s": 1}}]),
    ]})
    return await api.result(handle.id)


async def waited(b: Bench) -> RunReport:
    job = f"wait-{uuid.uuid4().hex[:6]}"
    handle = await b.start({"goal": "wait", "budget": {"replans_max": 0}, "steps": [
        job_step(1, job, "requested",
                 post=[{"probe": "job_state", "job_id": job, "want": "done",
                        "wait": {"timeout_s": 60, "interval_s": 1}}]),
        {"n": 2, "tool": "warehouse.run_sql", "depends_on": [1],
         "args": {"statement": "select_one"}},
    ]})
    await until(b, handle.id, lambda r: sum(c.reads for c in r.step(1).checks) >= 3)
    await set_job(b, job, "done")
    return await ended(handle)


def publish(name: str) -> dict[str, Any]:
    return {"goal": "publish", "budget": {"replans_max": 0}, "on_behalf_of": "dana", "steps": [
        {"n": 1, "tool": "s3.put", "approval": "required",
         "args": {"bucket": name, "key": "figures.txt", "body": "final figures"}},
    ]}


async def answered(b: Bench, approve: bool) -> RunReport:
    api = Plangate(b.client, b.settings)
    handle = await api.submit(publish(bucket(b)))
    rep = await until(b, handle.id, lambda r: bool(r.approvals))
    card = rep.approvals[0]
    if approve:
        await api.approve(handle.id, 1, card.digest, by="bench")
    else:
        await api.reject(handle.id, 1, card.digest, reason="not today", by="bench")
    return await ended(handle)


async def approved(b: Bench) -> RunReport:
    return await answered(b, approve=True)


async def rejected(b: Bench) -> RunReport:
    return await answered(b, approve=False)


async def approved_current_approvers(b: Bench) -> RunReport:
    """An answer recorded only by an approver the worker lists now: the worker restarts
    without ``fuzz`` among its approvers while the card waits; fuzz's approval, accepted by the
    validator, is refused where it would be recorded (the worker asked), then bench's is
    recorded (asked again)."""
    async with running_worker(b.client, b.settings) as first:
        api = Plangate(b.client, first.settings)
        handle = await api.submit(publish(bucket(b)))
        card = (await until(b, handle.id, lambda r: bool(r.approvals))).approvals[0]
    policy = b.settings.policy
    listed = tuple(a for a in policy.approvers if a[0] != "fuzz")
    revoked = replace(b.settings, policy=replace(policy, approvers=listed))
    async with running_worker(b.client, revoked, queue=first.settings.temporal.task_queue):
        try:
            await api.approve(handle.id, 1, card.digest, by="fuzz")
        except AnswerRefused as e:
            print(f"refused: {e}")
        else:
            raise SystemExit("a revoked approver's answer was taken")
        await api.approve(handle.id, 1, card.digest, by="bench")
        return await ended(handle)


async def cancelled(b: Bench) -> RunReport:
    job = f"cancel-{uuid.uuid4().hex[:6]}"
    api = Plangate(b.client, b.settings)
    handle = await api.submit({"goal": "cancel", "budget": {"replans_max": 0}, "steps": [
        job_step(1, job, "requested",
                 post=[{"probe": "job_state", "job_id": job, "want": "done",
                        "wait": {"timeout_s": 600, "interval_s": 1}}]),
    ]})
    await until(b, handle.id, lambda r: r.step(1).state == "WAITING")
    await api.cancel(handle.id, reason="not needed any more", requester="erin")
    return await ended(handle)


async def continued_as_new(b: Bench) -> RunReport:
    """A wait read every second beside a card: both parked, the chain continues as new twice or
    more (a bound of 300 events), the card is approved in a later run."""
    job = f"can-{uuid.uuid4().hex[:6]}"
    h = Harness(b.client, replace(b.settings, runs=replace(b.settings.runs, history_events=300)))
    api = Plangate(h.client, h.settings)
    handle = await api.submit({"goal": "long", "budget": {"replans_max": 0}, "steps": [
        job_step(1, job, "requested",
                 post=[{"probe": "job_state", "job_id": job, "want": "done",
                        "wait": {"timeout_s": 600, "interval_s": 1}}]),
        {"n": 2, "tool": "s3.put", "approval": "required",
         "args": {"bucket": bucket(b), "key": "figures.txt", "body": "final figures"}},
        {"n": 3, "tool": "warehouse.run_sql", "depends_on": [1, 2],
         "args": {"statement": "select_one"}},
    ]})
    rep = await until(b, handle.id, lambda r: r.segments >= 2)
    await api.approve(handle.id, 2, rep.approvals[0].digest, by="bench")
    await until(b, handle.id, lambda r: r.segments >= 3)
    await set_job(b, job, "done")
    return await ended(handle)


async def lost_write_retried(b: Bench) -> RunReport:
    """An ``s3.put`` whose every attempt lost its answer after the write landed: tried again,
    the world read first, skipped as done."""
    tool = LostPut(b.world, lands=True)
    async with running_worker(b.client, b.settings, {"s3.put": tool.run}) as h:
        return await h.run(put_plan(bucket(b), "out/report.txt"))


class Away:
    """The first ``first`` calls fail with ``fail()`` (their system away); the rest are the real
    activity's."""

    def __init__(self, real: Callable[..., Awaitable[Any]], first: int,
                 fail: Callable[[], Any]) -> None:
        self.real, self.first, self.fail, self.calls = real, first, fail, 0

    async def __call__(self, arg: Any) -> Any:
        self.calls += 1
        if self.calls <= self.first:
            return self.fail()
        return await self.real(arg)


def _unreachable() -> Any:
    raise as_application_error(ToolError(
        "system_unavailable", "the effect ledger: the intent was not recorded: reset"))


async def windows_kept(b: Bench) -> RunReport:
    """Issue 47: the run's windows row fails (a bug of its own): the run ends as its steps
    went, on the ``plangate-windows-kept`` branch."""

    @activity.defn(name=WINDOWS_ACTIVITY)
    async def broken(row: WindowsRow) -> None:
        raise RuntimeError("a bug in the bookkeeping")

    async with running_worker(b.client, b.settings, {WINDOWS_ACTIVITY: broken}) as h:
        return await h.run(put_plan(bucket(b), "out/kept.txt"))


async def tool_outage_waited(b: Bench) -> RunReport:
    """Issue 47: ``s3.put``'s first call sends nothing, three attempts, its effect ledger
    away: the step waits for it (``plangate-tool-outage-waits``), then writes once."""
    away = Away(tool_activities(b.world, b.settings.catalogue, b.settings.policy)["s3.put"],
                TOOL_ATTEMPTS, _unreachable)

    @activity.defn(name="s3.put")
    async def put(call: ToolCall) -> ToolResult:
        result: ToolResult = await away(call)
        return result

    async with running_worker(b.client, b.settings, {"s3.put": put}) as h:
        return await h.run(put_plan(bucket(b), "out/waited.txt"))


async def guards_waited(b: Bench) -> RunReport:
    """Issue 47: the guards cannot record the run's submission at first (Postgres away): they
    are asked again after a wait (``plangate-guards-wait``), and the run goes on."""
    away = Away(activities(b.world, b.settings)[GUARD_ACTIVITY], 1, lambda: Resolved(
        guards={}, refusal="the submission could not be recorded: Postgres did not answer",
        refusal_code="system_unavailable"))

    @activity.defn(name=GUARD_ACTIVITY)
    async def resolve(req: GuardRequest) -> Resolved:
        resolved: Resolved = await away(req)
        return resolved

    async with running_worker(b.client, b.settings, {GUARD_ACTIVITY: resolve}) as h:
        return await h.run(put_plan(bucket(b), "out/guarded.txt"))


async def bound_decided(b: Bench) -> RunReport:
    """Issue 48: a credit whose amount step 1 binds, over the policies' people threshold: the
    step is decided again once bound (``guard.decide``, ``plangate-bound-decided``), waits for
    its card, is approved and credits once."""
    import tempfile
    from decimal import Decimal

    from plangate.demo.schema import Account, seed_account

    directory = Path(tempfile.mkdtemp(prefix="policies-"))
    (directory / "base.cedar").write_text('@id("base")\npermit(principal, action, resource);\n')
    (directory / "person.cedar").write_text(
        '@id("person-over-100") @approvers("1")\n'
        'permit(principal, action == Plangate::Action::"money", resource)\n'
        'when { context.amount_cents > 10000 };\n')
    strict = replace(b.settings, policy=replace(b.settings.policy, policies=directory))
    aid = f"acct_{uuid.uuid4().hex[:8]}"
    await seed_account(b.world, Account(aid, f"ar@{aid}.example", status="closed",
                                        invoices=((f"inv_{aid}", Decimal("612.40"), "open"),)))
    plan = {"goal": f"credit {aid} what it is owed", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "billing.list_invoices", "args": {"account_id": aid},
         "binds": {"owed": "$.amount_eur"}},
        {"n": 2, "tool": "billing.issue_credit", "depends_on": [1],
         "args": {"account_id": aid, "amount_eur": "${owed}"}}]}
    async with running_worker(b.client, strict) as h:
        api = Plangate(b.client, h.settings)
        handle = await api.submit(plan)
        card = (await until(b, handle.id, lambda r: bool(r.approvals))).approvals[0]
        await api.approve(handle.id, card.step, card.digest, by="bench")
        return await ended(handle)


async def granted(b: Bench) -> RunReport:
    """Issue 51: a credit that waits for a person (money), covered by a standing grant of
    bench's: ``grant.cover`` reserves a use (``plangate-standing-grants``), no card is
    published, the call consumes the use and credits once."""
    from datetime import timedelta

    from psycopg import sql

    from plangate.demo.schema import Account, seed_account
    from plangate.plans.model import Effect

    people = replace(b.settings, policy=replace(b.settings.policy,
                                                approve_effects=(Effect.MONEY,)))
    aid = f"acct_{uuid.uuid4().hex[:8]}"
    await seed_account(b.world, Account(aid, f"ar@{aid}.example", status="closed"))
    role = f"payer_{uuid.uuid4().hex[:8]}"
    async with await psycopg.AsyncConnection.connect(b.database_url, autocommit=True) as c:
        r = sql.Identifier(role)
        await c.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(r))
        for grant in ("GRANT USAGE ON SCHEMA demo TO {}",
                      "GRANT SELECT, UPDATE ON demo.customers TO {}",
                      "GRANT SELECT, INSERT ON demo.credits TO {}",
                      "GRANT USAGE ON ALL SEQUENCES IN SCHEMA demo TO {}"):
            await c.execute(sql.SQL(grant).format(r))
    plan = {"goal": f"credit {aid}", "on_behalf_of": role, "budget": {"replans_max": 0},
            "steps": [{"n": 1, "tool": "billing.issue_credit",
                       "args": {"account_id": aid, "amount_eur": 20.0}}]}
    async with running_worker(b.client, people) as h:
        api = Plangate(b.client, h.settings)
        await api.issue_grant("billing.issue_credit", role, uses=1, by="bench",
                              expires_in=timedelta(hours=1), equals={"account_id": aid},
                              at_most={"amount_eur": "50"})
        return await h.run(plan)


async def voided_at_failure(b: Bench) -> RunReport:
    """Step 1 fails; step 2, after it, is VOID at once, so step 3, which waits for step 2 to
    establish its pre condition, stops waiting."""
    owed = f"owed-{uuid.uuid4().hex[:6]}"
    return await b.run({"goal": "void at failure", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "warehouse.run_sql", "args": {"statement": "select_one"},
         "pre": [{"probe": "job_state", "job_id": f"none-{owed}", "want": "done"}]},
        job_step(2, owed, depends_on=[1]),  # its post condition: step 3's pre condition
        {"n": 3, "tool": "warehouse.run_sql", "args": {"statement": "select_one"},
         "pre": [{"probe": "job_state", "job_id": owed, "want": "done"}]},
    ]})


def gated_step(n: int, job: str, gate: str, **extra: Any) -> dict[str, Any]:
    return job_step(n, job, pre=[{"probe": "job_state", "job_id": gate, "want": "open"}],
                    **extra)


async def open_gate(b: Bench) -> str:
    gate = f"gate-{uuid.uuid4().hex[:6]}"
    async with await psycopg.AsyncConnection.connect(b.database_url, autocommit=True) as c:
        await c.execute("INSERT INTO plangate.jobs (job_id, state) VALUES (%s, 'open')", (gate,))
    return gate


async def reads_in_call(b: Bench) -> RunReport:
    """A chain of three guarded steps: one local read (with the guards), then every read made
    in the tools' activities, at and after each call."""
    gate, tag = await open_gate(b), uuid.uuid4().hex[:6]
    return await b.run({"goal": "reads in call", "budget": {"replans_max": 0}, "steps": [
        gated_step(n, f"chain-{tag}-{n}", gate, depends_on=[n - 1] if n > 1 else [])
        for n in (1, 2, 3)
    ]})


async def refused_at_call(b: Bench) -> RunReport:
    """The gate closes after the workflow's read and before the call: the tool's activity
    refuses it (412 ``precondition_failed``), the workflow reads again and the run fails."""
    gate = await open_gate(b)
    real = tool_activities(b.world, b.settings.catalogue, b.settings.policy)["warehouse.run_sql"]
    moved = MovedBeforeCall(real, lambda: set_job(b, gate, "closed"))
    async with running_worker(b.client, b.settings, {"warehouse.run_sql": moved.run}) as h:
        return await h.run({"goal": "refused at call", "budget": {"replans_max": 0},
                            "steps": [gated_step(1, f"refused-{gate}", gate)]})


async def pre_failed_at_call(b: Bench) -> RunReport:
    """Step 2's gate, closed from the start, is first read at its call (the read after step 1
    held only its skip check): refused there, read again, failed as a pre check, no 412."""
    gate, tag = await open_gate(b), uuid.uuid4().hex[:6]
    await set_job(b, gate, "closed")
    return await b.run({"goal": "pre failed at call", "budget": {"replans_max": 0}, "steps": [
        job_step(1, f"first-{tag}"), gated_step(2, f"second-{tag}", gate, depends_on=[1]),
    ]})


SCENARIOS: dict[str, Scenario] = {
    "saturday_succeeded": saturday_succeeded,
    "saturday_export_deleted": saturday_export_deleted,
    "closeout_replanned": closeout_replanned,
    # the same after issue 46: the re-plan child's start sealed by its parent and verified
    # (the ``plangate-child-seal`` patch marker in the child's history)
    "closeout_replanned_sealed": closeout_replanned,
    "halted": halted,
    "halted_after_wait": halted_after_wait,
    "waited": waited,
    # the card issued after a timer and kept in the run's memo while it waits, then taken out;
    # the calls' windows put there as it ends
    "approved": approved,
    # an answer recorded only by an approver the worker lists now
    "approved_current_approvers": approved_current_approvers,
    "rejected": rejected,
    "cancelled": cancelled,
    "continued_as_new": continued_as_new,
    "lost_write_retried": lost_write_retried,
    "voided_at_failure": voided_at_failure,
    "reads_in_call": reads_in_call,
    "refused_at_call": refused_at_call,
    "pre_failed_at_call": pre_failed_at_call,
    "refused_unsigned": refused_unsigned,
    # issue 47: bookkeeping and outages that fail no run (each a patch's new branch)
    "windows_kept": windows_kept,
    "tool_outage_waited": tool_outage_waited,
    "guards_waited": guards_waited,
    "bound_decided": bound_decided,
    # issue 50: the run's row in the runs index written as it begins, as its card is published
    # and answered, and as it ends (``index.record`` markers, the ``plangate-runs-index`` patch)
    "runs_indexed": approved,
    # issue 51: a credit covered by a standing grant (``grant.cover``, the
    # ``plangate-standing-grants`` patch): no card
    "granted": granted,
}


async def run_ids(b: Bench, workflow_id: str) -> list[str]:
    """The runs of a workflow's continue-as-new chain, first to last."""
    ids: list[str] = []
    execution: str | None = (await b.client.get_workflow_handle(workflow_id).describe()).run_id
    while execution:
        ids.append(execution)
        handle = b.client.get_workflow_handle(workflow_id, run_id=execution)
        first = await anext(aiter(handle.fetch_history_events()))
        execution = first.workflow_execution_started_event_attributes.continued_execution_run_id
    return ids[::-1]


async def save(b: Bench, name: str, rep: RunReport) -> None:
    runs = await run_ids(b, rep.run_id)
    for i, run_id in enumerate(runs, start=1):
        history = await b.client.get_workflow_handle(rep.run_id, run_id=run_id).fetch_history()
        write(name + (f"_run{i}" if len(runs) > 1 else ""), rep.run_id, history.to_json(),
              rep.status)
    for r in rep.replans:
        wid = f"{rep.run_id}/replan-{r.attempt}"
        history = await b.client.get_workflow_handle(wid).fetch_history()
        write(f"{name}_replan{r.attempt}", wid, history.to_json(), rep.status)


def write(name: str, workflow_id: str, history: str, status: str) -> None:
    record = {"workflow_id": workflow_id, "history": json.loads(history)}
    (HERE / f"{name}.json").write_text(json.dumps(record))
    print(f"recorded {name} ({status})")


async def main(names: list[str]) -> None:
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise SystemExit(f"no such scenario: {', '.join(unknown)} (known: {', '.join(SCENARIOS)})")
    if not names:
        recorded = {p.stem for p in HERE.glob("*.json")}
        names = [n for n in SCENARIOS if not any(r.startswith(n) for r in recorded)]
    async with bench_stack(replanner="playbook") as b:
        for name in names:
            await save(b, name, await SCENARIOS[name](b))


if __name__ == "__main__":
    os.chdir(HERE.parent.parent)
    asyncio.run(main(sys.argv[1:]))
