"""The input of a plan run."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from plans.guards import GuardedPlan


class RunInput(BaseModel):
    plan: GuardedPlan  # the plan with its guards, resolved from the catalogue at submission
    plan_made_at: datetime | None = None  # when the plan was written, if the caller knows


class CancelRequest(BaseModel):
    """The ``cancel`` signal: why, and who asks."""

    reason: str = Field(default="", max_length=2000)
    requester: str = Field(default="", max_length=200)
