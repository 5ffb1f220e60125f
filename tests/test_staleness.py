"""The staleness report (``plangate.client.staleness``): E = W x R x V per tool, by numbers a person
can check by hand, over reports built to order; then over real runs (a queued night run, an
approval that waited while another writer moved the object) through ``plangate report``."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio import activity

from plangate.activities.tool_activity import tool_activities
from plangate.cli import main
from plangate.client.api import Plangate
from plangate.client.staleness import Finished, per_tool
from plangate.demo.schema import Account, seed_account
from plangate.plans.model import Effect
from plangate.records.approvals import (
    Answered,
    ApprovalCard,
    ApprovalDecision,
    ApprovalRecord,
    CardStatus,
)
from plangate.records.calls import ToolCall, ToolResult
from plangate.records.report import Refusal, RunReport, StepReport, StepTimings
from plangate.testing import running_worker
from tests.test_approvals import card_of

T0 = datetime(2026, 11, 2, 18, 0, tzinfo=UTC)  # a Monday, 18:00: the plans are written
H = timedelta(hours=1)


def step(n: int, tool: str, effect: Effect, made: datetime, checked: datetime, used: datetime,
         refusals: tuple[tuple[int, str], ...] = ()) -> StepReport:
    return StepReport(
        n=n, tool=tool, plan_version=1, effect=effect,
        timings=StepTimings(plan_made_at=made, precheck_read_at=checked, tool_started_at=used),
        refusals=[Refusal(status=s, code=c) for s, c in refusals],
    )


def card(n: int, issued: datetime, answered: datetime, status: CardStatus) -> ApprovalRecord:
    c = ApprovalCard(run_id="r", plan_version=1, step=n, tool="customer.update",
                     effect=Effect.WRITE, args={}, issued_at=issued, expires_at=issued + 24 * H)
    return ApprovalRecord(step=n, plan_version=1, digest="0" * 64, expires_at=c.expires_at,
                          card=c, status=status,
                          answer=Answered(decision=ApprovalDecision.APPROVE, at=answered))


def run(steps: list[StepReport], submitted: datetime, begun: datetime,
        approvals: list[ApprovalRecord] | None = None) -> Finished:
    rep = RunReport(run_id="r", goal="g", steps=steps, approvals=approvals or [])
    return Finished.of(rep, submitted, begun)


MS = timedelta(milliseconds=1)


def seeded() -> list[Finished]:
    """customer.update: four calls, plan-to-use 0.25 h, 0.25 h, 0.25 h and 2.5 h; one refused
    with 409 (the record moved), one whose approved card was superseded: 2 changes seen in
    3.25 h of exposure. billing.issue_credit (money): two calls queued overnight, 8 h each,
    no change seen. customer.restore: one call refused by a superseded policy (412: not a
    change of the record)."""
    quick = [run([step(1, "customer.update", Effect.WRITE, T0, T0 + 0.25 * H - 5 * MS,
                       T0 + 0.25 * H, refusals=((409, "conflict"),) if i == 0 else ())],
                 T0, T0) for i in range(3)]
    # the approval that waited: the card issued at 0.5 h, answered at 2.25 h, superseded
    # (the world moved), the call at 2.5 h
    waited = run([step(1, "customer.update", Effect.WRITE, T0, T0 + 2.5 * H - 5 * MS,
                       T0 + 2.5 * H)], T0, T0,
                 [card(1, T0 + 0.5 * H, T0 + 2.25 * H, CardStatus.SUPERSEDED)])
    # the queued night run: written at 18:00, submitted at 18:30, queued until 02:00
    night = run([step(1, "billing.issue_credit", Effect.MONEY, T0, T0 + 8 * H - 2 * MS,
                      T0 + 8 * H),
                 step(2, "billing.issue_credit", Effect.MONEY, T0, T0 + 8 * H - 2 * MS,
                      T0 + 8 * H)], T0 + 0.5 * H, T0 + 7.5 * H)
    policy = run([step(1, "customer.restore", Effect.WRITE, T0, T0 + 0.1 * H, T0 + 0.1 * H,
                       refusals=((412, "policy_superseded"),))], T0, T0)
    return [*quick, waited, night, policy]


def test_e_is_w_times_r_times_v_by_hand():
    tools = {t.tool: t for t in per_tool(seeded())}
    upd = tools["customer.update"]
    assert upd.volume == 4
    assert upd.plan_to_use_h == pytest.approx((0.25, 2.5))  # nearest rank of 4: 2nd and 4th
    assert upd.changes == 2 and upd.exposure_h == pytest.approx(3.25)
    assert upd.rate_per_h == pytest.approx(2 / 3.25)
    # E(p50) = 0.25 h x 2/3.25 /h x 4 = 0.615; E(p95) = 2.5 h x 2/3.25 /h x 4 = 6.15
    assert upd.e_plan == pytest.approx((0.25 * 2 / 3.25 * 4, 2.5 * 2 / 3.25 * 4))
    # the guarded window, 5 ms: E(p95) = 5 ms in hours x 2/3.25 x 4
    assert upd.check_to_use_h[1] == pytest.approx(0.005 / 3600)
    assert upd.e_check[1] == pytest.approx(0.005 / 3600 * 2 / 3.25 * 4)
    assert upd.refusals == {409: 1} and not upd.irreversible
    assert upd.approval_wait_h == pytest.approx((1.75, 1.75))
    credit = tools["billing.issue_credit"]
    assert credit.irreversible and credit.volume == 2 and credit.changes == 0
    assert credit.e_plan == (0.0, 0.0) and credit.rate_upper95_per_h == pytest.approx(3 / 16)
    # where the night run's 8 h went: 0.5 h planning, 7 h in the queue, 0.5 h running
    assert credit.segments_mean_h == pytest.approx(
        {"planning": 0.5, "queue": 7.0, "approval": 0.0, "run": 0.5 - 2 * MS / H,
         "check_to_use": 2 * MS / H})
    assert sum(credit.segments_mean_h.values()) == pytest.approx(8.0)
    restore = tools["customer.restore"]
    assert restore.refusals == {412: 1} and restore.changes == 0  # a policy, not the record
    # a call with no pre check: nothing shortened its window
    no_check = step(1, "customer.update", Effect.WRITE, T0, T0, T0 + H)
    no_check.timings.precheck_read_at = None
    unchecked = run([no_check], T0, T0)
    [lone] = per_tool([unchecked])
    assert lone.check_to_use_h == pytest.approx((1.0, 1.0)) == lone.plan_to_use_h
    # ranked by E at p95, the money tool flagged whatever its rank
    assert [t.tool for t in per_tool(seeded())] == [
        "customer.update", "billing.issue_credit", "customer.restore"]


def test_no_runs_no_tools():
    assert per_tool([]) == []


def publish(bucket: str, key: str, made_at: datetime, approval: bool) -> dict[str, Any]:
    return {"goal": "publish the figures", "budget": {"replans_max": 0},
            "made_at": made_at.isoformat(), "steps": [
                {"n": 1, "tool": "s3.put", **({"approval": "required"} if approval else {}),
                 "args": {"bucket": bucket, "key": key, "body": "final figures"}}]}


async def report_json(env: dict[str, str], runs: int, monkeypatch: Any, capsys: Any) -> Any:
    """``plangate report --json`` once visibility lists ``runs`` finished runs (it catches up
    with a run's close within a moment)."""
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    for _ in range(100):
        code = await asyncio.to_thread(main, ["report", "--since", "1h", "--json"])
        assert code == 0
        out = json.loads(capsys.readouterr().out)
        if out["runs"] >= runs:
            return out
        await asyncio.sleep(0.1)
    raise AssertionError(f"visibility never listed {runs} runs")


async def approve_after_a_move(api: Plangate, s3: Any, bucket: str, run_id: str) -> None:
    """Approve the card of ``figures.txt``'s step after another writer moved the object: the
    step meets a new card (the world moved), approved as well."""
    first = await card_of(api, run_id)
    s3.put_object(Bucket=bucket, Key="figures.txt", Body=b"v2 by someone else")
    await api.approve(run_id, 1, first.digest, by="erin")
    second = await card_of(api, run_id, index=1)  # the world moved: a new card
    await api.approve(run_id, 1, second.digest, by="erin")


async def test_the_report_over_a_night_run_and_an_approval_that_waited(
    client, settings, stack, s3, monkeypatch, capsys
):
    bucket = f"stale-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="figures.txt", Body=b"v1")
    written = datetime.now(UTC) - 8 * H  # both plans were written eight hours ago
    async with running_worker(client, settings) as h:
        api = Plangate(client, h.settings)
        night = await api.submit(publish(bucket, "night.txt", written, approval=False),
                                 start_in=timedelta(seconds=2))
        handle = await api.submit(publish(bucket, "figures.txt", written, approval=True))
        await approve_after_a_move(api, s3, bucket, handle.id)
        reps = [await night.result(), await handle.result()]
        env = {**stack.env(), "PLANGATE_TASK_QUEUE": h.settings.temporal.task_queue}
        out = await report_json(env, 2, monkeypatch, capsys)
    assert [r.status for r in reps] == ["succeeded", "succeeded"]
    assert [a.status for a in reps[1].approvals] == ["superseded", "approved"]
    assert out["runs"] == 2
    [put] = out["tools"]
    # by hand: two calls, each used about 8 h after its plan was written; one change seen
    # (the superseded card) in about 16 h of exposure: R = 1/16 per hour, and
    # E(p50) = 8 h x 1/16 /h x 2 calls = 1 stale execution expected, unguarded
    assert put["tool"] == "s3.put" and put["V"] == 2 and put["changes"] == 1
    assert put["exposure_h"] == pytest.approx(16, rel=1e-3)
    assert put["R_per_h"] == pytest.approx(1 / 16, rel=1e-3)
    assert put["W_plan_to_use_h"]["p50"] == pytest.approx(8, rel=1e-3)
    assert put["E_plan_to_use"]["p50"] == pytest.approx(1.0, rel=1e-3)
    # guarded: the window is milliseconds, so E is about a million times smaller
    assert put["E_check_to_use"]["p95"] < 1e-4
    segments = put["segments_mean_h"]
    assert 0 < segments["queue"] * 3600 < 10  # the night run's 2 s queue, over two calls
    assert segments["approval"] > 0  # the waited card's time
    assert sum(segments.values()) == pytest.approx(put["exposure_h"] / 2, rel=1e-6)
    assert (put["409"], put["412"], put["403"]) == (0, 0, 0)


def moved_first(tool: str, real: Any, move: Any) -> Any:
    """The real activity of ``tool``, with another writer changing its target first (after the
    workflow's read, before the call): ``move`` runs, then the real activity."""

    @activity.defn(name=tool)
    async def run(call: ToolCall) -> ToolResult:
        await move()
        result: ToolResult = await real(call)
        return result

    return run


async def test_refused_and_failed_calls_are_counted_with_their_answers(
    client, settings, stack, s3, world, monkeypatch, capsys
):
    """Real calls of four tools: ``customer.update`` refused 409 (the record moved before the
    call), ``s3.put`` refused 412 (the object replaced before the call), ``warehouse.load``
    failed (fewer rows than required), ``s3.get`` done. ``plangate report`` counts every one:
    each tool's V is its calls in the effect ledger, the 409 and the 412 counted, each a change
    seen. Before, it counted the calls that ran alone: no row for the two refused tools."""
    tag = uuid.uuid4().hex[:8]
    aid, bucket = f"acct_st{tag}", f"stale-{tag}"
    await seed_account(world, Account(aid, f"ar@{aid}.example", status="active"))
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="figures.txt", Body=b"v1")
    s3.put_object(Bucket=bucket, Key="small.csv", Body=b"a,b\n1,2\n")

    async def bump() -> None:
        async with (await world.pool()).connection() as conn:
            await conn.execute("UPDATE demo.customers SET version = version + 1 "
                               "WHERE account_id = %s", (aid,))

    async def replace_object() -> None:
        await asyncio.to_thread(s3.put_object, Bucket=bucket, Key="figures.txt",
                                Body=b"v2 by someone else")

    real = tool_activities(world, settings.catalogue, settings.policy)
    doubles = {"customer.update": moved_first("customer.update", real["customer.update"], bump),
               "s3.put": moved_first("s3.put", real["s3.put"], replace_object)}
    halt = {"budget": {"replans_max": 0}}
    plans = [
        {"goal": "close the account", **halt, "steps": [
            {"n": 1, "tool": "customer.update", "on_unmet": "halt",
             "args": {"account_id": aid, "status": "closed"}}]},
        {"goal": "replace the figures", **halt, "steps": [
            {"n": 1, "tool": "s3.put", "on_unmet": "halt",
             "args": {"bucket": bucket, "key": "figures.txt", "body": "v2 by us"}}]},
        {"goal": "load the figures", **halt, "steps": [
            {"n": 1, "tool": "s3.get",
             "args": {"bucket": bucket, "key": "small.csv", "dest": f"{tag}.csv"}},
            {"n": 2, "tool": "warehouse.load", "depends_on": [1], "on_unmet": "halt",
             "args": {"target": f"staging.t_{tag}", "source": f"{tag}.csv", "min_rows": 1000}}]},
    ]
    async with running_worker(client, settings, doubles) as h:
        reps = [await h.run(p) for p in plans]
        env = {**stack.env(), "PLANGATE_TASK_QUEUE": h.settings.temporal.task_queue}
        out = await report_json(env, 3, monkeypatch, capsys)
    assert [[x.status for x in r.step(1).refusals] for r in reps[:2]] == [[409], [412]]
    assert reps[2].step(2).state != "DONE" and reps[2].failure is not None
    assert reps[2].failure.code == "too_few_rows", reps[2].failure
    async with (await world.pool()).connection() as conn:
        cur = await conn.execute(
            "SELECT tool, sum(attempts) FROM plangate.effects WHERE run_id = ANY(%s) "
            "AND effect <> 'local_write' GROUP BY tool", ([r.run_id for r in reps],))
        ledger = {tool: int(n) for tool, n in await cur.fetchall()}
    tools = {t["tool"]: t for t in out["tools"]}
    assert set(tools) == {"customer.update", "s3.put", "warehouse.load", "s3.get"}, tools
    assert ledger == {"customer.update": 1, "s3.put": 1, "warehouse.load": 1}
    for tool, calls in ledger.items():
        assert tools[tool]["V"] == calls, (tool, tools[tool])
    assert tools["s3.get"]["V"] == 1
    assert (tools["customer.update"]["409"], tools["customer.update"]["changes"]) == (1, 1)
    assert (tools["s3.put"]["412"], tools["s3.put"]["changes"]) == (1, 1)
    assert (tools["warehouse.load"]["409"], tools["warehouse.load"]["412"]) == (0, 0)
    assert tools["warehouse.load"]["changes"] == 0
