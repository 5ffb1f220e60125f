"""One Temporal activity per registered tool, named after the tool."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.errors import ToolError
from activities.payloads import ToolCall, ToolFailure, ToolResult
from activities.tools.registry import TOOLS, CallContext, ToolSpec
from activities.world import PathOutsideWorkdir, World

HEARTBEAT_EVERY_S = 1.0


def as_application_error(e: ToolError) -> ApplicationError:
    failure = ToolFailure(
        code=e.code,
        status=e.status,
        retryable=e.retryable,
        detail=e.detail,
        data=e.data,
        attempt=activity.info().attempt,
    )
    # The type is the code: the RetryPolicy decides from it (activities.errors.CODES).
    return ApplicationError(str(e), failure.model_dump(mode="json"), type=e.code)


async def _heartbeat() -> None:
    # Cancellation reaches a running activity only through heartbeats.
    while True:
        activity.heartbeat()
        await asyncio.sleep(HEARTBEAT_EVERY_S)


def _make(spec: ToolSpec[Any], world: World) -> Callable[[ToolCall], Any]:
    async def run_tool(call: ToolCall) -> ToolResult:
        started = datetime.now(UTC)
        ctx = CallContext(call.step.run_id, call.step.n, call.idempotency_key)
        beat = asyncio.create_task(_heartbeat())
        try:
            try:
                args = spec.args.model_validate(call.step.args)
            except ValidationError as e:
                raise ToolError("bad_arguments", f"{spec.name}: {e}") from e
            output = await spec.fn(args, world, ctx)
        except PathOutsideWorkdir as e:
            raise as_application_error(ToolError("bad_arguments", str(e))) from e
        except ToolError as e:
            raise as_application_error(e) from e
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat
        return ToolResult(
            output=output,
            started_at=started,
            finished_at=datetime.now(UTC),
            attempt=activity.info().attempt,
        )

    run_tool.__name__ = run_tool.__qualname__ = "tool_" + spec.name.replace(".", "_")
    return activity.defn(name=spec.name)(run_tool)


def tool_activities(world: World) -> list[Callable[[ToolCall], Any]]:
    return [_make(spec, world) for spec in TOOLS.values()]
