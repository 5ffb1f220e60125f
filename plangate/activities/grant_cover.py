"""``grant.cover``: whether a standing grant (``world.grants``) covers a step's call that needs a
person, asked by the plan run's workflow where it would publish a card; a local activity, so run
by this worker for a workflow task it took (a stranger's workflow never runs one here).

What it decides from is the worker's own: the run is Temporal's word (``activity.info()``), the
key must be a key of that run (``records.keys``), the approvers are this worker's list now, the
grant's signature is verified with it and its terms are checked against the call's fully bound
arguments. Covered: one use reserved for the call's key (``world.grants.reserve``); the tool's
activity consumes it at the call. Anything it cannot decide (Postgres away) is "not covered":
the call gets its card as it would have."""

from __future__ import annotations

import asyncio
import logging

from temporalio import activity
from temporalio.exceptions import ApplicationError

from plangate.activities.catalogue import catalogue
from plangate.activities.effects import args_sha256
from plangate.records import keys
from plangate.records.grants import Cover, CoverRequest
from plangate.records.interface import GRANT_COVER_ACTIVITY
from plangate.world import grants
from plangate.world.clients import World
from plangate.world.settings import CatalogueSettings, PolicySettings

log = logging.getLogger(__name__)
TRY_S = 4.0  # in the run's workflow task: past this, a card


class GrantActivities:
    def __init__(self, world: World, cat: CatalogueSettings, policy: PolicySettings) -> None:
        self.world, self.cat, self.policy = world, cat, policy

    @activity.defn(name=GRANT_COVER_ACTIVITY)
    async def cover(self, req: CoverRequest) -> Cover:
        workflow_id = activity.info().workflow_id
        if workflow_id is None or not activity.info().is_local:
            raise ApplicationError(f"{GRANT_COVER_ACTIVITY} runs in a plan run's workflow only",
                                   type="not_permitted", non_retryable=True)
        if not keys.of_workflow(req.idempotency_key, workflow_id):
            return Cover(why="the call's key is not a key of this run")
        info = catalogue(self.cat).tools.get(req.tool)
        if info is None:
            return Cover(why=f"{req.tool} is not in this worker's catalogue")
        submitter = self.policy.submitter_map.get(req.submitter or "")
        call = grants.Call(workflow_id, req.idempotency_key, req.tool, req.on_behalf_of,
                           req.args, args_sha256(req.args), info, req.submitter,
                           submitter.public if submitter is not None else None)
        try:
            grant, grant_id = await asyncio.wait_for(
                grants.reserve(self.world, call, self.policy.approver_map), TRY_S)
        except grants.NotCovered as e:
            return Cover(why=str(e))
        except Exception as e:  # not decided: a card, as without grants
            log.warning("%s step %d: grants not read, a card instead: %s", workflow_id,
                        req.step, e)
            return Cover(why=f"the grants could not be read: {type(e).__name__}")
        return Cover(grant_id=grant_id, approver=grant.terms.approver)
