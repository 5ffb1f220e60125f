"""A tool's activity handed a grant directly, as a workflow of anyone's could hand it (the run's
own checks bypassed): what the activity answers. For tests of what the activity counts."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from plangate.records import keys
from plangate.records.approvals import ApprovalCard
from plangate.records.calls import StepRef, ToolCall, ToolFailure
from plangate.records.proofs import ApprovalGrant


def money_card(tool: str, args: dict[str, Any]) -> ApprovalCard:
    """A card for step 1 of a run of its own, calling ``tool`` with ``args``, issued now."""
    run = f"plan-{uuid.uuid4().hex[:12]}"
    now = datetime.now(UTC)
    return ApprovalCard(run_id=run, plan_version=1, step=1, tool=tool, effect="money",
                        args=args, issued_at=now, expires_at=now + timedelta(hours=1),
                        idempotency_key=keys.idempotency_key(run, uuid.uuid4().hex[:16],
                                                             "v1/1"))


async def refused_with(act: Callable[..., Any], card: ApprovalCard, bundle: str | None,
                       grant: ApprovalGrant) -> tuple[str, str]:
    """The refusal's code and detail when ``act`` is called for ``card``'s very call with
    ``grant``; it must refuse."""
    call = ToolCall(step=StepRef(run_id=card.run_id, plan_version=1, n=1, tool=card.tool,
                                 args=card.args),
                    idempotency_key=card.idempotency_key, policy_bundle=bundle, approval=grant)
    env = ActivityEnvironment()
    env.info = replace(env.info, workflow_id=card.run_id)
    with pytest.raises(ApplicationError) as refused:
        await env.run(act, call)
    failure = ToolFailure.model_validate(refused.value.details[0])
    return refused.value.type or "", failure.detail
