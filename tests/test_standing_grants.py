"""Standing grants (issue 51): an approver's signed grant of a number of uses of one tool, for
one principal, within argument bounds, stands for the card of each call it covers.

- a grant of 5 uses of up to 50 EUR for one account: a 60 EUR credit waits for its card (no use
  taken); 8 credits of 40 EUR started at once: exactly 5 run without a card, 3 wait for cards;
  revoked, a grant covers no new call;
- a grant revoked after it covered a call and before the call: refused at the call
  (``grant_revoked``), nothing credited, the step halts;
- a forged grant (a key the deployment does not list, a signature that is not the terms')
  covers nothing;
- ``grant.cover`` started standalone (a stranger): refused before anything is read.

Real Temporal dev server and Postgres; credits counted in the billing table, cards in the runs'
reports, uses in ``plangate.grant_uses``."""

from __future__ import annotations

import asyncio
import re
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import JsonValue
from temporalio import activity
from temporalio.client import Client

from plangate.activities.catalogue import catalogue
from plangate.activities.effects import args_sha256
from plangate.activities.policing import call_request
from plangate.cli.commands import main
from plangate.cli.grants import state
from plangate.client.api import Plangate
from plangate.client.view import summary
from plangate.plans.model import Effect
from plangate.records import keys
from plangate.records.grants import Cover, CoverRequest, GrantSeen, GrantTerms, issue
from plangate.records.interface import GRANT_COVER_ACTIVITY
from plangate.records.policy import Outcome
from plangate.records.receipts import verify_receipt
from plangate.records.report import RunReport, RunStatus
from plangate.records.signing import SigningKey
from plangate.servers.page.server import serving
from plangate.testing import running_worker, scheduled
from plangate.worker.assembly import activities
from plangate.world import grants
from plangate.world.clients import World
from plangate.world.policies import load_bundle
from plangate.world.settings import Settings
from tests.attacker import standalone
from tests.conftest import APPROVER_KEYS
from tests.test_approval_page import request
from tests.test_mcp_guarded import account, credits
from tests.test_policy_runs import BASE, CREDIT, credit_plan, policies, with_policies

HOUR = timedelta(hours=1)
RECEIPTS = SigningKey.generate("grant-receipts")


def people(settings: Settings) -> Settings:
    """Money waits for a person (the default of a deployment)."""
    return replace(settings, policy=replace(settings.policy, approve_effects=(Effect.MONEY,)))


async def uses(pg: Any, grant_id: str) -> list[tuple[str, int]]:
    cur = await pg.execute("SELECT state, count(*) FROM plangate.grant_uses WHERE grant_id = %s "
                           "GROUP BY state ORDER BY state", (grant_id,))
    return [(s, int(n)) for s, n in await cur.fetchall()]


async def settled(api: Plangate, run_id: str) -> RunReport:
    """The run once it has ended or waits for a person (polled, bounded)."""
    for _ in range(1200):
        rep = await api.report(run_id)
        if rep.status.final or rep.status is RunStatus.AWAITING_APPROVAL:
            return rep
        await asyncio.sleep(0.05)
    raise AssertionError(f"{run_id} neither ended nor waited for a person")


async def cancel_all(api: Plangate, runs: list[str]) -> None:
    for r in runs:
        await api.cancel(r, reason="test over")
        await api.result(r)


