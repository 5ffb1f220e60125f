"""Guarded tools: every tool of the deployment's catalogue as an MCP tool, each call a one-step
guarded run on Temporal (the tool's contract probed before and after, the six answers, the
call's idempotency key, a card for a person where the deployment's worker asks for one).

Nothing of the guard is taken from the request: the call becomes a plan of one step with the
tool's own effect class, checked as ``plangate check`` checks, and the worker derives every
guard again from its own catalogue and settings (``activities.guarding``). A call carries no
approval and can carry none: an MCP client holds no approver's key.

The request identity: a call whose ``_meta`` carries ``io.plangate/request-id`` runs under a
run id derived from that identity, the tool and its arguments, started at most once
(``Plangate.submit(once=True)``). A client that retries after a lost answer (the server died
between the call and its answer, the connection dropped) gets the answer of the run its first
call started, and the effect happens once. A call without one is a new run each time.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import JsonValue

from plangate.client.command import plangate_command
from plangate.plans.catalogue import Term, ToolInfo
from plangate.plans.model import Effect
from plangate.records.answered import not_replanned
from plangate.records.report import RunReport, RunStatus, StepReport

REQUEST_ID_META = "io.plangate/request-id"
RUN_PREFIX = "mcp-"


def hints(info: ToolInfo) -> ToolAnnotations:
    """The MCP hints of a tool, from its effect class alone: a read changes nothing; a write
    may replace what is there; an external or money effect leaves the organisation. None is
    idempotent by its arguments alone (plangate's idempotency is by the request identity).
    The title is the catalogue's name: the name plans, reports and approval cards use."""
    read = info.effect is Effect.READ
    return ToolAnnotations(
        title=info.name,
        read_only_hint=read,
        destructive_hint=not read,
        idempotent_hint=read,
        open_world_hint=info.effect in (Effect.EXTERNAL, Effect.MONEY),
    )


_EFFECT_WORDS = {
    Effect.READ: "read (changes nothing)",
    Effect.WRITE: "write (changes data inside the organisation)",
    Effect.EXTERNAL: "external (leaves the organisation: a message, a vendor request)",
    Effect.MONEY: "money (moves money)",
}


def _term(t: Term) -> str:
    bound = [f"{k}=<{v}>" for k, v in t.from_args.items()]
    bound += [f"{k}={json.dumps(v)}" for k, v in t.fixed.items()]
    when = " ".join(f"{k}={json.dumps(v)}" for k, v in t.when.items())
    return f"{t.probe}({', '.join(bound)})" + (f" when {when}" if when else "")


def contract_words(info: ToolInfo) -> str:
    """The tool's contract as a sentence: what is read before the call and after it (``<x>``
    is the call's argument x), each a fresh read-only probe of the real system."""
    parts = []
    if info.contract.pre:
        parts.append("before the call it checks " + "; ".join(map(_term, info.contract.pre)))
    if info.contract.post:
        after = "after the call it reads back " + "; ".join(map(_term, info.contract.post))
        if info.reader is not None and any(t.probe.startswith("field_")
                                           for t in info.contract.post):
            after += f" (the record re-read through {info.reader.tool})"
        parts.append(after)
    if not parts:
        return "Its contract probes nothing of its own (a plan may add pre and post probes)."
    return "Contract: " + "; ".join(parts) + "."


def description(info: ToolInfo, approve_effects: Collection[Effect] = ()) -> str:
    """What a model reads to choose the tool: what it does (its docstring, or the MCP servers
    file's ``description``), its effect class, its contract in words, whether a call waits for
    a person (``approve_effects``: the effects this deployment holds for one), and how a
    retried call is answered instead of applied again."""
    what = " ".join(info.description.split()) or f"The catalogue tool {info.name}."
    if info.approval or info.effect in approve_effects:
        waits = ("Every call waits for a credentialed person's approval: the answer is then "
                 "the pending run (its run_id, the card, the approve line), not the result; "
                 "this client cannot approve.")
    else:
        waits = ("The deployment's policy may hold a call for a credentialed person; the "
                 "answer is then the pending run (its run_id and the card).")
    return (
        f"{what}\n\nplangate tool {info.name}, effect {_EFFECT_WORDS[info.effect]}; each call "
        f"is a one-step guarded run on Temporal. {contract_words(info)} {waits} "
        f"Pass _meta['{REQUEST_ID_META}'] (a string you choose) so a retried call is answered "
        f"by its first run, never applied again."
    )


@dataclass(frozen=True)
class GuardedCall:
    tool: str
    args: dict[str, JsonValue]
    request_id: str | None

    @classmethod
    def of(cls, tool: str, args: Mapping[str, Any] | None, meta: Mapping[str, Any] | None
           ) -> GuardedCall:
        rid = (meta or {}).get(REQUEST_ID_META)
        if rid is not None and (not isinstance(rid, str) or not 1 <= len(rid) <= 200):
            raise ValueError(f"_meta['{REQUEST_ID_META}'] must be a string of 1 to 200 characters")
        return cls(tool, dict(args or {}), rid)

    def run_id(self, client: str) -> str:
        """The run this call is: derived from the client, its request identity, the tool and
        its arguments (the same request retried by the same client is the same run; another
        call under a reused identity, or another client's call, is another run), or new when
        the call has no identity. Ids beginning ``mcp-`` are this server's alone."""
        if self.request_id is None:
            return f"{RUN_PREFIX}{self.tool}-{uuid.uuid4().hex[:16]}"
        canonical = json.dumps([client, self.request_id, self.tool, self.args], sort_keys=True,
                               separators=(",", ":"), ensure_ascii=False)
        return f"{RUN_PREFIX}{self.tool}-{hashlib.sha256(canonical.encode()).hexdigest()[:24]}"

    def plan(self, info: ToolInfo) -> dict[str, Any]:
        return {
            "goal": f"{self.tool} called over MCP",
            "budget": {"replans_max": 0},  # one call: nothing to re-plan toward
            "steps": [{"n": 1, "tool": self.tool, "effect": info.effect.value,
                       "args": self.args}],
        }


def settled(rep: RunReport) -> bool:
    """Nothing more will happen without a person or the world: ended, or waiting for an
    answer to a card."""
    return rep.status.final or rep.status is RunStatus.AWAITING_APPROVAL


async def follow(
    report: Callable[[str], Awaitable[RunReport]],
    result: Callable[[str], Awaitable[RunReport]],
    run_id: str, within_s: float, every_s: float = 0.25,
) -> RunReport:
    """The run's report once it has settled, or as it is after ``within_s`` seconds. Its end
    is awaited (Temporal's long poll: answered the moment it ends); its report is read every
    ``every_s`` seconds meanwhile, for a card that waits."""
    ended = asyncio.ensure_future(result(run_id))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    try:
        while not ended.done():
            rep = await report(run_id)
            if settled(rep) or loop.time() >= deadline:
                return rep
            await asyncio.wait([ended], timeout=min(every_s, max(0.0, deadline - loop.time())))
        return ended.result()
    finally:
        ended.cancel()


def _step(rep: RunReport) -> StepReport | None:
    return rep.steps[-1] if rep.steps else None


def pending_card(rep: RunReport) -> dict[str, Any] | None:
    """The card the run waits on: what a person must approve, and the line that does it."""
    for a in rep.approvals:
        if a.status.value == "pending":
            return {
                "step": a.step, "digest": a.digest, "expires_at": a.expires_at.isoformat(),
                "effect": a.card.effect.value, "tool": a.card.tool, "args": a.card.args,
                "approve_with": f"{plangate_command()} approve {rep.run_id} --step {a.step} "
                                f"--digest {a.digest}",
            }
    return None


def outcome(rep: RunReport) -> dict[str, Any]:
    """The call's answer: its run and tool, the run's status, the step's state and result,
    the card it waits on (the exact call a person is asked to approve), and the effect's
    signed receipt."""
    step = _step(rep)
    return {
        "run_id": rep.run_id,
        "tool": step.tool if step else None,
        "status": rep.status.value,
        "state": step.state.value if step else None,
        "result": step.result if step else None,
        "binds": step.binds if step else {},
        "reason": (not_replanned(rep, step) or step.reason) if step else "",
        "failure": None if rep.failure is None else json.loads(rep.failure.model_dump_json()),
        "awaiting": pending_card(rep),
        # the effect's signed receipt (``plangate receipt verify``), where the worker signs them
        "receipt": step.ledger.receipt if step and step.ledger else None,
    }


def who_approves(approvers: Sequence[str]) -> str:
    """Who may run the approve line, and which key it signs with: the approvers this
    deployment lists, or where they are listed when this server is not told."""
    if approvers:
        names = ", ".join(approvers)
        who = f"one of this deployment's approvers ({names})"
    else:
        who = "an approver the deployment's workers list (PLANGATE_APPROVERS)"
    return (f"run by {who}; it signs with the first key of PLANGATE_APPROVER_KEY, and --as "
            "NAME picks another of them")


def summary(rep: RunReport, approvers: Sequence[str] = ()) -> str:
    """The answer in words; a card that waits with the line that approves it and who may run
    it (``approvers``: the names the deployment lists)."""
    out = outcome(rep)
    if rep.status is RunStatus.SUCCEEDED:
        return f"run {rep.run_id}: succeeded ({out['state']})"
    if rep.status is RunStatus.AWAITING_APPROVAL and out["awaiting"]:
        card = out["awaiting"]
        args = json.dumps(card["args"], sort_keys=True, ensure_ascii=False)
        return (
            f"run {rep.run_id} waits for a credentialed approver to allow {card['tool']} "
            f"{args} (step {card['step']}, effect {card['effect']}): {card['approve_with']}, "
            f"{who_approves(approvers)}. This client cannot approve; follow the run with "
            "run_report."
        )
    if not rep.status.final:
        return f"run {rep.run_id}: {rep.status.value}; follow it with run_report"
    failure = rep.failure
    why = f": {failure.code} {failure.detail}" if failure else ""
    return f"run {rep.run_id}: {rep.status.value}{why}"


def call_result(rep: RunReport, approvers: Sequence[str] = ()) -> CallToolResult:
    """The MCP answer of a settled (or still running) run: an error result when it ended
    without succeeding, a plain one otherwise (a run that waits is not an error)."""
    failed = rep.status.final and rep.status is not RunStatus.SUCCEEDED
    return CallToolResult(
        content=[TextContent(type="text", text=summary(rep, approvers))],
        structured_content=outcome(rep),
        is_error=failed,
    )
