"""The review of a re-planned plan, as an activity: checked exactly as ``plangate check --strict``
checks a plan (paths against this worker's work directory, lint warnings as errors), held to
its mandate (``replanner.mandate``), and handed back with its guards from this worker's
catalogue. Nothing of a plan with a problem is ever dispatched."""

from __future__ import annotations

import asyncio

from temporalio import activity

from plangate.activities.catalogue import catalogue, guarded, plan_problems
from plangate.records.replan import Review, ReviewRequest
from plangate.replanner.mandate import mandate_problems
from plangate.world.settings import CatalogueSettings, PolicySettings, WorldSettings

ACTIVITY_NAME = "replanner.review"


def review(
    req: ReviewRequest, cat: CatalogueSettings, world: WorldSettings, policy: PolicySettings
) -> Review:
    found = plan_problems(req.plan, cat, world, bound=set(req.request.bound), strict=True)
    if not found:
        found = mandate_problems(req.plan, req.request, catalogue(cat))
    if found:
        return Review(problems=found)
    return Review(plan=guarded(req.plan, cat, policy, replanned=True))


class ReviewActivities:
    def __init__(
        self, cat: CatalogueSettings, world: WorldSettings, policy: PolicySettings
    ) -> None:
        self.cat, self.world, self.policy = cat, world, policy

    @activity.defn(name=ACTIVITY_NAME)
    async def review(self, req: ReviewRequest) -> Review:
        # path checks resolve symlinks on disk: off the event loop
        return await asyncio.to_thread(review, req, self.cat, self.world, self.policy)