async def test_a_grant_of_five_covers_five_of_eight_and_a_revoked_one_none(
    client: Client, settings: Settings, world: World, pg: Any, principal: str
) -> None:
    aid = await account(world)
    signing = replace(people(settings), policy=replace(people(settings).policy,
                                                       receipt_key=RECEIPTS))
    async with running_worker(client, signing) as h:
        api = Plangate(client, h.settings)
        grant = await api.issue_grant(CREDIT, principal, uses=5, expires_in=HOUR,
                                      equals={"account_id": aid},
                                      at_most={"amount_eur": "50"}, by="erin")
        gid = grant.grant_id
        # over the bound: its card, no use taken
        over = await api.start(credit_plan(aid, 60.0, principal))
        card = await api.wait_for_card(over)
        assert card.card.args["amount_eur"] == 60.0
        assert await uses(pg, gid) == []
        # 8 at once: 5 covered, 3 cards
        runs = await asyncio.gather(*(api.start(credit_plan(aid, 40.0, principal))
                                      for _ in range(8)))
        reports = [await settled(api, r) for r in runs]
        ran = [r for r in reports if r.status is RunStatus.SUCCEEDED]
        waiting = [r for r in reports if r.status is RunStatus.AWAITING_APPROVAL]
        assert (len(ran), len(waiting)) == (5, 3)
        assert all(r.approvals == [] and r.steps[0].grant is not None
                   and (r.steps[0].grant.id, r.steps[0].grant.approver) == (gid, "erin")
                   for r in ran)
        assert all(len(r.approvals) == 1 and r.steps[0].grant is None for r in waiting)
        assert summary(ran[0]).splitlines()[1:3] == [
            f"  v1 step 1 {CREDIT}: DONE",
            f"    no card: covered by standing grant {gid[:12]} of erin"]
        assert await credits(pg, aid) == 5
        assert await uses(pg, gid) == [("used", 5)]
        # the 5 ledger rows are the 5 uses' keys, the grant's approver on each
        cur = await pg.execute(
            "SELECT e.approver, e.card_digest, count(*) FROM plangate.effects e "
            "JOIN plangate.grant_uses u ON u.idempotency_key = e.idempotency_key "
            "WHERE u.grant_id = %s AND e.state = 'done' GROUP BY 1, 2", (gid,))
        assert await cur.fetchall() == [("erin", None, 5)]
        # each of the 5 receipts names the grant that admitted it (no card, no approver's proof)
        cur = await pg.execute(
            "SELECT r.receipt FROM plangate.receipts r JOIN plangate.grant_uses u "
            "ON u.idempotency_key = r.idempotency_key WHERE u.grant_id = %s", (gid,))
        signed = [verify_receipt(t, RECEIPTS.public).receipt["approval"]
                  for (t,) in await cur.fetchall()]
        assert len(signed) == 5 and all(
            a["card_digest"] is None and a["approvers"] == []
            and (a["grant"]["id"], a["grant"]["approver"], a["grant"]["uses"]) == (gid, "erin", 5)
            for a in signed), signed
        assert all(0 <= a["grant"]["used_before"] < 5 for a in signed)  # (the order: load's)
        # a new grant, revoked: a covered credit gets its card, no use taken
        fresh = await api.issue_grant(CREDIT, principal, uses=5, expires_in=HOUR,
                                      equals={"account_id": aid},
                                      at_most={"amount_eur": "50"}, by="erin")
        await api.revoke_grant(fresh.grant_id, by="frank")
        after = await api.start(credit_plan(aid, 40.0, principal))
        assert (await api.wait_for_card(after)).card.args["amount_eur"] == 40.0
        assert await uses(pg, fresh.grant_id) == []
        assert await credits(pg, aid) == 5
        listed = {g.grant.grant_id: g for g in await api.grants()}
        assert listed[gid].used == 5 and listed[gid].revoked_at is None
        assert listed[fresh.grant_id].revoked_by == "frank"
        now = datetime.now(UTC)  # as plangate grant list says them
        assert state(listed[gid], now) == "used up"
        assert state(listed[gid], now + 2 * HOUR) == "expired"
        assert state(listed[fresh.grant_id], now).startswith("revoked ")
        await cancel_all(api, [over, after, *(r.run_id for r in waiting)])
    assert await credits(pg, aid) == 5


async def test_a_grant_revoked_between_cover_and_call_is_refused_at_the_call(
    client: Client, settings: Settings, world: World, pg: Any, principal: str
) -> None:
    """The grant is revoked right after ``grant.cover`` reserved its use (the real activity,
    then the revocation): the call is refused ``grant_revoked``, nothing is credited, the step
    halts (a new run of the plan gets a card)."""
    aid = await account(world)
    s = people(settings)
    real = activities(world, s)[GRANT_COVER_ACTIVITY]
    revoked: list[str] = []

    @activity.defn(name=GRANT_COVER_ACTIVITY)
    async def cover_then_revoke(req: CoverRequest) -> Cover:
        got: Cover = await real(req)
        if got.grant_id is not None:
            await grants.revoke(world, got.grant_id, "test")
            revoked.append(got.grant_id)
        return got

    async with running_worker(client, s, {GRANT_COVER_ACTIVITY: cover_then_revoke}) as h:
        api = Plangate(client, h.settings)
        grant = await api.issue_grant(CREDIT, principal, uses=2, expires_in=HOUR,
                                      equals={"account_id": aid}, by="erin")
        run_id = await api.start(credit_plan(aid, 40.0, principal))
        rep = await settled(api, run_id)
    assert revoked == [grant.grant_id]
    assert rep.status is RunStatus.HALTED and rep.failure is not None
    assert rep.failure.code == "grant_revoked"
    assert rep.failure.detail.startswith(
        f"not called: grant {grant.grant_id[:12]} was revoked at ")
    assert rep.approvals == []
    assert await credits(pg, aid) == 0
    assert await uses(pg, grant.grant_id) == [("reserved", 1)]
    cur = await pg.execute("SELECT count(*) FROM plangate.effects WHERE run_id = %s", (run_id,))
    assert (await cur.fetchone())[0] == 0


