"""A policy decision about one call, as it travels and is recorded: what was asked
(``PolicyRequest``) and what the deployment's policies answered (``Decision``). Made by
``plangate.world.policies`` (Cedar, through ``cedarpy``); these models know no engine, so a
step's report, its card and the workflows carry them.

A decision names its bundle (the digest of the policies, the schema and the settings that
decide: never a label), the policies that determined it, and when it was made: a call decided
under another bundle than the one in force is decided again (412 ``policy_superseded``).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import ConfigDict, Field, JsonValue

from plangate.plans._base import Model
from plangate.plans.guards import PolicyMark
from plangate.plans.model import Effect
from plangate.records.grants import GrantSeen

_FROZEN = ConfigDict(frozen=True, defer_build=True, extra="forbid")
# how a Cedar bundle's name begins (then the digest's first 16 hex): never a label's
CEDAR_BUNDLE = "cedar:"

# what a call names: a bucket (``name`` the bucket, ``key`` the object), a table (``name``
# ``schema.table``), a job of the run's own, or the tool itself when it names nothing else (an
# account's credit, an MCP server's tool: ``name`` the tool)
ResourceKind = Literal["bucket", "table", "job", "tool"]


class ResourceRef(Model):
    model_config = _FROZEN
    kind: ResourceKind
    name: str
    key: str = ""  # a bucket's object key, when the call names one
    read: bool = False  # the call only reads it


class Totals(Model):
    """The principal's calls before this one over the last hour and day, provided by the caller
    (the effect ledger's totals, calls in flight included): all its calls, and its calls of
    this call's tool (``tool_*``). Amounts in cents (hundredths of the tool's amount unit)."""

    model_config = _FROZEN
    amount_cents_hour: int = 0
    amount_cents_day: int = 0
    calls_hour: int = 0
    calls_day: int = 0
    tool_amount_cents_hour: int = 0
    tool_amount_cents_day: int = 0
    tool_calls_hour: int = 0
    tool_calls_day: int = 0
    resource_amount_cents_hour: int = 0  # ... of what this call names (its first resource)
    resource_amount_cents_day: int = 0
    resource_calls_hour: int = 0
    resource_calls_day: int = 0


class PolicyRequest(Model):
    """Everything a decision about one call may read; nothing else reaches the policies."""

    model_config = _FROZEN
    principal: str = ""  # the run's principal (``on_behalf_of``); "": the worker's own
    submitter: str = ""  # who submitted the run (a name of PLANGATE_SUBMITTERS); "": unknown
    tool: str
    effect: Effect  # the effect the call runs as (from the catalogue: never weaker)
    # what the call names; empty: the tool itself (``resources_of`` derives them)
    resources: tuple[ResourceRef, ...] = ()
    args: dict[str, JsonValue] = Field(default_factory=dict)  # the call's bound arguments
    amount_cents: int = 0  # what the call moves (its tool's amount argument), in cents
    observed: dict[str, JsonValue] = Field(default_factory=dict)  # condition -> value seen
    now: datetime  # when it is decided (timezone-aware)
    approvals: int = 0  # distinct approvers who approved this call
    totals: Totals = Field(default_factory=Totals)
    # the plan, the tool or a re-plan asks for a person (``plans.guards.needs_approval`` beside
    # the deployment's approve-effects)
    approval_asked: bool = False
    # the standing grant whose use admitted the call (``context.grant``; None: no grant)
    grant: GrantSeen | None = None


class Outcome(StrEnum):
    PERMIT = "permit"
    FORBID = "forbid"  # 403 ``policy_denied``: nothing sent
    PERMIT_WITH_PEOPLE = "permit_with_people"  # a card, and ``approvers`` distinct approvers


class Decision(Model):
    model_config = _FROZEN
    outcome: Outcome
    bundle: str  # ``cedar:<16 hex>``: the digest of what decided
    policies: tuple[str, ...] = ()  # the ids of the determining policies (none: default deny)
    approvers: int = 0  # distinct approvers needed (PERMIT_WITH_PEOPLE)
    decided_at: datetime
    # policies that failed to evaluate: any error makes the decision a forbid
    errors: tuple[str, ...] = ()
    enforced: bool = True  # False in shadow mode: recorded, never refused for
    reason: str = ""  # one line for a person: why

    def mark(self) -> PolicyMark:
        """This decision as a step's report and its card show it."""
        return PolicyMark(bundle=self.bundle, outcome=self.outcome.value,
                          policies=self.policies, approvers=self.approvers,
                          decided_at=self.decided_at, enforced=self.enforced,
                          reason=self.reason[:300])

    def approvals_missing(self, given: int) -> int:
        """How many more distinct approvers the call waits for."""
        return max(0, self.approvers - given) if self.outcome is Outcome.PERMIT_WITH_PEOPLE \
            else 0

    @property
    def refuses(self) -> bool:
        """Whether a caller refuses the call for this decision (never in shadow mode)."""
        return self.enforced and self.outcome is Outcome.FORBID


PolicyMode = Literal["enforce", "shadow"]
