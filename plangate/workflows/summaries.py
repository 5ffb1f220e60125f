"""One-line summaries of what a run schedules, for the Temporal Web UI and CLI (the ``summary``
of an activity or a child workflow): ``pre-check step 3: object_exists s3://vendor-drops/...``,
``step 4 warehouse.load -> staging.inv``. Pure; metadata on commands, never an input."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from pydantic import JsonValue

from plangate.plans.model import Condition
from plangate.records.report import Phase, RunReport, RunStatus

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


# -- timers: what a run waits for, and until when ----------------------------------------------
def span(d: timedelta | float) -> str:
    """``45 s``, ``5 min``, ``2 h 30 min``, ``1 d 2 h``."""
    s = round(d.total_seconds() if isinstance(d, timedelta) else d)
    if s < 120:
        return f"{s} s"
    m = s // 60
    if m < 120:
        return f"{m} min"
    h, m = divmod(m, 60)
    if h < 48:
        return f"{h} h {m} min" if m else f"{h} h"
    days, h = divmod(h, 24)
    return f"{days} d {h} h" if h else f"{days} d"


def clock(at: datetime) -> str:
    """``2026-03-02 14:05:00 UTC``: a wait may last days."""
    return at.strftime("%Y-%m-%d %H:%M:%S UTC")


def card(n: int, version: int) -> str:
    return f"{step_label(n, version)} issues its approval card"


def approvers(n: int, version: int) -> str:
    return f"who may answer the card of {step_label(n, version)} now"


def bound_decision(n: int, version: int, tool: str) -> str:
    """The policies asked about a step's call once its ``${name}`` arguments are bound."""
    return clip(f"policies on {step_label(n, version)} {tool}, its arguments bound")


def approval_wait(n: int, version: int, until: datetime) -> str:
    return clip(f"waiting for an approver for {step_label(n, version)} until {clock(until)}")


def read_again(n: int, version: int, interval: timedelta, reads: int, most: int) -> str:
    """A post wait between two reads."""
    return clip(
        f"{step_label(n, version)} reads the world again in {span(interval)} (read {reads} "
        f"of at most {most})"
    )


def retry(n: int, version: int, delay: timedelta, attempt: int) -> str:
    return clip(f"{step_label(n, version)} tries again in {span(delay)} (attempt {attempt} failed)")


def resume(n: int, version: int, delay: timedelta) -> str:
    """A pause an earlier run of the chain began, going on."""
    return clip(f"{step_label(n, version)} goes on in {span(delay)} (carried from the run before)")


def outage(n: int, version: int, systems: list[str], delay: timedelta, reads: int) -> str:
    down = ", ".join(systems) or "a system"
    return clip(
        f"{step_label(n, version)} waits for {down} to answer: reads again in {span(delay)} "
        f"(read {reads})"
    )


def owed(n: int, version: int, owner: int, cond: Condition, limit: timedelta) -> str:
    return clip(
        f"{step_label(n, version)} waits for step {owner} to establish {condition(cond)} "
        f"(at most {span(limit)})"
    )


# -- the end --------------------------------------------------------------------------------
def ended(r: RunReport) -> str:
    """A run that did not succeed, in one line: the message of the failure its execution ends
    with (what the Web UI and ``temporal workflow describe`` show)."""
    if r.status is RunStatus.CANCELLED:
        c = r.cancellation
        who = f" by {c.requester}" if c is not None and c.requester else ""
        why = c.reason if c is not None and c.reason else "no reason given"
        return clip(f"cancelled{who}: {why}", 1000)
    f = r.failure
    where = ""
    if f is not None:
        where = f" at {step_label(f.step, f.plan_version)} ({f.tool}, {f.code})"
    why = f.detail if f is not None else r.escalation or ""
    if r.status is RunStatus.HALTED and r.replans_used and r.escalation:
        why = r.escalation  # the re-plans spent, and why the last was refused
    elif f is not None and f.answer is not None and r.status is RunStatus.HALTED:
        why = f"{why} (a person must look)"
    return clip(f"{r.status.value}{where}: {why}" if why else f"{r.status.value}{where}", 1000)