def forged(aid: str, principal: str, key: SigningKey, approver: str) -> Any:
    now = datetime.now(UTC).replace(microsecond=0)
    return issue(key, GrantTerms(tool=CREDIT, principal=principal, equals={"account_id": aid},
                                 uses=5, issued_at=now, expires_at=now + HOUR,
                                 approver=approver))


async def test_a_forged_grant_covers_nothing(
    client: Client, settings: Settings, world: World, pg: Any, principal: str
) -> None:
    """Two grants in the table nobody listed signed: one by a key the deployment does not
    list (mallory), one under erin's name whose signature is mallory's. Each credit gets its
    card; neither grant gives a use."""
    aid = await account(world)
    mallory = SigningKey.generate("mallory")
    unlisted = forged(aid, principal, mallory, "mallory")
    as_erin = forged(aid, principal, SigningKey("erin", mallory.seed), "erin")
    for g in (unlisted, as_erin):
        assert await grants.store(world, g)
    async with running_worker(client, people(settings)) as h:
        api = Plangate(client, h.settings)
        run_id = await api.start(credit_plan(aid, 10.0, principal))
        card = await api.wait_for_card(run_id)
        assert card.card.args["account_id"] == aid
        await cancel_all(api, [run_id])
    assert await credits(pg, aid) == 0
    for g in (unlisted, as_erin):
        assert await uses(pg, g.grant_id) == []
    assert CREDIT not in await scheduled(client, run_id)


async def test_grant_cover_started_standalone_is_refused(
    client: Client, settings: Settings, world: World, pg: Any, principal: str
) -> None:
    """A stranger starts ``grant.cover`` with no workflow, naming a live grant's call: refused
    ``not_permitted`` (outside a workflow) by the door, no use reserved."""
    aid = await account(world)
    key = APPROVER_KEYS["erin"]
    now = datetime.now(UTC).replace(microsecond=0)
    grant = issue(key, GrantTerms(tool=CREDIT, principal=principal, uses=1, issued_at=now,
                                  expires_at=now + HOUR, approver="erin"))
    await grants.store(world, grant)
    req = CoverRequest(plan_version=1, step=1, tool=CREDIT,
                       args={"account_id": aid, "amount_eur": 1.0}, on_behalf_of=principal,
                       idempotency_key="x~0123456789abcdef/v1/1")
    async with running_worker(client, people(settings)) as h:
        got = await standalone(client, GRANT_COVER_ACTIVITY, [req],
                               queue=h.queue,
                               activity_id=f"stranger-{uuid.uuid4().hex[:8]}")
    assert got.refused("started outside a workflow"), got.said()
    assert await uses(pg, grant.grant_id) == []


FIRST_USES = ('@id("first-uses-only")\nforbid(principal, action == Plangate::Action::"money", '
              'resource) when { context has grant && context.grant.used >= 2 };\n')


def test_the_policies_see_the_grant_as_context_grant(settings: Settings, tmp_path: Path) -> None:
    """``context.grant``: absent without a grant (``has``), its uses taken before the call's
    otherwise; a policy that allows a grant's first two uses and forbids the rest."""
    s = with_policies(settings, policies(tmp_path, BASE, FIRST_USES))
    known = catalogue(s.catalogue)
    bundle = load_bundle(s.policy, s.world.scope, known)
    args: dict[str, JsonValue] = {"account_id": "acct_1", "amount_eur": 5.0}

    def decided(used: int | None) -> tuple[Outcome, tuple[str, ...]]:
        seen = None if used is None else GrantSeen(id="a" * 64, approver="erin", uses=5,
                                                   used=used)
        d = bundle.decide(call_request(CREDIT, known.tools[CREDIT], Effect.MONEY, args, "p",
                                       grant=seen))
        return d.outcome, d.policies

    assert decided(None) == (Outcome.PERMIT, ("base",))
    assert decided(1) == (Outcome.PERMIT, ("base",))
    assert decided(2) == (Outcome.FORBID, ("first-uses-only",))


