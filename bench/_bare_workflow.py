"""The workflow a team would write by hand instead of plangate, samples-python style: one
``execute_activity`` a step, each the same Postgres write as plangate's ``set_job_state``, no
reads. Its own module, so the workflow sandbox imports nothing but Temporal and this."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow

SET_JOB = "bare.set_job"


@dataclass(frozen=True)
class JobWrite:
    job_id: str
    state: str
    owner: str


@dataclass(frozen=True)
class Chain:
    jobs: list[str]
    owner: str


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
