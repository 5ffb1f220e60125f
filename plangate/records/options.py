"""Activity and child options: timeouts and retry policies, decided here and nowhere else.

Below both workflow packages (``plangate.workflows`` and ``plangate.replanner``), so neither
imports the other for them (the contract in pyproject.toml says so)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio.common import RetryPolicy
from temporalio.workflow import ActivityCancellationType

from plangate.plans.limits import TOOL_HEARTBEAT_S
from plangate.plans.model import Effect

PROBE_ATTEMPTS = 3
TOOL_ATTEMPTS = 3
STEP_ATTEMPTS = 3  # workflow-level: the whole step again, probes first (RETRY answers)
DEFAULT_WAIT = timedelta(hours=1)  # how long a pre condition owed by a concurrent step may wait
APPROVAL_CARDS = 3  # approved cards per attempt whose world moved before the call (then refused)

_BACKOFF = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
)


@dataclass(frozen=True)
class ActivityOptions:
    start_to_close_timeout: timedelta
    retry_policy: RetryPolicy
    heartbeat_timeout: timedelta | None = None
    cancellation_type: ActivityCancellationType = ActivityCancellationType.TRY_CANCEL


PROBE = ActivityOptions(
    start_to_close_timeout=timedelta(seconds=30),
    retry_policy=RetryPolicy(
        initial_interval=_BACKOFF.initial_interval,
        backoff_coefficient=_BACKOFF.backoff_coefficient,
        maximum_interval=_BACKOFF.maximum_interval,
        maximum_attempts=PROBE_ATTEMPTS,
    ),
)


def tool_options(
    effect: Effect, heartbeat: timedelta = timedelta(seconds=TOOL_HEARTBEAT_S),
) -> ActivityOptions:
    """``heartbeat``: the deployment's (``PLANGATE_TOOL_HEARTBEAT_TIMEOUT``, from the worker
    with the run's guards)."""
    # An unknown outcome of a money or external step must reach a person, not a blind retry:
    # those are attempted once by Temporal, and retried (probes first) only by the workflow.
    attempts = 1 if effect.outcome_must_be_known else TOOL_ATTEMPTS
    # A permanent code is never retried: the tool's activity raises it non-retryable
    # (``activities.call_checks.as_application_error``, from records.codes.CODES).
    policy = RetryPolicy(
        initial_interval=_BACKOFF.initial_interval,
        backoff_coefficient=_BACKOFF.backoff_coefficient,
        maximum_interval=_BACKOFF.maximum_interval,
        maximum_attempts=attempts,
    )
    return ActivityOptions(
        start_to_close_timeout=timedelta(minutes=10),
        heartbeat_timeout=heartbeat,
        retry_policy=policy,
        # a cancelled run waits for a call in flight to stop, then reads what it really did
        cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    )


def step_backoff(attempt: int) -> timedelta:
    return timedelta(seconds=min(30.0, 1.0 * 2 ** (attempt - 1)))


def outage_backoff(reads: int) -> timedelta:
    """Between the reads of a system that does not answer: 2 s, doubling, at most a minute."""
    return timedelta(seconds=min(60.0, 2.0 * 2 ** (reads - 1)))


# The worker's own guards of a plan version (a local activity: the catalogue, a plan check)
GUARD_TIMEOUT = timedelta(seconds=30)
GUARD_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=3)

# An ended run's windows row (``windows.record``): written before the execution closes, tried
# twice (a blip; each try within the pool's own 3 s wait for a connection); a Postgres still down
# then does not hold the run's end back (it would stay "running" in every listing): it closes
# without the row, and ``plangate report``, finding fewer rows than visibility counts runs, reads
# them all from visibility. The attempts are bounded by count: a local activity's
# schedule-to-close did not stop its retries when each try timed out.
WINDOWS_TIMEOUT = timedelta(seconds=5)
WINDOWS_PATIENCE = timedelta(seconds=12)
WINDOWS_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=2)

# A run's row in the runs index (``index.record``), each time its status or pending cards
# change: one try of the activity (which owes the row where Postgres is away), bounded as the
# windows' row is; a failure of it is logged and the run goes on.
INDEX_TIMEOUT = timedelta(seconds=5)
INDEX_RETRY = RetryPolicy(maximum_attempts=1)

# The replan child: asking the model (each attempt at most PROPOSE_TIMEOUT), reviewing its plan
# (a local activity), and the whole child, model retries included.
PROPOSE_TIMEOUT = timedelta(minutes=3)
PROPOSE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=3,
)
REVIEW_TIMEOUT = timedelta(seconds=30)
REVIEW_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3)
REPLAN_EXECUTION_TIMEOUT = timedelta(minutes=15)
