"""The guard at the call: an activity inbound interceptor on the team's worker decides every
guarded activity again where it acts (``activities.guarded_call.run_guarded``, as for a
plan's tool): the approval verified against this very call, the principal and the policies, the pre
conditions read the instant before, the effect ledger's intent and outcome under the call's
key. A call that did not come through the workflow interceptor (a workflow without it, a
worker of someone else's) carries no guard header and is refused (403 ``not_permitted``).
Activities the table does not name pass untouched.
"""

from __future__ import annotations

import contextvars
import inspect
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from pydantic import BaseModel, JsonValue
from temporalio import activity
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput

from plangate.activities.call_checks import as_application_error
from plangate.activities.guarded_call import run_guarded
from plangate.activities.tools.registry import CallContext
from plangate.records.calls import ToolFailure
from plangate.records.interface import TEAM_ACTIVITIES
from plangate.temporal.calls import ANSWER_META, HEADER, GuardAnswer, header_of, wire_json
from plangate.temporal.guards import Guarded, jsonable
from plangate.temporal.marker import admitting
from plangate.temporal.table import UnboundCheck, arguments, conditions
from plangate.worker.door import seal_refusal
from plangate.workflows.sealing import SealKey
from plangate.world.clients import World
from plangate.world.errors import ToolError

_KEY: contextvars.ContextVar[str | None] = contextvars.ContextVar("plangate_call_key",
                                                                  default=None)
# The effect ledger keeps a guarded call's answer as its JSON: an object as it is (what the
# table's ``output.NAME`` and the reader's record are read against), anything else under this
# key. A key the ledger has already answers with it, or with the record its reader read back.
ANSWER = "plangate.answer"


def call_key() -> str | None:
    """The idempotency key of the guarded call this activity runs for (None outside one): what
    a team's activity passes to a system that dedupes by key, and records for its reader."""
    return _KEY.get()


class TeamRaised(ToolError):
    """The team's activity raised (its cause): the ledger keeps the outcome unknown, and the
    team's own error reaches its workflow."""


