"""The re-planner activity: asks the configured backend for a new plan.

With ``replanner = "playbook"`` only the playbook answers. With ``"openai"`` the playbook is the
cheap first line and the model is asked only when no recipe fits the failure.

A backend that gets no answer this time (``ModelUnavailable``) fails the activity retryably, so
the caller's RetryPolicy decides how often to ask again; every other outcome, a plan or none, is
returned (``plan=None`` carries the reason, and the caller counts it against the budget).
"""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from plangate.records.interface import PROPOSE_ACTIVITY
from plangate.records.replan import ReplanProposal, ReplanRequest
from plangate.replanner.backends import Backend, PlaybookBackend, backend_for
from plangate.replanner.backends.openai import ModelUnavailable
from plangate.world.settings import CatalogueSettings, ModelSettings


class ReplanActivities:
    def __init__(
        self, model: ModelSettings, catalogue: CatalogueSettings, backend: Backend | None = None
    ) -> None:
        """``backend``: the one asked (a test's); None: the configured one
        (``backend_for``), over the deployment's ``catalogue``."""
        self.backend = backend if backend is not None else backend_for(model, catalogue)

    @activity.defn(name=PROPOSE_ACTIVITY)
    async def propose(self, req: ReplanRequest) -> ReplanProposal:
        try:
            answer = await self.backend.propose(req)
        except ModelUnavailable as e:
            raise ApplicationError(
                f"re-planner endpoint gave no answer: {e}", type="ModelUnavailable"
            ) from None
        if not answer.backend:
            answer = answer.model_copy(update={"backend": self.backend.name})
        if answer.plan is None and isinstance(self.backend, PlaybookBackend):
            answer = answer.model_copy(update={"final": True})  # deterministic: same answer again
        if answer.plan is None:
            activity.logger.info(
                "re-planner %s: no plan for %s at step %d: %s",
                answer.backend, req.failure.code, req.failure.step, answer.reason,
            )
        else:
            activity.logger.info(
                "re-planner %s: %d steps for %s at step %d",
                answer.backend, len(answer.plan.steps), req.failure.code, req.failure.step,
            )
        return answer
