"""Idempotency keys: one format, made by the workflow side (a plan's steps, a team's guarded
calls), by the MCP read, and checked by the tool's activity (``activities.effects``).

A key reads ``RUN~TAG/CALL``. ``RUN`` is a digest of the whole workflow id, so the activity can
tell a key of its own workflow (``activity.info().workflow_id``) from another's: a prefix of the
id would let a workflow whose id shares it take another run's key first. ``TAG`` makes it the
run chain's own (the workflow id and the first run of its chain: a reused workflow id is a new
chain), ``CALL`` the call in it (``v1/3``, ``g/2``). 24 + 1 + 16 hex characters and the call:
short, as a key is in every history it goes through. Every key is built and read here."""

from __future__ import annotations

import hashlib
import re

RUN_CHARS = 24  # 96 bits: no workflow id can be chosen to share another's
TAG_CHARS = 16


def _hex(text: str, chars: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:chars]


def run_part(workflow_id: str) -> str:
    """What every key of the workflow ``workflow_id`` begins with (before ``~``)."""
    return _hex(workflow_id, RUN_CHARS)


def chain_tag(workflow_id: str, first_execution_run_id: str) -> str:
    """What makes a run chain's keys its own: carried across continue-as-new."""
    return _hex(f"{workflow_id}/{first_execution_run_id}", TAG_CHARS)


def idempotency_key(workflow_id: str, tag: str, call: str) -> str:
    return f"{run_prefix(workflow_id)}{tag}/{call}"


def run_prefix(workflow_id: str) -> str:
    """``RUN~``: what a key of the workflow ``workflow_id`` begins with."""
    return f"{run_part(workflow_id)}~"


def step_call(plan_version: int, n: int) -> str:
    """``CALL`` of a plan's step ``n`` in version ``plan_version``."""
    return f"v{plan_version}/{n}"


def guard_call(segment: str, n: int) -> str:
    """``CALL`` of a team's ``n``-th guarded call (``segment``: the run's place in its chain)."""
    return f"g/{segment}{n}"


def local_write_key(key: str, where: str) -> str:
    """The ledger key of a file the call ``key`` wrote in its run's directory (``where``: a
    digest of its path)."""
    return f"{key}#local/{where}"


def prefix_key(workflow_id: str, tag: str, call: str) -> str:
    """The key of a run whose worker made keys of the first 48 characters of the workflow id
    (``Resolved.whole_id_keys`` False): what its history replays. No tool call takes it."""
    return f"{workflow_id[:48]}~{tag}/{call}"


def of_workflow(key: str, workflow_id: str) -> bool:
    """Whether ``key`` is a key of the workflow ``workflow_id`` (its whole id)."""
    return key.startswith(run_prefix(workflow_id))


_TAG = re.compile(rf"([0-9a-f]{{{TAG_CHARS}}})/")


def tag_of(key: str, workflow_id: str) -> str | None:
    """The chain tag ``key`` carries, where it is a key of ``workflow_id``'s (else None)."""
    prefix = run_prefix(workflow_id)
    found = _TAG.match(key, len(prefix)) if key.startswith(prefix) else None
    return found.group(1) if found else None