def is_async(fn: Callable[..., Any]) -> bool:
    """As the SDK decides whether it runs an activity on the event loop or in its executor."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        type(fn).__call__)


class GuardAtCall(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, guarded: Guarded,
                 key: SealKey | None = None) -> None:
        super().__init__(next)
        self.g = guarded
        self.key = key or SealKey()

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        name = info.activity_type
        if name in TEAM_ACTIVITIES and not info.is_local:
            # plangate's own checks run only as local activities of a guarded workflow
            where = ("started outside a workflow (a standalone activity)"
                     if info.workflow_id is None else
                     f"workflow {info.workflow_id!r} scheduled it as a regular activity")
            raise as_application_error(ToolError("not_permitted", (
                f"{name}: not called: plangate runs {name} only as a local activity of a "
                f"guarded workflow; {where}")))
        spec = self.g.specs.get(name)
        if spec is None or self.g.table.get(name) is None:
            return await super().execute_activity(input)
        try:
            if info.is_local:  # the guard's reads and card come only with an activity
                raise ToolError("not_permitted", f"{name}: not called: plangate guards {name} "
                                "and a guarded activity runs as an activity, never as a local "
                                "activity")
            return await self._guarded(input, name)
        except ToolError as e:
            raise _final(as_application_error(e)) from e
        except ApplicationError as e:
            final = _final(e)
            if final is e:
                raise
            raise final from e

    async def _guarded(self, input: ExecuteActivityInput, name: str) -> Any:
        info = activity.info()
        world, probes, book = self.g.ready()
        guard = self.g.table.activities[name]
        raw = input.headers.get(HEADER)
        if raw is None:
            how = ("it was scheduled as a local activity, which the guard does not wrap"
                   if info.is_local else f"workflow {info.workflow_type} runs without "
                   "plangate.temporal's workflow interceptor")
            raise ToolError(
                "not_permitted",
                f"{name}: not called: plangate guards {name} on this worker and this call did "
                f"not come through its guard ({how})",
            )
        if info.workflow_id is None:
            raise ToolError("not_permitted", f"{name}: not called: started outside a workflow "
                            "(a standalone activity): plangate guards it only for a call a "
                            "guarded workflow scheduled")
        why = seal_refusal(self.key.value, info, input.headers, input.args, vouched=raw.data)
        if why is not None:
            raise ToolError("not_permitted", f"{name}: not called: the guard header is not "
                            f"the deployment's word: {why}")
        header = header_of(raw)
        args = arguments(wire_json(activity.payload_converter(), input.args), guard.params)
        try:
            call = self.g.call_of(name, header.n, header.key, args, info.workflow_id or "")
        except UnboundCheck as e:
            raise ToolError("bad_arguments", f"{name}: not called: {e}") from None
        # guards the workflow decided must still be the ones in force (412 if the policies
        # moved since); a call it did not decide is decided here, under the bundle in force
        bundle = header.policy_bundle if header.decided else self._bundle_now()
        call = call.model_copy(update={
            "policy_bundle": bundle, "approval": header.grant,
            "after": conditions(guard.post, args) if header.wrap else [],
        })
        answered: list[Any] = []  # the team's own answer, where the ledger did not answer

        async def invoke(_: BaseModel, __: World, ctx: CallContext) -> dict[str, JsonValue]:
            token = _KEY.set(ctx.idempotency_key)
            try:
                with admitting(activity.info()):  # what a marked activity checks (marker.py)
                    value = await super(GuardAtCall, self).execute_activity(input)
            except Exception as e:
                # the team's own failure: the ledger keeps the outcome unknown (it may have
                # acted) and the team's error reaches its workflow as it was raised
                raise TeamRaised("internal", f"{name}: {type(e).__name__}: {e}"[:500]) from e
            finally:
                _KEY.reset(token)
            answered.append(value)
            return kept(value)

        spec = replace(self.g.specs[name], fn=invoke)
        policy = replace(self.g.settings.policy, submitters=())  # no plan submitted it
        try:
            result = await run_guarded(spec, world, policy, probes, book, call,
                                       beats_while_acting=is_async(input.fn))
        except ApplicationError as e:
            if isinstance(e.__cause__, TeamRaised) and e.__cause__.__cause__ is not None:
                raise e.__cause__.__cause__ from None
            raise
        # the ledger answered: the effect was made under this key before; its answer as kept,
        # or the record its reader found by the key (the team's converter takes either as JSON)
        value = answered[0] if answered else answer_of(result.output)
        if not header.wrap:
            return value
        payload = activity.payload_converter().to_payload(value)
        answer = GuardAnswer(
            effect=guard.effect, halts=guard.on_failure == "halt", args=args,
            checked=result.checked, post=call.after, after=result.after, ledger=result.ledger,
            visible=self.g.visible,
        )
        payload.metadata[ANSWER_META] = answer.model_dump_json().encode()
        return RawValue(payload)

    def _bundle_now(self) -> str | None:
        """The policy bundle in force on this worker (Cedar's, else the configured one)."""
        _, _, book = self.g.ready()
        if book.on:
            return book.current().bundle
        return self.g.settings.policy.policy_bundle


def kept(value: Any) -> dict[str, JsonValue]:
    """A guarded call's answer as the effect ledger keeps it (``ANSWER``)."""
    data = jsonable(value)
    return data if isinstance(data, dict) else {ANSWER: data}


def answer_of(output: dict[str, JsonValue]) -> JsonValue:
    """What a call the ledger answers returns: the kept answer, or the record read back."""
    return output[ANSWER] if set(output) == {ANSWER} else output


def _final(e: ApplicationError) -> ApplicationError:
    """A refusal that asking again cannot change is non-retryable whatever the team's retry
    policy says (its types are plangate's, which that policy does not know)."""
    details = e.details[0] if e.details else None
    try:
        failure = ToolFailure.model_validate(details)
    except Exception:
        return e
    if failure.retryable or e.non_retryable:
        return e
    # a refusal is the guard working (a call waiting for its card is one): no traceback logged
    category = ApplicationErrorCategory.BENIGN if failure.status < 500 else e.category
    return ApplicationError(e.message, *e.details, type=e.type, non_retryable=True,
                            category=category)
