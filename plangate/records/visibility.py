"""What makes a run findable in Temporal's visibility (the Web UI, ``temporal workflow list``,
``plangate runs``): plangate's custom search attributes, their types, and their values for a
run report.

A workflow that upserts an attribute the namespace has not registered fails its workflow task,
again and again: so the client finds out at submission whether these three are registered
(``plangate.client.api``), and the run upserts them only when its input says they are
(``RunInput.search_attributes``).
"""

from __future__ import annotations

from typing import Any

from temporalio.common import (
    SearchAttributeKey,
    SearchAttributePair,
    SearchAttributeUpdate,
    TypedSearchAttributes,
)

from plangate.records.interface import PLAN_RUN
from plangate.records.report import RunStatus

STATUS = SearchAttributeKey.for_keyword("PlangateStatus")  # a RunStatus value
GOAL = SearchAttributeKey.for_text("PlangateGoal")
AWAITING_APPROVAL = SearchAttributeKey.for_bool("PlangateAwaitingApproval")
KEYS = (STATUS, GOAL, AWAITING_APPROVAL)
# PlangateStatus of an execution that continued as new: the run goes on in the next one (whose
# PlangateStatus is the run's status)
CONTINUED = "continued"

# A team's own workflow whose activities plangate guards (``plangate.temporal``) sets them too:
# it is listed with the runs by this condition (its task queue is the team's, not a
# deployment's)
GUARDED = f'(WorkflowType != "{PLAN_RUN}" AND PlangateStatus IS NOT NULL)'
# ... and names in its goal the deployment it answers to (the task queue of its plugin's
# settings), so that another deployment sharing the namespace leaves it out
_FOR = " guarded by plangate for "


def guarded_goal(workflow_type: str, deployment: str) -> str:
    """The goal a team's guarded workflow shows: its type and the deployment it answers to."""
    return f"{workflow_type}:{_FOR}{deployment}"


def names(goal: str | None, deployment: str) -> bool:
    """Whether a team's guarded workflow's goal names ``deployment`` (``guarded_goal``): what
    an approver's client asks before it signs an answer to its card (a goal naming none is
    not enough)."""
    if goal is None:
        return False
    _, named, which = goal.rpartition(_FOR)
    return bool(named) and which == deployment


def answers_to(goal: str | None, deployment: str) -> bool:
    """Whether a team's guarded workflow showing ``goal`` answers to ``deployment`` (a goal
    naming none, from before it was named: any)."""
    if goal is None:
        return False
    _, named, which = goal.rpartition(_FOR)
    return not named or which == deployment

# Temporal refuses a search attribute value over 2 KiB (``limit.searchAttributeSize``): a long
# goal is cut, on a character boundary.
GOAL_MAX_BYTES = 1024

Values = tuple[str, str, bool]


def registration() -> list[tuple[str, str]]:
    """Each attribute's name and type as the Temporal CLI spells them (``Keyword``, ``Text``,
    ``Bool``): ``temporal server start-dev --search-attribute NAME=TYPE``,
    ``temporal operator search-attribute create --name NAME --type TYPE``."""
    return [(k.name, k.indexed_value_type.name.capitalize()) for k in KEYS]


def short_goal(goal: str) -> str:
    data = goal.encode()
    if len(data) <= GOAL_MAX_BYTES:
        return goal
    return data[: GOAL_MAX_BYTES - 3].decode(errors="ignore") + "..."


def values(status: RunStatus, goal: str) -> Values:
    """The attributes of a run in ``status`` toward ``goal``."""
    return (status.value, short_goal(goal), status is RunStatus.AWAITING_APPROVAL)


def updates(now: Values, before: Values | None) -> list[SearchAttributeUpdate[Any]]:
    """The upserts that take the run's attributes from ``before`` (None: unknown) to ``now``."""
    status, goal, awaiting = now
    out: list[SearchAttributeUpdate[Any]] = []
    if before is None or before[0] != status:
        out.append(STATUS.value_set(status))
    if before is None or before[1] != goal:
        out.append(GOAL.value_set(goal))
    if before is None or before[2] != awaiting:
        out.append(AWAITING_APPROVAL.value_set(awaiting))
    return out


def current(attributes: TypedSearchAttributes) -> Values | None:
    """The values ``attributes`` hold, if they hold all three."""
    status, goal = attributes.get(STATUS), attributes.get(GOAL)
    awaiting = attributes.get(AWAITING_APPROVAL)
    if status is None or goal is None or awaiting is None:
        return None
    return (status, goal, awaiting)


def initial(goal: str, status: RunStatus = RunStatus.QUEUED) -> TypedSearchAttributes:
    """The attributes a run starts with (the client sets them at submission: ``queued`` for a
    run queued for later, else ``running``, which its first workflow task then need not
    upsert)."""
    return TypedSearchAttributes([
        SearchAttributePair(STATUS, status.value),
        SearchAttributePair(GOAL, short_goal(goal)),
        SearchAttributePair(AWAITING_APPROVAL, False),
    ])
