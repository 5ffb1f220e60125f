"""The team workflows ``bench.temporal_guard`` runs, as a Temporal team writes them: one
``execute_activity`` a call, the activities named by string, nothing of plangate's. Their own
module, so the workflow sandbox imports nothing but Temporal and this."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow

STAMP = "stamp_object"  # writes a small S3 object (the guard table names it)
# the same write with its guard written by hand in the activity (``bench._by_hand``)
STAMP_BY_HAND = "stamp_object_by_hand"
COUNT = "count_rows"  # answers its argument (no guard table names it)


@dataclass(frozen=True)
class Stamp:
    bucket: str
    source: str  # an object that must exist before the call (the pre condition)
    key: str  # the object the call writes (the post condition)


@workflow.defn(name="TeamStamp")
class StampWorkflow:
    @workflow.run
    async def run(self, stamps: list[Stamp]) -> int:
        for s in stamps:
            await workflow.execute_activity(
                STAMP, s, start_to_close_timeout=timedelta(seconds=30))
        return len(stamps)


@workflow.defn(name="TeamStampByHand")
class StampByHandWorkflow:
    @workflow.run
    async def run(self, stamps: list[Stamp]) -> int:
        for s in stamps:
            await workflow.execute_activity(
                STAMP_BY_HAND, s, start_to_close_timeout=timedelta(seconds=30))
        return len(stamps)


@workflow.defn(name="TeamCount")
class CountWorkflow:
    @workflow.run
    async def run(self, calls: int) -> int:
        total = 0
        for i in range(calls):
            total += await workflow.execute_activity(
                COUNT, i, result_type=int, start_to_close_timeout=timedelta(seconds=30))
        return total
