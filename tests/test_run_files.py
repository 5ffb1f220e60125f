"""A read writes nothing another run owns (issue 46): each run, and each read answered without a
run, has a directory of its own under the work directory, named from what Temporal says of the
call. A victim run downloads, waits for a person, then publishes its download; meanwhile an
attacker's read over the fast path (a standalone activity) and an attacker's run download other
bytes to the same ``dest`` text, and to the victim's absolute path: the victim publishes its
own bytes, and every download is ledgered as a local write under the run that made it. Real
Temporal, Postgres and S3."""

from __future__ import annotations

import hashlib
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client

from plangate.client.api import Plangate
from plangate.client.checked import check
from plangate.client.reading import read_call
from plangate.records.report import RunReport, StepReport
from plangate.testing import Harness, attempts, ended, running_worker
from plangate.world.ledger import LOCAL_WRITE
from plangate.world.settings import Settings

DEST = "work/2026-03-invoice.csv"
VICTIM, ATTACKER = b"id,amount\n1,612.40\n", b"id,amount\n1,999999.00\n"


def get(bucket: str, key: str, dest: str) -> dict[str, Any]:
    return {"n": 1, "tool": "s3.get", "effect": "read",
            "args": {"bucket": bucket, "key": key, "dest": dest}}


def victim_plan(bucket: str) -> dict[str, Any]:
    """Download, then publish the download once a person approves (the window an attacker
    had): the put reads the file this run's get wrote, and so does its post probe."""
    return {"goal": "publish the invoice", "budget": {"replans_max": 0}, "steps": [
        {**get(bucket, "victim.csv", DEST),
         "post": [{"probe": "local_file_nonempty", "path": DEST}]},
        {"n": 2, "tool": "s3.put", "effect": "write", "depends_on": [1],
         "approval": "required",
         "args": {"bucket": bucket, "key": "published.csv", "source": DEST}},
    ]}


def one_get(bucket: str, dest: str) -> dict[str, Any]:
    return {"goal": "read", "budget": {"replans_max": 0},
            "steps": [get(bucket, "attacker.csv", dest)]}


async def waiting_for_a_person(api: Plangate, run_id: str) -> RunReport:
    async for rep in api.poll(run_id, every_s=0.1):
        if any(a.status == "pending" for a in rep.approvals):
            return rep
    raise AssertionError(f"{run_id} ended without waiting for a person")


async def local_writes(pg: Any, run_id: str) -> list[tuple[str, str, dict[str, Any]]]:
    cur = await pg.execute(
        "SELECT tool, state, output FROM plangate.effects WHERE run_id = %s AND effect = %s",
        (run_id, LOCAL_WRITE))
    return list(await cur.fetchall())


def dest_of(step: StepReport) -> Path:
    """Where the step's download went, as its result says."""
    assert step.result is not None
    return Path(str(step.result["dest"]))


def content(path: Path) -> bytes | None:
    """What the file holds, None when there is none."""
    return path.read_bytes() if path.exists() else None


def gone(directory: Path) -> bool:
    return not directory.exists()


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def fast_read(h: Harness, client: Client, plan: dict[str, Any]) -> tuple[str, Any]:
    call_id = f"attack-{uuid.uuid4().hex[:8]}"
    got = await read_call(client, h.settings, check(plan, h.settings), call_id,
                          take_within=timedelta(seconds=30))
    return call_id, got


