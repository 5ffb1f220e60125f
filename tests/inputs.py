"""A file a test's run reads (a CSV to load): a run's files are its own (issue 46), so none is
placed in the work directory by hand; the object is put in S3 and the run's own first step
fetches it into the run's directory."""

from __future__ import annotations

import contextlib
from typing import Any

INPUTS = "plangate-test-inputs"


def staged(s3: Any, path: str, body: str) -> dict[str, Any]:
    """``body`` put in S3 under ``path``; the step (n 1) that fetches it to ``path``."""
    with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
        s3.create_bucket(Bucket=INPUTS)
    s3.put_object(Bucket=INPUTS, Key=path, Body=body.encode())
    return {"n": 1, "tool": "s3.get", "effect": "read",
            "args": {"bucket": INPUTS, "key": path, "dest": path}}


def after(fetch: dict[str, Any], step: dict[str, Any]) -> list[dict[str, Any]]:
    """``fetch``, then ``step`` (as step 2, once the file is there)."""
    return [fetch, {**step, "n": 2, "depends_on": [1]}]
