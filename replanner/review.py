"""The review of a re-planned plan, as an activity: checked exactly as ``plangate check --strict``
checks a plan (paths against this worker's work directory, lint warnings as errors), then held to
its mandate (``replanner.mandate``). Nothing of a plan with a problem is ever dispatched."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel, Field
from temporalio import activity

from plangate.checking import lint, problems
from plans.model import Plan
from records.replan import ReplanRequest
from replanner.mandate import mandate_problems
from world.settings import Settings

ACTIVITY_NAME = "replanner.review"


class ReviewRequest(BaseModel):
    plan: Plan
    request: ReplanRequest


class Review(BaseModel):
    problems: list[str] = Field(default_factory=list)


def review(plan: Plan, req: ReplanRequest, settings: Settings) -> list[str]:
    found = problems(plan, settings.workdir, bound=set(req.bound), scope=settings.scope)
    if found:
        return found
    return [f"(strict) {w}" for w in lint(plan)] + mandate_problems(plan, req)


class ReviewActivities:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @activity.defn(name=ACTIVITY_NAME)
    async def review(self, req: ReviewRequest) -> Review:
        # path checks resolve symlinks on disk: off the event loop
        found = await asyncio.to_thread(review, req.plan, req.request, self.settings)
        return Review(problems=found)
