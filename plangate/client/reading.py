"""A read tool's call answered without a run: a Temporal standalone activity
(``records.interface.READ_CALL_ACTIVITY``) on the queue of a worker that can run the call
(``starting.queue_for``), the call's plan and signed submission its input; the worker decides
every guard (``activities.reading``) and answers the call, or says a run must
(``ReadAnswer.run``). ``plangate mcp`` uses it for the tools the deployment declares ``read``.

A server that refuses standalone activities (``activity.enableStandalone`` off, or a server
before them) raises ``NoStandaloneReads``, its reason said: the caller answers with a run.

Anyone who reaches the namespace can start an activity under any id, so the read is started
under an id nobody can guess (``read_id``), never attached to one that exists (a clash is
``ReadNotAnswered``: a run answers), and its answer is taken only where it names this very
call (``ReadAnswer.refusal``); it is awaited for its own limits at most (``read_bound``)."""

from __future__ import annotations

import asyncio
import secrets
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from plangate.errors import PlangateError
from plangate.records.interface import READ_CALL_ACTIVITY
from plangate.records.proofs import sign_submission
from plangate.records.reading import ReadAnswer, ReadCall

if TYPE_CHECKING:
    from temporalio.client import Client

    from plangate.client.checked import Checked
    from plangate.world.settings import Settings

# A read is one attempt: anything but a plain success is answered by a run, which has the
# retries and the patience (an attempt that fails says so; one Temporal retried could have
# read twice for nothing).
READ_TIMEOUT = timedelta(seconds=60)
READ_HEARTBEAT = timedelta(seconds=10)  # a tool heartbeats every second: a lost worker shows
# past the activity's own bound, what the front waits for Temporal to say it ended
READ_SLACK = timedelta(seconds=5)


class NoStandaloneReads(PlangateError):
    """The Temporal server does not run standalone activities: reads go through runs."""


class ReadNotAnswered(PlangateError):
    """The read's activity did not answer (no worker took it in time, it timed out, its worker
    was lost): nothing guarded was decided by anyone; a run answers instead."""


class ReadMisanswered(ReadNotAnswered):
    """The read's activity answered another call than this one (another tool, other arguments,
    another id): nothing of it is taken; a run answers instead."""


def read_id(tool: str) -> str:
    """A read's activity id: the tool, and 128 random bits nobody can guess or start first."""
    return f"mcp-{tool}-read-{secrets.token_hex(16)}"


def read_bound(take_within: timedelta) -> timedelta:
    """The longest a read is awaited: taken within ``take_within``, answered within
    ``READ_TIMEOUT`` (the activity's schedule-to-close), and a little for Temporal to say so."""
    return take_within + READ_TIMEOUT + READ_SLACK


async def read_call(
    client: Client, settings: Settings, done: Checked, call_id: str, *,
    take_within: timedelta, queue: str | None = None,
) -> ReadAnswer:
    """The worker's answer to the one-step read ``done`` under ``call_id`` (the activity's id,
    what the submission is signed for: ``read_id``'s, new for each call). ``take_within``: how
    long it may wait for a worker; ``queue``: where it goes (``starting.queue_for``'s answer for
    the plan; asked when None). ``ReadNotAnswered`` where the id is taken, nothing answers
    within ``read_bound``, or the answer names another call (``ReadMisanswered``)."""
    from temporalio.client import ActivityFailureError
    from temporalio.common import ActivityIDConflictPolicy, ActivityIDReusePolicy, RetryPolicy
    from temporalio.exceptions import ActivityAlreadyStartedError
    from temporalio.service import RPCError, RPCStatusCode

    from plangate.client.starting import queue_for

    plan = done.plan
    key = settings.identity.submitter_key
    queue = queue or await queue_for(client, settings, plan)
    req = ReadCall(plan=plan, submission=sign_submission(key, call_id, plan, datetime.now(UTC))
                   if key else None)
    bound = read_bound(take_within)
    try:
        async with asyncio.timeout(bound.total_seconds()):
            # never another's activity: one under this id, running or closed, is a clash
            answer: ReadAnswer = await client.execute_activity(
                READ_CALL_ACTIVITY, req, id=call_id, task_queue=queue, result_type=ReadAnswer,
                schedule_to_start_timeout=take_within, start_to_close_timeout=READ_TIMEOUT,
                schedule_to_close_timeout=take_within + READ_TIMEOUT,
                heartbeat_timeout=READ_HEARTBEAT, retry_policy=RetryPolicy(maximum_attempts=1),
                id_conflict_policy=ActivityIDConflictPolicy.FAIL,
                id_reuse_policy=ActivityIDReusePolicy.REJECT_DUPLICATE,
                summary=f"{plan.steps[0].tool} read over MCP",
            )
    except RPCError as e:
        if e.status in (RPCStatusCode.UNIMPLEMENTED, RPCStatusCode.PERMISSION_DENIED):
            raise NoStandaloneReads(f"the Temporal server refuses standalone activities: "
                                    f"{e.message}") from None
        raise
    except ActivityAlreadyStartedError:
        raise ReadNotAnswered(f"the read's activity id {call_id!r} is taken") from None
    except ActivityFailureError as e:
        raise ReadNotAnswered(f"the read's activity did not answer: {e.cause}") from None
    except TimeoutError:
        raise ReadNotAnswered(f"the read's activity did not answer within "
                              f"{bound.total_seconds():g} s") from None
    wrong = answer.refusal(call_id, plan)
    if wrong is not None:
        raise ReadMisanswered(f"the read's activity answered another call: {wrong}")
    return answer
