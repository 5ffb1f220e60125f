"""The card list (``Plangate.pending_approvals``, what the approval page shows) in one
visibility query: each run keeps the cards it waits on in its memo (``workflows.showing``,
``records.cards``), so no run is asked for its report; a memo the run did not write is not taken
on its word."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from temporalio.client import Client, Interceptor, OutboundInterceptor, QueryWorkflowInput

from plangate.client import pending
from plangate.client.api import Plangate
from plangate.records import visibility
from plangate.records.approvals import CardStatus
from plangate.records.cards import CARDS_MEMO, CardsMemo, trusted
from plangate.records.run import RunInput
from plangate.testing import ended, running_worker
from plangate.workflows.plan_run import PlanRunWorkflow
from tests.test_approvals import card_of, publish


class CountQueries(Interceptor):
    def __init__(self) -> None:
        self.queries = 0

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        counter = self

        class Counting(OutboundInterceptor):
            async def query_workflow(self, input: QueryWorkflowInput) -> Any:
                counter.queries += 1
                return await super().query_workflow(input)

        return Counting(next)


def counting(client: Client) -> tuple[Client, CountQueries]:
    count = CountQueries()
    config = client.config()
    config["interceptors"] = [*config["interceptors"], count]
    return Client(**config), count


@pytest.fixture
def bucket(s3: Any) -> str:
    name = f"cards-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=name)
    return name


async def test_the_card_list_reads_the_cards_from_memos_not_reports(client, settings, bucket,
                                                                     monkeypatch):
    async with running_worker(client, settings) as h:
        api = Plangate(client, h.settings)
        handles = [await h.start(publish(bucket, f"r{i}.txt")) for i in range(3)]
        cards = {hd.id: await card_of(api, hd.id) for hd in handles}
        quiet, count = counting(client)
        listed = await Plangate(quiet, h.settings).pending_approvals()
        # every card, as its run's report holds it, and no run asked
        assert {(c.run_id, c.record.digest) for c in listed.cards} == {
            (r, a.digest) for r, a in cards.items()}
        assert [c.record for c in listed.cards if c.run_id == handles[0].id] == [
            cards[handles[0].id]]
        assert count.queries == 0 and listed.asked == 0
        assert listed.runs == 3 and not listed.truncated and not listed.unanswered
        assert {c.goal for c in listed.cards} == {"publish the report"}
        # over listing pages of one run each: every card still, in the same order
        queue = h.settings.temporal.task_queue
        paged = await pending.pending_approvals(quiet, queue, True, page_size=1)
        assert [(c.run_id, c.record) for c in paged.cards] == [
            (c.run_id, c.record) for c in listed.cards]
        assert paged.runs == 3 and not paged.truncated and count.queries == 0
        # more runs than a listing reads: the first only, and said so
        monkeypatch.setattr(pending, "PENDING_LIST_MAX", 2)
        cut = await pending.pending_approvals(quiet, queue, True, page_size=1)
        assert cut.truncated and cut.runs == 2 and len({c.run_id for c in cut.cards}) == 2
        monkeypatch.undo()
        # answered: its card leaves the memo and the list
        first = cards[handles[0].id]
        await api.approve(handles[0].id, first.step, first.digest, by="erin")
        assert (await ended(handles[0])).status == "succeeded"
        listed = await Plangate(quiet, h.settings).pending_approvals()
        assert {c.run_id for c in listed.cards} == {hd.id for hd in handles[1:]}
        assert count.queries == 0
        for hd in handles[1:]:
            c = cards[hd.id]
            await api.reject(hd.id, c.step, c.digest, by="erin", reason="test over")
            await ended(hd)


async def test_a_memo_the_run_did_not_write_is_not_shown(client, settings, bucket):
    """A workflow started by hand with a memo of cards and the attribute that says it awaits
    approval: its memo names no execution of its own, so the run itself is asked (no worker
    polls its queue here: it does not answer) and none of its cards is shown."""
    async with running_worker(client, settings) as h:
        api = Plangate(client, h.settings)
        real = await h.start(publish(bucket, "real.txt"))
        card = await card_of(api, real.id)
    # the worker is gone: nothing polls the queue the forged run is started on
    forged_card = card.card.model_copy(update={"args": {**card.card.args, "body": "harmless"}})
    forged = card.model_copy(update={"card": forged_card})
    memo = CardsMemo(execution="whatever", goal="tidy up", cards=[forged])
    run_id = f"forged-{uuid.uuid4().hex[:8]}"
    handle = await client.start_workflow(
        PlanRunWorkflow.run, RunInput(plan=publish(bucket, "x.txt")), id=run_id,
        task_queue=h.queue, memo={CARDS_MEMO: memo},
        search_attributes=visibility_pairs(), execution_timeout=timedelta(minutes=5),
    )
    try:
        listed = await api.pending_approvals()
        assert run_id not in {c.run_id for c in listed.cards}
        assert "harmless" not in str([c.record.card.args for c in listed.cards])
        assert run_id in listed.unanswered and listed.asked >= 1
    finally:
        await handle.terminate("test over")
        await real.terminate("test over")


def visibility_pairs() -> Any:
    from temporalio.common import SearchAttributePair, TypedSearchAttributes

    return TypedSearchAttributes([SearchAttributePair(visibility.AWAITING_APPROVAL, True)])


def test_trusted_takes_only_what_this_execution_wrote_as_its_digest_says(settings):
    from datetime import UTC, datetime

    from plangate.plans.model import Effect
    from plangate.records.approvals import ApprovalCard, ApprovalRecord

    now = datetime.now(UTC)
    card = ApprovalCard(run_id="run-1", plan_version=1, step=2, tool="s3.put",
                        effect=Effect.WRITE, args={"body": "x"}, issued_at=now,
                        expires_at=now + timedelta(hours=1))
    rec = ApprovalRecord(step=2, plan_version=1, digest=card.digest(),
                         expires_at=card.expires_at, card=card)
    memo = CardsMemo(execution="exec-1", goal="g", cards=[rec])
    assert trusted(memo, "run-1", "exec-1") == [rec]
    assert trusted(memo, "run-1", "exec-2") is None  # another execution's (or a starter's)
    assert trusted(memo, "run-2", "exec-1") is None  # another run's card
    shown = rec.model_copy(update={"card": card.model_copy(update={"args": {"body": "y"}})})
    assert trusted(replace_cards(memo, shown), "run-1", "exec-1") is None  # not its digest
    later = rec.model_copy(update={"expires_at": rec.expires_at + timedelta(days=1)})
    assert trusted(replace_cards(memo, later), "run-1", "exec-1") is None
    other = rec.model_copy(update={"step": 3})
    assert trusted(replace_cards(memo, other), "run-1", "exec-1") is None
    done = rec.model_copy(update={"status": CardStatus.APPROVED})
    assert trusted(replace_cards(memo, done), "run-1", "exec-1") is None
    assert trusted(replace_cards(memo), "run-1", "exec-1") == []


def replace_cards(memo: CardsMemo, *cards: Any) -> CardsMemo:
    return memo.model_copy(update={"cards": list(cards)})
