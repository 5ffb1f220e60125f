"""Re-planner backends: where a new plan comes from.

- ``PlaybookBackend``: deterministic recipes keyed by failure code; no model, no network.
- ``OpenAIBackend``: any OpenAI-compatible endpoint, structured output against the plan schema.
- ``FirstLine``: the playbook first (cheap, deterministic), the model only when no recipe fits.

``backend_for(model, catalogue)`` is the configured one: ``playbook`` alone, or ``FirstLine`` for
``openai``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from plangate.records.replan import ReplanProposal, ReplanRequest
from plangate.replanner.backends.playbook import RECIPES, PlaybookBackend

if TYPE_CHECKING:
    from plangate.world.settings import CatalogueSettings, ModelSettings


@runtime_checkable
class Backend(Protocol):
    name: str

    async def propose(self, req: ReplanRequest) -> ReplanProposal: ...


class FirstLine:
    """Asks each backend in turn; the first proposal with a plan wins. With none, the last
    answer is returned with every reason joined, so the run's escalation says what was tried."""

    def __init__(self, *backends: Backend) -> None:
        if not backends:
            raise ValueError("FirstLine needs at least one backend")
        self.backends = backends
        self.name = "+".join(b.name for b in backends)

    async def propose(self, req: ReplanRequest) -> ReplanProposal:
        reasons: list[str] = []
        answer = ReplanProposal(backend=self.name)
        for b in self.backends:
            answer = await b.propose(req)
            if not answer.backend:
                answer = answer.model_copy(update={"backend": b.name})
            if answer.plan is not None:
                return answer
            reasons.append(f"{answer.backend}: {answer.reason}")
        return answer.model_copy(update={"reason": "; ".join(reasons)})


def backend_for(model: ModelSettings, catalogue: CatalogueSettings) -> Backend:
    """The backend ``model`` configures; the model, when asked, plans over ``catalogue``."""
    if model.replanner == "playbook":
        return PlaybookBackend()
    from plangate.replanner.backends.openai import OpenAIBackend  # the openai client only when used

    return FirstLine(PlaybookBackend(), OpenAIBackend.from_settings(model, catalogue))


__all__ = ["RECIPES", "Backend", "FirstLine", "PlaybookBackend", "backend_for"]
