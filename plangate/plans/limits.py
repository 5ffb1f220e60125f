"""Every limit on a plan, in one place. A plan over any of them is refused before any workflow
starts (by ``plangate check`` and ``plangate run`` alike, and a re-planner's proposal too), with a
message that names the step and the field.

Why limits at all: a plan is untrusted input (a person's file or a model's answer), and a run is
durable. Whatever a plan asks for is carried in the workflow's history, polled by timers and
walked by the checker; a plan that is too big, too deep or waits forever does not fail, it
hangs or bloats a run that then has to be cancelled by hand. Each limit is generous for a real
plan and refuses the pathological one cheaply.

Sizes are measured on canonical JSON (:func:`canonical_json`): keys sorted, no spaces, UTF-8.
"""

from __future__ import annotations

import json
from typing import Any

KIB = 1024
MIB = 1024 * KIB

MAX_PLAN_FILE_BYTES = 1 * MIB
"""The plan file, checked by its size before it is read (and never read past this): a plan is
text a person can review, and the YAML and JSON parsers hold the whole document in memory."""

MAX_PLAN_JSON_BYTES = 256 * KIB
"""The parsed plan as canonical JSON (defaults included: what the workflow input carries).
Temporal refuses payloads of a few MiB and every plan version of a run is kept in its history;
256 KiB leaves room for re-planned versions and the run report."""

MAX_ARG_JSON_BYTES = 64 * KIB
"""One argument value (of a step, or of a condition) as canonical JSON. Arguments are names,
keys and small values; data travels through S3 or files, never through a plan."""

MAX_STEPS = 1000
"""Steps in one plan. The workflow keeps every step's state and checks in its history and the
run report; a thousand steps is far more than a plan a person (or a model) can reason about."""

MAX_NESTING = 32
"""How deeply objects and lists may nest inside one value of a plan (an argument value: a
scalar is 0, ``{"a": [1]}`` is 2). A whole plan file may nest this plus its own structure
(plan, steps, step, condition list, condition). Deeper input is refused before recursive code
(the validator, the checker, binding at run time) walks it; input too deep for the parsers
themselves is refused with the same message."""

MAX_WAIT_TIMEOUT_S = 7 * 24 * 3600.0
"""A post condition's ``wait.timeout_s``: finite and at most 7 days. A wait holds a run open;
one that never ends is a run nobody notices until it is cancelled by hand."""

MIN_WAIT_INTERVAL_S = 1.0
"""A post condition's ``wait.interval_s``: at least 1 s (and not above the timeout). Each poll
is a probe activity against a real system and events in the run's history; faster polling
hammers both and brings no earlier answer worth having."""

MAX_OUTAGE_PATIENCE_S = MAX_WAIT_TIMEOUT_S
"""How long a step waits for a system that does not answer before it halts: a wait like a
post condition's, and no longer. The deployment sets it (``PLANGATE_OUTAGE_PATIENCE``); a run's
input may only ask for less."""

MAX_HISTORY_EVENTS = 51_200
MAX_HISTORY_BYTES = 50 * MIB
"""The most a run's history may hold: Temporal ends a run there (terminated, with no report),
so a bound above it would never make a run continue as new. The deployment sets the bound
(``PLANGATE_HISTORY_EVENTS``, ``PLANGATE_HISTORY_BYTES``); a run's input may only ask for less."""

TOOL_HEARTBEAT_S = 30.0
MIN_TOOL_HEARTBEAT_S = 5.0
MAX_TOOL_HEARTBEAT_S = 600.0
"""A tool activity's heartbeat timeout: how long its call may go silent before Temporal takes
the worker for lost. The deployment sets it (``PLANGATE_TOOL_HEARTBEAT_TIMEOUT``, 30 s), never
a run's input; a tool beats every second, sent at most every 2 s, so 5 s leaves two beats; the
call's start-to-close is 10 minutes, past which a heartbeat timeout would never fire first."""


MIN_INTEGER, MAX_INTEGER = -(2**63), 2**63 - 1
"""Every integer in a plan (a step number, a count, a version, any argument value) is a signed
64-bit integer. Python's are unbounded, but past 64 bits the plan's numbers no longer mean the
same to PostgreSQL (``bigint``) or to a JSON parser in another language, and past 4,300 digits
Python itself refuses to print or parse them."""


MAX_LOCAL_PATH_BYTES = 1024
"""A local path a plan names (``dest``, ``source``, the ``path`` of ``local_file_nonempty``), as
written, in UTF-8. Together with the work directory it must stay under the operating system's
limit on a whole path (4,096 bytes on Linux); past it the file system refuses the name
(``ENAMETOOLONG``) in the middle of a run instead of ``check`` refusing it."""

MAX_FILE_NAME_BYTES = 200
"""One name in a local path (a file or a directory), in UTF-8. File systems take 255 bytes; the
rest is room for the temporary file a tool writes beside its ``dest`` (``.NAME.XXXXXXXX.part``,
renamed over it when complete)."""


def is_integer_in_range(value: int) -> bool:
    return MIN_INTEGER <= value <= MAX_INTEGER


def canonical_json(value: Any) -> bytes:
    """``value`` as canonical JSON; ``ValueError`` for NaN or infinity anywhere in it."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def nesting(value: Any) -> int:
    """How deeply objects and lists nest in ``value`` (a scalar: 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, dict | list):
            depth += 1
            deepest = max(deepest, depth)
            stack.extend((c, depth) for c in (v.values() if isinstance(v, dict) else v))
    return deepest
