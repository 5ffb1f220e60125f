"""The review of a re-planned plan, as an activity: checked exactly as ``plangate check --strict``
checks a plan (paths against this worker's work directory, lint warnings as errors), held to
its mandate (``replanner.mandate``), and handed back with its guards from this worker's
catalogue. Nothing of a plan with a problem is ever dispatched."""

from __future__ import annotations

import asyncio

from temporalio import activity

from plangate.activities.catalogue import catalogue, guarded, plan_problems
from plangate.activities.guarding import decided
from plangate.activities.policing import PolicyBook
from plangate.records.interface import REVIEW_ACTIVITY
from plangate.records.replan import Review, ReviewRequest
from plangate.replanner.mandate import mandate_problems
from plangate.world.errors import ToolError
from plangate.world.policies import Bundle
from plangate.world.settings import CatalogueSettings, PolicySettings, WorldSettings


def review(
    req: ReviewRequest, cat: CatalogueSettings, world: WorldSettings, policy: PolicySettings,
    cedar: Bundle | None = None,
) -> Review:
    """``cedar``: the deployment's Cedar policies in force decide each step of the proposal as
    its guards are derived (``activities.guarding.decided``): a forbidden step is a problem of
    the proposal, a step permitted with people waits for a card."""
    found = plan_problems(req.plan, cat, world, bound=set(req.request.bound), strict=True)
    if not found:
        found = mandate_problems(req.plan, req.request, catalogue(cat))
    if found:
        return Review(problems=found)
    g = guarded(req.plan, cat, policy, replanned=True)
    if cedar is not None:
        guards, refused = decided(req.plan, g.guards, cat, cedar, req.plan.on_behalf_of)
        if refused is not None:
            return Review(problems=[f"step {refused[0]}: {refused[1]}"])
        g = g.model_copy(update={"guards": guards})
    return Review(plan=g)


class ReviewActivities:
    def __init__(
        self, cat: CatalogueSettings, world: WorldSettings, policy: PolicySettings,
        book: PolicyBook | None = None,
    ) -> None:
        self.cat, self.world, self.policy = cat, world, policy
        self.book = book or PolicyBook(policy, world.scope, catalogue(cat))

    @activity.defn(name=REVIEW_ACTIVITY)
    async def review(self, req: ReviewRequest) -> Review:
        cedar = None
        if self.book.on:
            try:
                cedar = await asyncio.to_thread(self.book.current)
            except ToolError as e:  # the policies in force cannot be read: nothing runs
                return Review(problems=[e.detail])
        # path checks resolve symlinks on disk: off the event loop
        return await asyncio.to_thread(review, req, self.cat, self.world, self.policy, cedar)
