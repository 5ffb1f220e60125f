"""M of N counts people by their keys, not their names (issue 46): a deployment that lists one
key under two names (``PLANGATE_APPROVERS=erin:K,erin-too:K``) and a policy asking two
distinct approvers. The second answer by that key is refused by the run, and a call handed
both proofs directly counts one approver: nothing is credited, no ledger row."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from plangate.activities.catalogue import catalogue
from plangate.activities.tool_activity import tool_activities
from plangate.client.api import AnswerRefused, Plangate
from plangate.records.approvals import ApprovalDecision
from plangate.records.proofs import ApprovalGrant, sign_answer
from plangate.records.signing import SigningKey, public_entries
from plangate.testing import running_worker, scheduled
from plangate.world.clients import World
from plangate.world.policies import load_bundle
from plangate.world.settings import APPROVERS_VAR, Settings
from tests.conftest import APPROVER_KEYS
from tests.grants import money_card, refused_with
from tests.test_mcp_guarded import account, credits
from tests.test_policy_runs import BASE, CREDIT, TWO, credit_plan, policies, with_policies


def twin_deployment(settings: Settings, tmp_path: Path) -> tuple[Settings, SigningKey]:
    """erin's key listed twice, as erin and as erin-too (frank too); the client holds both."""
    erin = APPROVER_KEYS["erin"]
    twin = SigningKey("erin-too", erin.seed)
    listed = ",".join(k.public_entry() for k in (erin, twin, APPROVER_KEYS["frank"]))
    s = with_policies(settings, policies(tmp_path, BASE, TWO))
    s = replace(s, policy=replace(s.policy, approvers=public_entries(listed, APPROVERS_VAR)),
                identity=replace(s.identity, approver_keys=(erin, twin)))
    return s, twin


async def ledger_rows(pg: Any, run_id: str) -> int:
    cur = await pg.execute("SELECT count(*) FROM plangate.effects WHERE run_id = %s", (run_id,))
    return int((await cur.fetchone())[0])


async def test_one_key_under_two_names_is_one_approver_of_a_run(
    client: Client, settings: Settings, world: World, pg: Any, tmp_path: Path
) -> None:
    twins, _ = twin_deployment(settings, tmp_path)
    aid = await account(world)
    async with running_worker(client, twins) as h:
        api = Plangate(client, h.settings)
        run_id = await api.start(credit_plan(aid, 20000.0))
        card = await api.wait_for_card(run_id)
        assert card.needed == 2
        await api.approve(run_id, card.step, card.digest, by="erin")
        with pytest.raises(AnswerRefused) as again:
            await api.approve(run_id, card.step, card.digest, by="erin-too")
        assert str(again.value) == (
            "erin-too's key approved the card of step 1 already (as erin): it waits for 2 "
            "distinct approvers' keys")
        rep = await api.report(run_id)
        assert rep.status.value == "awaiting_approval"
        assert [a.by for a in rep.approvals[0].approvals] == ["erin"]
        assert rep.approvals[0].answer is None
        await api.cancel(run_id, reason="test over")
        done = await api.result(run_id)
    assert done.status.value == "cancelled"
    assert CREDIT not in await scheduled(client, run_id)
    assert await credits(pg, aid) == 0
    assert await ledger_rows(pg, run_id) == 0


async def test_a_call_handed_two_proofs_of_one_key_counts_one_approver(
    settings: Settings, world: World, pg: Any, tmp_path: Path
) -> None:
    """The run's check bypassed: a workflow of anyone's hands the credit both proofs, each
    genuine. The activity counts keys: 1 of the 2 the policy asks."""
    twins, twin = twin_deployment(settings, tmp_path)
    bundle = load_bundle(twins.policy, twins.world.scope, catalogue(twins.catalogue))
    act = tool_activities(world, twins.catalogue, twins.policy)[CREDIT]
    aid = await account(world)
    card = money_card(CREDIT, {"account_id": aid, "amount_eur": 20000.0})
    run, now = card.run_id, card.issued_at

    def proof(k: SigningKey) -> Any:
        return sign_answer(k, run_id=run, step=1, digest=card.digest(),
                           decision=ApprovalDecision.APPROVE, reason="", now=now)

    grant = ApprovalGrant(card=card, digest=card.digest(), proof=proof(APPROVER_KEYS["erin"]),
                          others=[(proof(twin), "")])
    assert await refused_with(act, card, bundle.bundle, grant) == ("approval_missing", (
        "not called: the deployment's policy (base, two-over-10000) asks 2 distinct approvers "
        "of billing.issue_credit; 1 approved"))
    assert await credits(pg, aid) == 0
    assert await ledger_rows(pg, run) == 0
