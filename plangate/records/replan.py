"""What the re-planner is handed and what it hands back."""

from __future__ import annotations

from pydantic import Field, JsonValue

from plangate.plans._base import Model
from plangate.plans.guards import GuardedPlan
from plangate.plans.model import Plan, Step
from plangate.records.report import CompletedStep, FailureRecord


class ReplanBudget(Model):
    replans_used: int
    replans_max: int


class ReplanRequest(Model):
    """Goal, the work already done (with its bindings and results), the failure, the steps the
    failed plan still had (a proposal to keep, amend or discard), and the budget."""

    goal: str
    completed: list[CompletedStep]
    failure: FailureRecord
    remaining: list[Step]
    budget: ReplanBudget
    bound: dict[str, JsonValue] = Field(default_factory=dict)  # every binding so far
    # the run's authority and policy: a new plan acts under them, it cannot name others
    on_behalf_of: str | None = None
    policy_bundle: str | None = None


class ReplanProposal(Model):
    """A backend's answer: a plan (not yet validated), or none with the reason."""

    plan: Plan | None = None
    reason: str = ""
    backend: str = ""
    # No plan, and asking again cannot give another answer (a deterministic backend).
    final: bool = False


class ReviewRequest(Model):
    plan: Plan
    request: ReplanRequest


class Review(Model):
    """A proposal reviewed: its problems, or the plan with its guards, ready to run."""

    problems: list[str] = Field(default_factory=list)
    plan: GuardedPlan | None = None


class ReplanOutcome(Model):
    """The child workflow's answer to the parent: a reviewed plan, or why there is none."""

    plan: GuardedPlan | None = None
    reason: str = ""
    backend: str = ""
    problems: list[str] = Field(default_factory=list)  # validation problems of a rejected plan
    final: bool = False