async def grant_rows(pg: Any) -> int:
    return int((await (await pg.execute("SELECT count(*) FROM plangate.grants")).fetchone())[0])


@pytest.mark.parametrize(("argv", "said"), [
    (["--tool", "billing.nope", "--uses", "5", "--expires-in", "8h"],
     "grant issue: 'billing.nope' is not a tool of this deployment's catalogue"),
    (["--tool", CREDIT, "--arg", "account=acct_1", "--uses", "5", "--expires-in", "8h"],
     "grant issue: --arg account: billing.issue_credit takes no argument account (it takes "
     "account_id, amount_eur)"),
    (["--tool", CREDIT, "--at-most", "amount_eur=fifty", "--uses", "5", "--expires-in", "8h"],
     "grant issue: --at-most amount_eur=fifty: 'fifty' is not a number"),
    (["--tool", CREDIT, "--uses", "0", "--expires-in", "8h"],
     "grant issue: --uses 0: a grant has 1 to 10000 uses"),
    (["--tool", CREDIT, "--uses", "5", "--expires-in", "8 hours"],
     "grant issue: --expires-in '8 hours' is not a duration such as 30m, 8h or 7d"),
    (["--tool", CREDIT, "--uses", "5", "--expires-in", "91d"],
     "grant issue: --expires-in: a grant stands more than 0 s and at most 90 days"),
])
async def test_grant_issue_of_bad_terms_is_one_line_exit_2_nothing_written(
    stack: Any, settings: Settings, world: World, pg: Any, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str], argv: list[str], said: str,
) -> None:
    for k, v in stack.env().items():
        monkeypatch.setenv(k, v)
    before = await grant_rows(pg)
    full = ["grant", "issue", "--principal", "payer", *argv]
    assert await asyncio.to_thread(main, full) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"plangate: {said}"]
    assert await grant_rows(pg) == before


