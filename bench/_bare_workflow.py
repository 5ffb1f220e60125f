"""The workflows a team would write by hand instead of plangate, samples-python style: one
``execute_activity`` a step, dataclass inputs, the activities named by string. ``BareChain``:
each step the same Postgres write as plangate's ``set_job_state``, no reads. ``ByHandChain``:
each step that write with the guard a careful team writes around it by hand, in the one
activity (``bench._by_hand``: the pre read, the intent row, the write, the outcome row, the
post read); the workflow judges the post read, as plangate's workflow judges its post
condition. Their own module, so the workflow sandbox imports nothing but Temporal and this."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ApplicationError

SET_JOB = "bare.set_job"
GUARDED_SET_JOB = "bare.set_job_by_hand"


@dataclass(frozen=True)
class JobWrite:
    job_id: str
    state: str
    owner: str


@dataclass(frozen=True)
class Chain:
    jobs: list[str]
    owner: str


@dataclass(frozen=True)
class GuardedWrite:
    """One step's write and what its guard reads: ``table``.``column`` must exist before it
    (the pre condition); the job must read ``state`` after it (the post condition)."""

    key: str  # the idempotency key: the ledger row's
    step: int
    job_id: str
    state: str
    owner: str
    table: str
    column: str


@dataclass(frozen=True)
class GuardedChain:
    jobs: list[str]
    owner: str
    table: str
    column: str


@workflow.defn(name="BareChain")
class BareChain:
    @workflow.run
    async def run(self, chain: Chain) -> int:
        for job in chain.jobs:
            await workflow.execute_activity(
                SET_JOB, JobWrite(job, "done", chain.owner),
                start_to_close_timeout=timedelta(seconds=30),
            )
        return len(chain.jobs)


@workflow.defn(name="ByHandChain")
class ByHandChain:
    @workflow.run
    async def run(self, chain: GuardedChain) -> int:
        wf = workflow.info().workflow_id
        for n, job in enumerate(chain.jobs, start=1):
            after = await workflow.execute_activity(
                GUARDED_SET_JOB,
                GuardedWrite(f"{wf}/{n}", n, job, "done", chain.owner, chain.table,
                             chain.column),
                result_type=str, start_to_close_timeout=timedelta(seconds=30),
            )
            if after != "done":
                raise ApplicationError(f"step {n}: job {job} reads {after!r} after the write, "
                                       "not 'done'", non_retryable=True)
        return len(chain.jobs)
