"""The call seal: the deployment's word that an activity call was scheduled by plangate's own
workflow code, in this very run, with these arguments.

A stranger on the Temporal namespace can schedule any activity the worker registers, from a
workflow of their own whose id equals a finished victim's, with arguments and headers copied from
its history. What they cannot do is compute an HMAC under the deployment's key
(``world.keys``), which only plangate's workers hold. A plangate workflow seals every activity it
schedules (``workflows.sealing``); the activity's door (``worker.door``) verifies the seal
against what the server says of the call (``activity.info()``: namespace, workflow id, run id,
activity type) and against the arguments it received, before anything is read or written.

The seal binds the run id, which Temporal assigns: a seal copied into another execution, a reset
or a workflow reusing the id included, does not verify there (the workflow code of a reset run
seals its new calls again). Arguments are compared as canonical JSON (keys sorted), so the
converter's field order on either side does not matter.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Sequence

HEADER = "plangate-seal"
_DOMAIN = b"plangate-seal/1"
KEY_BYTES = 32


def canonical(data: bytes) -> bytes:
    """A payload's data as compared: JSON re-written with sorted keys, anything else as it is."""
    try:
        value = json.loads(data)
    except ValueError:
        return data
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def args_digest(datas: Sequence[bytes]) -> bytes:
    """One digest of a call's arguments, each a payload's data."""
    h = hashlib.sha256()
    for d in datas:
        c = canonical(d)
        h.update(len(c).to_bytes(8, "big"))
        h.update(c)
    return h.digest()


def seal(
    key: bytes, *, namespace: str, workflow_id: str, run_id: str, activity: str,
    args: bytes, header: bytes = b"",
) -> bytes:
    """The seal of one call. ``args``: ``args_digest`` of its arguments; ``header``: another
    header's data it vouches for (the team plugin's ``plangate-guard``)."""
    if len(key) < KEY_BYTES:
        raise ValueError(f"a seal key has at least {KEY_BYTES} bytes")
    mac = hmac.new(key, digestmod=hashlib.sha256)
    for part in (_DOMAIN, namespace.encode(), workflow_id.encode(), run_id.encode(),
                 activity.encode(), args, header):
        mac.update(len(part).to_bytes(8, "big"))
        mac.update(part)
    return mac.digest()


def verifies(
    key: bytes, given: bytes, *, namespace: str, workflow_id: str, run_id: str, activity: str,
    args: bytes, header: bytes = b"",
) -> bool:
    want = seal(key, namespace=namespace, workflow_id=workflow_id, run_id=run_id,
                activity=activity, args=args, header=header)
    return hmac.compare_digest(want, given)