async def test_grant_issue_list_revoke_from_the_cli(
    stack: Any, settings: Settings, world: World, pg: Any, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for k, v in stack.env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("PLANGATE_APPROVER_KEY", APPROVER_KEYS["frank"].text())
    who = f"payer_{uuid.uuid4().hex[:6]}"
    assert await asyncio.to_thread(main, [
        "grant", "issue", "--tool", CREDIT, "--principal", who, "--arg", "account_id=acct_1",
        "--at-most", "amount_eur=50", "--uses", "5", "--expires-in", "8h"]) == 0
    out = capsys.readouterr().out.strip()
    gid = out.split()[2].rstrip(":")
    assert out == (f"plangate: grant {gid}: {CREDIT} for {who} where account_id=acct_1, "
                   f"amount_eur<=50: 5 uses until {out.split(' until ')[1]}")
    cur = await pg.execute("SELECT tool, principal, approver, uses, revoked_at FROM "
                           "plangate.grants WHERE grant_id = %s", (gid,))
    assert await cur.fetchone() == (CREDIT, who, "frank", 5, None)
    assert await asyncio.to_thread(main, ["grant", "list", "--live"]) == 0
    assert f"{gid}  0/5 used  live  {CREDIT} for {who}" in capsys.readouterr().out
    assert await asyncio.to_thread(main, ["grant", "revoke", gid, "--by", "frank"]) == 0
    assert capsys.readouterr().out.startswith(f"plangate: grant {gid} revoked at ")
    cur = await pg.execute("SELECT revoked_by FROM plangate.grants WHERE grant_id = %s "
                           "AND revoked_at IS NOT NULL", (gid,))
    assert await cur.fetchone() == ("frank",)
    assert await asyncio.to_thread(main, ["grant", "list", "--live"]) == 0
    assert gid not in capsys.readouterr().out
    assert await asyncio.to_thread(main, ["grant", "revoke", "f" * 64]) == 2
    assert capsys.readouterr().err.strip() == f"plangate: grant revoke: no grant {'f' * 64}"


async def test_the_page_lists_the_grants_and_revokes_one_by_its_form_only(
    client: Client, settings: Settings, world: World, pg: Any,
) -> None:
    """The approval page's grants: none shown nor revoked without a session; a revoke form
    without the session's CSRF token, or from another site, refused with nothing revoked; the
    page's own form revokes, recorded under the session's person."""
    key = APPROVER_KEYS["erin"]
    now = datetime.now(UTC).replace(microsecond=0)
    grant = issue(key, GrantTerms(tool=CREDIT, principal=f"p_{uuid.uuid4().hex[:6]}", uses=3,
                                  issued_at=now, expires_at=now + HOUR, approver="erin"))
    await grants.store(world, grant)
    gid = grant.grant_id

    async def revoked_by() -> Any:
        cur = await pg.execute("SELECT revoked_by FROM plangate.grants WHERE grant_id = %s",
                               (gid,))
        return (await cur.fetchone())[0]

    async def get(url: str, session: dict[str, str] | None = None) -> tuple[int, str]:
        status, _, body = await asyncio.to_thread(request, url, headers=session)
        return status, body

    async def post(url: str, form: dict[str, str], headers: dict[str, str] | None = None
                   ) -> tuple[int, str]:
        status, _, body = await asyncio.to_thread(request, url, "POST", form, headers)
        return status, body

    api = Plangate(client, settings)
    async with serving(api, [key], port=0) as url:
        status, body = await get(url + "grants")
        assert status == 401 and gid[:12] not in body and 'name="token"' in body
        assert (await post(url + "grants/revoke", {"grant_id": gid, "csrf": "x" * 43}))[0] == 401
        status, headers, _ = await asyncio.to_thread(request, url + "login", "POST",
                                                     {"token": key.login_token()})
        assert status == 303
        session = {"Cookie": "; ".join(c.split(";", 1)[0]
                                       for c in headers.get_all("Set-Cookie") or [])}
        status, body = await get(url + "grants", session)
        assert status == 200 and f'data-grant="{gid}"' in body
        assert f'<input type="hidden" name="grant_id" value="{gid}"><button>Revoke' in body
        found = re.search(r'name="csrf" value="([^"]+)"', body)
        assert found is not None
        csrf = found.group(1)
        form = {"grant_id": gid, "csrf": "x" * 43}
        status, body = await post(url + "grants/revoke", form, session)
        assert status == 403 and "CSRF token is not this session" in body
        status, _ = await post(url + "grants/revoke", {**form, "csrf": csrf},
                               {**session, "Origin": "http://evil.example"})
        assert status == 403
        assert await revoked_by() is None
        status, body = await post(url + "grants/revoke", {**form, "csrf": csrf}, session)
        assert status == 200 and f"grant {gid} revoked at " in body and "by erin" in body
        assert await revoked_by() == "erin"
        status, body = await get(url + "grants", session)
        assert "revoked <time" in body and "Revoke</button>" not in body.split(gid[:12])[1]
        status, body = await post(url + "grants/revoke", {"grant_id": "f" * 64, "csrf": csrf},
                                  session)
        assert status == 404 and f"no grant {'f' * 64}" in body


async def test_a_grant_never_covers_a_run_its_approver_submitted(
    settings: Settings, world: World, pg: Any
) -> None:
    """As a submitter never approves its own run: erin's grant covers no call of a run erin
    submitted, by name or under another name with erin's key; frank's run, one use."""
    erin = APPROVER_KEYS["erin"]
    now = datetime.now(UTC).replace(microsecond=0)
    principal = f"p_{uuid.uuid4().hex[:6]}"
    grant = issue(erin, GrantTerms(tool=CREDIT, principal=principal, uses=5, issued_at=now,
                                   expires_at=now + HOUR, approver="erin"))
    await grants.store(world, grant)
    info = catalogue(settings.catalogue).tools[CREDIT]
    args: dict[str, JsonValue] = {"account_id": "acct_1", "amount_eur": 5.0}

    def call(submitter: str, key: bytes) -> grants.Call:
        run = f"plan-{uuid.uuid4().hex[:8]}"
        return grants.Call(run, keys.idempotency_key(run, "0123456789abcdef", "v1/1"), CREDIT,
                           principal, args, args_sha256(args), info, submitter, key)

    approvers = settings.policy.approver_map
    for who in (call("erin", erin.public), call("erin-bot", erin.public)):
        with pytest.raises(grants.NotCovered) as refused:
            await grants.reserve(world, who, approvers)
        assert str(refused.value) == ("the grant's approver erin submitted this run: a "
                                      "submitter never approves its own run")
    assert await uses(pg, grant.grant_id) == []
    frank = APPROVER_KEYS["frank"]
    got, gid = await grants.reserve(world, call("frank", frank.public), approvers)
    assert (got, gid) == (grant, grant.grant_id)
    assert await uses(pg, gid) == [("reserved", 1)]
