"""plangate's runs index (``world.run_index``): the rows the workers write equal what Temporal
says of the same runs (status, the pending cards' digests); the card list and ``plangate runs``
read it; a row lost and a row late are found from Temporal and said so; ``plangate index
rebuild`` writes them again; approving a card read from the index goes through its run."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime
from typing import Any

import psycopg

from plangate.cli import main
from plangate.client import pending
from plangate.client.api import Plangate
from plangate.servers.page.views import Links, cards_page
from plangate.testing import running_worker
from plangate.world.clients import World
from tests.test_approvals import card_of, publish
from tests.test_report_ledger import job_plan


async def index_rows(url: str, queue: str) -> dict[str, tuple[str, frozenset[str]]]:
    async with await psycopg.AsyncConnection.connect(url) as c:
        cur = await c.execute("SELECT workflow_id, status, cards FROM plangate.runs_index "
                              "WHERE deployment = %s", (queue,))
        return {w: (s, frozenset(x["digest"] for x in cards))
                for w, s, cards in await cur.fetchall()}


async def temporal_view(api: Plangate, ids: list[str]) -> dict[str, tuple[str, frozenset[str]]]:
    """Each run's status and pending cards' digests, as the run itself reports them."""
    out = {}
    for run_id in ids:
        rep = await api.report(run_id)
        digests = frozenset(a.digest for a in rep.approvals if a.status == "pending")
        out[run_id] = (rep.status.value, digests)
    return out


async def until_counted(api: Plangate, queue: str, n: int) -> None:
    """Visibility counts ``n`` runs awaiting approval (it catches up within a moment)."""
    for _ in range(100):
        if (await api.client.count_workflows(pending.plan_runs_awaiting(queue))).count == n:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"visibility never counted {n} runs awaiting approval")


async def test_the_index_is_temporals_view_and_a_lost_or_late_row_is_found_and_said(
    client, settings, stack, s3, monkeypatch, capsys
):
    bucket = f"idx-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    async with running_worker(client, settings) as h:
        queue = h.settings.temporal.task_queue
        plain = Plangate(client, h.settings)
        world = World(h.settings.world)
        api = Plangate(client, h.settings, index=world)
        try:
            waiting = [(await h.start(publish(bucket, f"r{i}.txt"))).id for i in range(3)]
            cards = {r: await card_of(plain, r) for r in waiting}
            done = [(await h.run(job_plan(f"ok-{uuid.uuid4().hex[:6]}", "done"))).run_id,
                    (await h.run(job_plan(f"no-{uuid.uuid4().hex[:6]}", "failed"))).run_id]
            ids = waiting + done
            await until_counted(plain, queue, 3)
            # the rows equal what Temporal says of the same runs
            rows = await index_rows(stack.database_url, queue)
            assert rows == await temporal_view(plain, ids)
            assert {r: s for r, (s, _) in rows.items()} == {
                **dict.fromkeys(waiting, "awaiting_approval"), done[0]: "succeeded",
                done[1]: "failed"}
            # the card list and the runs from the index: what Temporal lists
            from_temporal = await plain.pending_approvals()
            got = await api.pending_approvals()
            assert (got.indexed, got.behind, got.note) == (3, 0, None)
            assert [(c.run_id, c.record) for c in got.cards] == [
                (c.run_id, c.record) for c in from_temporal.cards]
            assert {c.record.digest for c in got.cards} == {c.digest for c in cards.values()}
            listed = await api.runs_listing()
            assert (listed.indexed, listed.note) == (5, None)
            assert [(r.run_id, r.status) for r in listed.runs] == [
                (r.run_id, r.status) for r in await plain.runs()]
            # a row lost, another late (its card not written yet: the run shown running)
            lost, late = waiting[0], waiting[1]
            async with await psycopg.AsyncConnection.connect(stack.database_url) as c:
                await c.execute("DELETE FROM plangate.runs_index WHERE workflow_id = %s", (lost,))
                await c.execute("UPDATE plangate.runs_index SET status = 'running', "
                                "cards = '[]' WHERE workflow_id = %s", (late,))
            got = await api.pending_approvals()
            assert got.indexed == 0 and got.behind == 2
            assert got.note == ("the runs index shows 1 run awaiting approval, Temporal 3; "
                                "`plangate index rebuild` writes the index again from Temporal")
            assert {c.run_id for c in got.cards} == set(waiting)  # every card still
            page = cards_page(got, queue, "c" * 43, datetime.now(UTC), "erin", Links())
            assert (f"{got.note}: every run read from Temporal&#x27;s visibility (2 the index "
                    "had wrong)") in page
            listed = await api.runs_listing()
            assert listed.indexed == 0 and listed.note is not None
            assert listed.note.startswith("the runs index holds 4 runs, Temporal 5;")
            assert {r.run_id for r in listed.runs} == set(ids)
            # what the CLI prints
            for k, v in {**stack.env(), "PLANGATE_TASK_QUEUE": queue}.items():
                monkeypatch.setenv(k, v)
            assert await asyncio.to_thread(main, ["runs", "--json"]) == 0
            out = capsys.readouterr()
            assert {r["run_id"] for r in json.loads(out.out)} == set(ids)
            assert out.err == ("plangate: the runs index holds 4 runs, Temporal 5; `plangate "
                               "index rebuild` writes the index again from Temporal: every run "
                               "listed from Temporal's visibility\n")
            # rebuilt from Temporal: the rows equal its view again, and read
            assert await asyncio.to_thread(main, ["index", "rebuild"]) == 0
            out = capsys.readouterr()
            assert out.out == (f"plangate: the runs index of {queue}: 5 runs written from "
                               "Temporal, 0 rows of runs it no longer lists deleted\n")
            assert await index_rows(stack.database_url, queue) == await temporal_view(plain, ids)
            got = await api.pending_approvals()
            assert (got.indexed, got.behind, got.note) == (3, 0, None)
            assert await asyncio.to_thread(main, ["runs"]) == 0
            out = capsys.readouterr()
            assert out.err == "" and len(out.out.splitlines()) == 5
            # a card read from the index is answered through its run
            card = next(c for c in got.cards if c.run_id == lost)
            await api.approve(lost, card.record.step, card.record.digest, by="erin")
            assert (await plain.result(lost)).status == "succeeded"
            assert (await index_rows(stack.database_url, queue))[lost] == ("succeeded",
                                                                           frozenset())
        finally:
            for r in waiting[1:]:
                c = cards[r]
                await plain.reject(r, c.step, c.digest, by="erin", reason="test over")
            await world.close()


async def test_the_rows_order_keeps_a_late_write_from_overwriting_a_newer(stack: Any) -> None:
    """A write owed while Postgres was away, paid after a newer one, changes nothing."""
    from plangate.activities.bootstrap import SCHEMA
    from plangate.records.report import RunStatus
    from plangate.records.run_index import IndexRow
    from plangate.world import run_index
    from plangate.world.settings import WorldSettings

    async with await psycopg.AsyncConnection.connect(stack.database_url) as c:
        await c.execute(SCHEMA)  # (as a worker creates it)
    world = World(WorldSettings(database_url=stack.database_url))
    try:
        run, at = f"order-{uuid.uuid4().hex[:8]}", datetime.now(UTC)
        newer = IndexRow(status=RunStatus.SUCCEEDED, goal="g", cards=[], started_at=at, seq=20)
        older = newer.model_copy(update={"status": RunStatus.RUNNING, "seq": 5})
        assert await run_index.record(world, run, "e1", "q-order", newer)
        assert not await run_index.record(world, run, "e1", "q-order", older)
        assert (await run_index.listed(world, "q-order", None, 10))[0].status == "succeeded"
    finally:
        await world.close()
