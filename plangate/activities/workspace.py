"""Whose files a call touches: its run's directory (``world.scopes``), derived here, on the
worker, from what Temporal says of the call (``activity.info()``), never from the request.

- A step of a run (a tool, its probes, the reads ahead of it): the workflow id Temporal names
  and the tag its idempotency keys carry (``workflows.context.key_tag``: the same in every run
  of a chain, so a file written before a continue-as-new or a reset is found after it), where
  the key begins with this workflow's id; a key that does not is given a directory of this
  execution's own, which no other run reaches.
- A read answered without a run (``activities.reading``): its activity id, run id and attempt,
  a directory removed once the read is answered.

A call can thus name only directories of its own workflow id: another run's is out of reach.
"""

from __future__ import annotations

from temporalio import activity

from plangate.records import keys
from plangate.world.clients import World
from plangate.world.runfiles import RunFiles, no_files
from plangate.world.scopes import call_scope, execution_scope, run_scope


def scope_of_call(key: str) -> str | None:
    """The directory of the call now running (None outside an activity: no run's files)."""
    if not activity.in_activity():
        return None
    info = activity.info()
    if info.workflow_id:
        tag = keys.tag_of(key, info.workflow_id)
        if tag is not None:
            return run_scope(info.workflow_id, tag)
        return execution_scope(info.workflow_id, info.workflow_run_id or "")
    return call_scope(info.activity_id, info.activity_run_id or "", info.attempt)


def run_files(world: World, key: str) -> RunFiles:
    scope = scope_of_call(key)
    return no_files() if scope is None else RunFiles(world.files, scope)