async def test_another_runs_and_a_fast_reads_downloads_never_reach_a_victims_file(
    client: Client, settings: Settings, s3: Any, pg: Any
) -> None:
    bucket = f"own-files-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="victim.csv", Body=VICTIM)
    s3.put_object(Bucket=bucket, Key="attacker.csv", Body=ATTACKER)
    workdir = settings.world.workdir.resolve()
    async with running_worker(client, settings) as h:
        api = Plangate(client, h.settings)
        handle = await h.start(victim_plan(bucket))
        waiting = await waiting_for_a_person(api, handle.id)
        mine = dest_of(waiting.step(1))
        assert content(mine) == VICTIM and mine.is_relative_to(workdir)
        assert mine.relative_to(workdir).parts[1:] == ("work", "2026-03-invoice.csv")

        # the same plan text, over the fast path (no workflow) and in a run of its own
        read_id, read = await fast_read(h, client, one_get(bucket, DEST))
        assert not read.run and read.report is not None, read.run
        theirs = dest_of(read.report.steps[0])
        other = await h.run(one_get(bucket, DEST))
        assert other.status == "succeeded", other.failure
        other_file = dest_of(other.step(1))
        assert len({mine, theirs, other_file}) == 3
        assert content(other_file) == ATTACKER
        assert content(theirs) is None and gone(theirs.parent.parent)  # removed, answered

        # the victim's absolute path (its history shows it), by the fast path and by a run
        _, aimed = await fast_read(h, client, one_get(bucket, str(mine)))
        assert aimed.report is None and aimed.run
        assert aimed.run.startswith(f"bad_arguments: s3.get: {str(mine)!r} is outside the "
                                    f"work directory {workdir}/read-"), aimed.run
        aimed_run = await h.run(one_get(bucket, str(mine)))
        assert aimed_run.failure is not None and aimed_run.failure.code == "bad_arguments"
        assert aimed_run.failure.detail.startswith(
            f"s3.get: {str(mine)!r} is outside the work directory {workdir}/run-")
        assert content(mine) == VICTIM

        (card,) = [a for a in waiting.approvals if a.status == "pending"]
        await api.approve(handle.id, card.step, card.digest)
        done = await ended(handle)

    assert done.status == "succeeded", done.failure
    published = s3.get_object(Bucket=bucket, Key="published.csv")["Body"].read()
    assert published == VICTIM
    assert content(mine) == VICTIM and content(other_file) == ATTACKER
    assert content(workdir / DEST) is None  # nobody wrote the plan's text at the shared root
    # every download a write of the effect ledger, under the run (or read) that made it
    for run_id, path, data in ((done.run_id, mine, VICTIM), (other.run_id, other_file, ATTACKER),
                               (read_id, theirs, ATTACKER)):
        [(tool, state, out)] = await local_writes(pg, run_id)
        assert (tool, state) == ("s3.get", "done")
        assert out == {"path": DEST, "size": len(data), "sha256": digest(data),
                       "stored": str(path)}
    assert await local_writes(pg, aimed_run.run_id) == []  # refused: nothing written
    assert (await attempts(client, aimed_run.run_id))["s3.get"] == [1]


async def test_a_dotdot_path_out_of_the_runs_directory_is_refused_naming_why(
    client: Client, settings: Settings, s3: Any, pg: Any
) -> None:
    """``..`` that stays in the work directory but leaves the run's own directory, bound at
    run time (``check`` cannot see it): refused, nothing read or written."""
    bucket = f"own-files-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="attacker.csv", Body=ATTACKER)
    workdir = settings.world.workdir.resolve()
    plan = {"goal": "climb", "budget": {"replans_max": 0}, "steps": [
        {**get(bucket, "attacker.csv", "a/x.csv"), "binds": {"where": "$.dest"}},
        {**get(bucket, "attacker.csv", "${where}/../../../run-0/x.csv"), "n": 2,
         "depends_on": [1]},
    ]}
    async with running_worker(client, settings) as h:
        rep = await h.run(plan)
    first = dest_of(rep.step(1))
    own = first.parent.parent
    assert rep.failure is not None and rep.failure.step == 2
    assert rep.failure.code == "bad_arguments"
    assert rep.failure.detail == (f"s3.get: '{first}/../../../run-0/x.csv' is outside the work "
                                  f"directory {own}")
    assert gone(workdir / "run-0")
    assert [o["path"] for _, _, o in await local_writes(pg, rep.run_id)] == ["a/x.csv"]
