"""One-line summaries of what a run schedules, for the Temporal Web UI and CLI (the ``summary``
of an activity or a child workflow): ``pre-check step 3: object_exists s3://vendor-drops/...``,
``step 4 warehouse.load -> staging.inv``. Pure; metadata on commands, never an input."""

from __future__ import annotations

import json

from pydantic import JsonValue

from plangate.plans.model import Condition
from plangate.records.report import Phase

# Temporal refuses a summary whose payload (a JSON string) is over 400 bytes.
SUMMARY_MAX_BYTES = 380

_PHASES = {
    Phase.SKIP_PRE: "pre-check",
    Phase.PRE: "pre-check",
    Phase.POST: "post-check",
    Phase.READ_BACK: "read-back",
    Phase.RE_PROBE: "re-probe",
    Phase.AT_CALL: "check at the call",
    Phase.RE_EVALUATE: "re-evaluate",
    Phase.AFTER_CANCEL: "after-cancel check",
}

# The argument that names what a tool or probe works on, by preference.
_TARGETS = (
    "target", "table", "name", "job_id", "path", "dest", "account_id", "invoice_id", "sub_id",
    "ticket_id", "statement", "to", "source",
)


def clip(text: str, limit: int = SUMMARY_MAX_BYTES) -> str:
    """``text`` cut (on a character boundary, with ``...``) to fit ``limit`` bytes as JSON."""
    if len(json.dumps(text)) <= limit:
        return text
    while text and len(json.dumps(text + "...")) > limit:
        text = text[: max(0, min(len(text) - 1, len(text) * 9 // 10))]
    return text + "..."


def target(args: dict[str, JsonValue]) -> str:
    """What a call or a condition is about: ``s3://bucket/key``, a table, a record's id."""
    bucket, key = args.get("bucket"), args.get("key")
    if isinstance(bucket, str) and isinstance(key, str):
        return f"s3://{bucket}/{key}"
    for name in _TARGETS:
        value = args.get(name)
        if isinstance(value, str | int) and not isinstance(value, bool):
            return str(value)
    return ""


def condition(c: Condition) -> str:
    about = target(c.args)
    return f"{c.probe} {about}" if about else c.probe


def step_label(n: int, version: int) -> str:
    return f"step {n}" if version == 1 else f"v{version} step {n}"


def probe(phase: Phase, n: int, version: int, conds: list[Condition]) -> str:
    """``pre-check step 3: object_exists s3://vendor-drops/export.csv, table_rowcount t``."""
    what = ", ".join(condition(c) for c in conds)
    return clip(f"{_PHASES[phase]} {step_label(n, version)}: {what}")


def fused(n: int, m: int, version: int, conds: list[Condition]) -> str:
    """A post check read together with the next step's first read."""
    what = ", ".join(condition(c) for c in conds)
    return clip(f"post-check {step_label(n, version)} + pre-check step {m}: {what}")


def tool(n: int, version: int, name: str, args: dict[str, JsonValue]) -> str:
    """``step 4 warehouse.load -> staging.inv``."""
    about = target(args)
    return clip(f"{step_label(n, version)} {name}" + (f" -> {about}" if about else ""))


def replan(attempt: int, run_id: str, step: int, version: int, code: str) -> str:
    return clip(f"re-plan {attempt} of {run_id} after {step_label(step, version)} ({code})")


def guards(version: int, steps: int, reads: list[int]) -> str:
    """The worker deriving a plan version's guards (``guard.resolve``), and the first reads it
    makes with them."""
    also = f" + pre-check step {', '.join(map(str, reads))}" if reads else ""
    return clip(f"guards of plan v{version}, {steps} step{'s' if steps != 1 else ''}{also}")
