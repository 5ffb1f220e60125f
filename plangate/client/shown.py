"""What an approver signs: the card a plangate run of this deployment publishes for the step,
fetched from the run before any answer is signed. A digest the run does not publish there, or
a workflow that is not a plangate run of this deployment, is refused (``AnswerRefused``):
nothing is signed, nothing sent. So an answer line relayed by someone else signs only a card
its approver was shown (``signing_lines``), never a digest of a card shown nowhere."""

from __future__ import annotations

from datetime import UTC, datetime

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowQueryFailedError

from plangate.client import reports
from plangate.client.answers import ended
from plangate.client.command import plangate_command
from plangate.client.errors import AnswerRefused, NoWorkerAnswered, RunEnded
from plangate.client.handles import description
from plangate.client.pending import PendingCard
from plangate.errors import RunError
from plangate.plans.words import many
from plangate.records import placement, visibility
from plangate.records.approvals import CardStatus
from plangate.records.interface import PLAN_RUN
from plangate.records.report import RunReport
from plangate.world.settings import Settings


async def published(
    client: Client, settings: Settings, run_id: str, step: int, digest: str
) -> PendingCard:
    """The card of ``step`` that run ``run_id`` waits on, whose digest is ``digest``."""
    queue = settings.temporal.task_queue
    desc = await description(client, run_id)  # UnknownRun
    kind = desc.workflow_type
    ours = kind == PLAN_RUN and placement.of_deployment(desc.task_queue, queue)
    if kind != PLAN_RUN:  # a team's workflow plangate guards names the deployment it answers to
        sa = desc.typed_search_attributes
        goal = sa.get(visibility.GOAL)
        ours = sa.get(visibility.STATUS) is not None and visibility.names(goal, queue)
    rep: RunReport | None = None
    if kind != PLAN_RUN and not ours and desc.status == WorkflowExecutionStatus.RUNNING:
        # not listed (no search attributes): its guard's report names the deployment
        rep = await _report(client, settings, run_id, kind)
        ours = visibility.names(rep.goal, queue)
    if not ours:
        raise AnswerRefused(
            f"run {run_id!r} is not a plangate run of this deployment (task queue {queue}): "
            f"a {kind} workflow on task queue {desc.task_queue}; nothing signed")
    if desc.status != WorkflowExecutionStatus.RUNNING:
        raise await ended(client, settings, run_id, step, digest)
    rep = rep or await _report(client, settings, run_id, kind)
    if rep.status.final:
        raise RunEnded(f"run {run_id!r} has ended ({rep.status.value}): no card waits")
    waiting = [a for a in rep.approvals
               if a.status is CardStatus.PENDING and a.plan_version == rep.plan_version]
    record = next((a for a in reversed(waiting) if a.step == step), None)
    latest = next((a for a in reversed(rep.approvals)
                   if a.step == step and a.plan_version == rep.plan_version), None)
    if record is None and latest is not None:  # as the run says it (``workflows.answers``)
        done = latest.answer.decision if latest.answer else latest.status
        raise AnswerRefused(f"the card of step {step} is no longer waiting: {done}; nothing "
                            "signed")
    if record is None:
        others = sorted({a.step for a in waiting})
        said = f" (cards wait at step {', '.join(map(str, others))})" if others else ""
        raise AnswerRefused(
            f"no card of step {step} waits for an answer on run {run_id!r}{said}; nothing signed")
    card = record.card
    if (card.digest() != record.digest or card.run_id != run_id or card.step != step
            or card.plan_version != record.plan_version):
        raise AnswerRefused(
            f"the card run {run_id!r} shows for step {step} is not the card its digest is of "
            "(another run, step or content); nothing signed")
    if record.digest != digest:
        # never the card's own digest: what the approver signs is what status shows them
        raise AnswerRefused(
            f"the digest given is not that of the card step {step} of run {run_id!r} waits on "
            f"(`{plangate_command()} status {run_id}` shows the card and its digest); "
            "nothing signed")
    return PendingCard(run_id=run_id, goal=rep.goal, record=record)


async def _report(client: Client, settings: Settings, run_id: str, kind: str) -> RunReport:
    """The run's own report; a workflow that has no report query is no plangate run, and a
    report this client cannot read (not a report; written under an encryption key it does not
    hold) shows nobody a card."""
    try:
        return await reports.report(client, settings, run_id)
    except WorkflowQueryFailedError as e:
        raise AnswerRefused(
            f"run {run_id!r} is not a plangate run: its {kind} workflow does not answer "
            f"plangate's report query ({e}); nothing signed") from None
    except NoWorkerAnswered as e:
        if kind == PLAN_RUN:
            raise
        # a workflow of another type that shows no report names no deployment: none of ours
        raise AnswerRefused(
            f"run {run_id!r} is not a plangate run: its {kind} workflow does not answer "
            f"plangate's report query ({e}); nothing signed") from None
    except ValueError as e:
        if isinstance(e, RunError):
            raise
        raise AnswerRefused(
            f"the report of run {run_id!r} cannot be read here ({type(e).__name__}: "
            f"{str(e).splitlines()[0] if str(e) else '-'}), so its card cannot be shown; "
            "nothing signed") from None


def signing_lines(shown: PendingCard, decision: str, now: datetime | None = None) -> list[str]:
    """What an answer to ``shown`` signs, readably (each line made ``visible`` by whoever
    prints it): the run, the step, the call with its arguments, who it acts for, what the
    probes observed, the policy, the digest and the expiry."""
    a, c = shown.record, shown.record.card
    left = int((a.expires_at - (now or datetime.now(UTC))).total_seconds())
    args = ", ".join(f"{k}={v!r}" for k, v in c.args.items())
    lines = [
        f"plangate: {decision} signs this card of run {shown.run_id} ({shown.goal}):",
        f"  step {a.step} of plan version {a.plan_version}: will call {c.tool}({args}) "
        f"[{c.effect}]",
        f"  on behalf of {c.on_behalf_of or '-'}, policy {c.policy_bundle or '-'}",
    ]
    lines += [f"  observed {claim}: {seen}" for claim, seen in c.observed.items()]
    if c.policy is not None:
        lines.append(f"  asked by the policy {', '.join(c.policy.policies) or '-'}: "
                     f"{many(c.policy.approvers, 'distinct approver')}")
    lines += [f"  approved by {x.by} at {x.at.isoformat()}" for x in a.approvals]
    lines.append(f"  digest {a.digest}, expires at {a.expires_at.isoformat()} "
                 f"(in {max(left, 0)} s)")
    return lines
