"""The worker derives every guard of a run itself: a local activity (``guard.resolve``), asked
once per plan version, its answer recorded in the history so a replay sees what the run saw.

From the plan and what only the run knows (its id, its submission), and from this worker's own
catalogue and settings: each step's effect, contract, reader, version binding and whether it
waits for a person; the approvers whose proofs count; who submitted the run and whether it may
act as the principal it names; the policy bundle it is decided under. The first version is
checked as ``plangate check`` checks it (a raw start skips no check). Nothing an input says
about its own guards is read.
"""

from __future__ import annotations

import asyncio
import base64

from temporalio import activity

from activities.catalogue import guarded, plan_problems
from records.proofs import submission_refusal
from records.run import GuardRequest, Resolved
from world.settings import Settings

ACTIVITY_NAME = "guard.resolve"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def derive(req: GuardRequest, settings: Settings) -> Resolved:
    """The guards, approvers, submitter and policy of the plan version; the refusal when the
    run's submission does not let it act."""
    plan = req.plan
    first = req.version == 1
    on_behalf_of = plan.on_behalf_of if first else req.on_behalf_of
    policy = (plan.policy_bundle or settings.policy_bundle) if first else req.policy_bundle
    g = guarded(plan, settings, replanned=not first)
    out = Resolved(
        guards=g.guards, systems=g.systems, approval_ttl_s=g.approval_ttl_s,
        approvers={name: _b64(key) for name, key in settings.approvers},
        on_behalf_of=on_behalf_of, policy_bundle=policy,
    )
    if settings.submitters:
        why = submission_refusal(
            req.submission, settings.submitter_map, workflow_id=req.workflow_id,
            plan=plan if first else None, on_behalf_of=on_behalf_of, started_at=req.started_at,
        )
        if why is not None:
            return out.model_copy(update={"refusal": why, "refusal_code": "not_permitted"})
        if req.submission is not None:  # verified just now: the run's proven submitter
            known = settings.submitter_map[req.submission.submitter]
            out = out.model_copy(update={
                "submitter": known.name, "submitter_key": _b64(known.public),
            })
    return out


def resolve(req: GuardRequest, settings: Settings) -> Resolved:
    """``derive``, and the first version checked as ``plangate check`` checks it."""
    out = derive(req, settings)
    if out.refusal is None and req.version == 1:
        problems = plan_problems(req.plan, settings)
        if problems:
            why = f"the plan does not pass this deployment's check: {'; '.join(problems[:5])}"
            return out.model_copy(update={"refusal": why[:2000], "refusal_code": "bad_plan"})
    return out


class GuardActivities:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @activity.defn(name=ACTIVITY_NAME)
    async def resolve(self, req: GuardRequest) -> Resolved:
        # path checks resolve symlinks on disk: off the event loop
        return await asyncio.to_thread(resolve, req, self.settings)
