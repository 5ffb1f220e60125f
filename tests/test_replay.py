"""Every recorded history replays against the current workflow code: a change that would break
a running workflow fails here (ship it as ``docs/versioning.md`` says instead). Every file in
``tests/histories/`` is replayed, and each is a path named below: a file no path names, or a
path with no file, fails the test."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from plangate.records.interface import ENDED_ERRORS
from plangate.records.report import Phase, RunReport, StepState
from plangate.testing import local_activity, payload_json
from plangate.worker.assembly import PlangateWorkerPlugin
from plangate.worker.compression import DATA_CONVERTER
from plangate.workflows.context import BOUND_PATCH, INDEX_PATCH, KEPT_PATCH
from plangate.workflows.granting import GRANTS_PATCH
from plangate.workflows.sealing import CHILD_SEAL_PATCH

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


E = EventType
# Every path a plan run can take, recorded (``tests/histories/record.py``): how the run ended
# (its own report, or continued as new) and an event the path must have.
PATHS: dict[str, tuple[str, EventType.ValueType]] = {
    "saturday_succeeded": ("succeeded", E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED),
    # the export deleted: found so by the first read, made with the guards; the rest void
    "saturday_export_deleted": ("failed", E.EVENT_TYPE_MARKER_RECORDED),
    # re-planned: the money and external steps of the new version waited for fresh cards
    "closeout_replanned": ("succeeded", E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED),
    "closeout_replanned_replan1": ("", E.EVENT_TYPE_MARKER_RECORDED),
    # the same once the child's start is sealed (issue 46): its patch marker recorded
    "closeout_replanned_sealed": ("succeeded", E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED),
    "closeout_replanned_sealed_replan1": ("", E.EVENT_TYPE_MARKER_RECORDED),
    "halted": ("halted", E.EVENT_TYPE_MARKER_RECORDED),
    # a wait (timers with summaries) ran out, the step halted, and the execution failed with
    # the report in the failure's details
    "halted_after_wait": ("halted", E.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED),
    "waited": ("succeeded", E.EVENT_TYPE_TIMER_FIRED),
    # a signed approval, upserting plangate's search attributes as the card waits; the card
    # issued after a timer (its times replay the same) and kept in the run's memo while it
    # waits (the card list reads it), the calls' windows put there as it ends
    "approved": ("succeeded", E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED),
    # the worker asked who is an approver now where each answer is recorded; a revoked one's
    # Update failed, then an approval was recorded
    "approved_current_approvers": ("succeeded", E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED),
    "rejected": ("failed", E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED),
    "cancelled": ("cancelled", E.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED),
    # a wait beside a card, both parked twice; the card approved in a later run
    "continued_as_new_run1": ("continued", E.EVENT_TYPE_TIMER_FIRED),
    "continued_as_new_run2": ("continued", E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED),
    "continued_as_new_run3": ("succeeded", E.EVENT_TYPE_MARKER_RECORDED),
    # a write whose every attempt failed without an answer, tried again
    "lost_write_retried": ("succeeded", E.EVENT_TYPE_ACTIVITY_TASK_FAILED),
    # a final failure that voided at once the step another one waited for
    "voided_at_failure": ("failed", E.EVENT_TYPE_MARKER_RECORDED),
    # reads made in the tools' activities, at and after each call
    "reads_in_call": ("succeeded", E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED),
    # a call its activity refused: the world moved after the workflow's read
    "refused_at_call": ("failed", E.EVENT_TYPE_ACTIVITY_TASK_FAILED),
    # a pre condition first read at the call, refused there: a failed pre check
    "pre_failed_at_call": ("failed", E.EVENT_TYPE_ACTIVITY_TASK_FAILED),
    # a raw start with no submitter's signature, on a deployment that lists its submitters
    "refused_unsigned": ("halted", E.EVENT_TYPE_MARKER_RECORDED),
    # issue 47: the windows row failed (a bug), the run ended as its steps went; a tool's
    # system away (a wait, then the call once); the guards asked again after an outage
    "windows_kept": ("succeeded", E.EVENT_TYPE_MARKER_RECORDED),
    "tool_outage_waited": ("succeeded", E.EVENT_TYPE_TIMER_FIRED),
    "guards_waited": ("succeeded", E.EVENT_TYPE_TIMER_FIRED),
    # issue 48: a credit whose amount was bound decided again, bound: a card, then the call
    "bound_decided": ("succeeded", E.EVENT_TYPE_MARKER_RECORDED),
    # issue 50: the run's row in the runs index written at each change (``index.record``)
    "runs_indexed": ("succeeded", E.EVENT_TYPE_MARKER_RECORDED),
    # issue 51: a credit covered by a standing grant (``grant.cover``): no card
    "granted": ("succeeded", E.EVENT_TYPE_MARKER_RECORDED),
}


# the patches since the baseline (docs/versioning.md), each with the history of its new branch
PATCHED = {
    # issue 46: Replan runs only as the child of a plangate run that sealed its start
    "closeout_replanned_sealed_replan1": [CHILD_SEAL_PATCH],
    # issue 47: bookkeeping that fails no run, outages waited out
    "windows_kept": [KEPT_PATCH],
    "tool_outage_waited": [KEPT_PATCH],
    "guards_waited": [KEPT_PATCH],
    # issue 48: a step bound after its guards decided again (implies issue 47's)
    "bound_decided": [BOUND_PATCH],
    # issue 50: the runs index written as the run changes (implies issue 48's)
    "runs_indexed": [INDEX_PATCH],
    # issue 51: a standing grant asked where a card would be published
    "granted": [INDEX_PATCH, GRANTS_PATCH],
}


def load(path: Path) -> WorkflowHistory:
    record = json.loads(path.read_text())
    return WorkflowHistory.from_json(record["workflow_id"], record["history"])


async def ending(history: WorkflowHistory) -> RunReport | str:
    last = history.events[-1]
    if last.event_type == E.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
        return "continued"
    if last.event_type == E.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
        failure = last.workflow_execution_failed_event_attributes.failure
        if failure.application_failure_info.type not in ENDED_ERRORS:
            return E.Name(last.event_type)
        payloads = failure.application_failure_info.details.payloads
    elif last.event_type != E.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
        return E.Name(last.event_type)
    else:
        payloads = last.workflow_execution_completed_event_attributes.result.payloads
    codec = DATA_CONVERTER.payload_codec
    decoded = await codec.decode(list(payloads)) if codec else list(payloads)
    report = DATA_CONVERTER.payload_converter.from_payloads(decoded, [RunReport])[0]
    return report if isinstance(report, RunReport) else ""


def status(end: RunReport | str) -> str:
    return str(end.status) if isinstance(end, RunReport) else end


async def test_every_path_was_recorded():
    recorded = {p.stem: p for p in HISTORIES}
    assert set(recorded) == set(PATHS), (
        sorted(set(PATHS) - set(recorded)), sorted(set(recorded) - set(PATHS))
    )
    for name, (want, marker) in PATHS.items():
        history = load(recorded[name])
        assert any(e.event_type == marker for e in history.events), (name, E.Name(marker))
        if want:  # a re-planner's child ends with a proposal, not a report
            assert status(await ending(history)) == want, name
    refused = await ending(load(recorded["refused_at_call"]))
    assert isinstance(refused, RunReport)
    assert [c.phase for c in refused.step(1).checks][1:] == [Phase.AT_CALL, Phase.RE_EVALUATE]
    unread = await ending(load(recorded["pre_failed_at_call"]))
    assert isinstance(unread, RunReport) and unread.metrics.answers_412 == 0
    assert [c.phase for c in unread.step(2).checks] == [Phase.SKIP_PRE, Phase.AT_CALL, Phase.PRE]
    chained = await ending(load(recorded["reads_in_call"]))
    assert isinstance(chained, RunReport)
    assert all(Phase.AT_CALL in [c.phase for c in s.checks] for s in chained.steps)
    early = await ending(load(recorded["voided_at_failure"]))
    assert isinstance(early, RunReport) and early.step(2).state == StepState.VOID
    voided = await ending(load(recorded["saturday_export_deleted"]))
    assert isinstance(voided, RunReport)
    assert [s.state for s in voided.steps].count(StepState.VOID) >= 1
    signed = await ending(load(recorded["approved"]))
    assert isinstance(signed, RunReport) and signed.approvals[0].answer is not None
    assert signed.approvals[0].answer.proof is not None
    upserts = [e for e in load(recorded["approved"]).events
               if e.event_type == E.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES]
    assert upserts, "approved: no search attributes upserted"
    fresh = await ending(load(recorded["closeout_replanned"]))
    assert isinstance(fresh, RunReport)
    assert {(a.plan_version, a.card.tool) for a in fresh.approvals} == {
        (2, "billing.issue_credit"), (2, "email.send")}
    unsigned = await ending(load(recorded["refused_unsigned"]))
    assert isinstance(unsigned, RunReport) and unsigned.failure is not None
    assert unsigned.failure.code == "not_permitted"
    # the baseline (baseline-39) asks no patch: no history records a patch marker or an upsert
    # of the SDK's TemporalChangeVersion, but the new branch of each patch since (PATCHED)
    for name, path in recorded.items():
        events = load(path).events
        assert patch_ids(events) == PATCHED.get(name, []), name
        # the SDK upserts TemporalChangeVersion with a patch, where the namespace has it
        # (one upsert a patch, each with those before it)
        asked = PATCHED.get(name, [])
        assert change_versions(events) in ([], [asked[:i + 1] for i in range(len(asked))]), name
    # a run that did not succeed fails its execution: a summary on every timer, the failure's
    # message
    truthful = load(recorded["halted_after_wait"]).events
    timers = [json.loads(e.user_metadata.summary.data) for e in truthful
              if e.event_type == E.EVENT_TYPE_TIMER_STARTED]
    assert timers == [f"step 1 reads the world again in 1 s (read {i} of at most 3)"
                      for i in (1, 2)]
    failure = truthful[-1].workflow_execution_failed_event_attributes.failure
    assert failure.application_failure_info.type == "PlanHalted"
    assert failure.message.startswith("halted at step 1 (warehouse.run_sql, postcondition_unmet)")
    halted = load(recorded["halted"]).events[-1]
    assert halted.event_type == E.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED
    # the card put in the memo while it waited, then taken out; at the end, the calls' windows
    memo = load(recorded["approved"])
    modified = [e.workflow_properties_modified_event_attributes.upserted_memo.fields
                for e in memo.events if e.event_type == E.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED]
    assert [list(f) for f in modified] == [
        ["plangate.cards"], ["plangate.cards"], ["plangate.windows"]]
    added, removed = (f["plangate.cards"] for f in modified[:2])
    windows = payload_json(modified[2]["plangate.windows"])
    assert [c["tool"] for c in windows["calls"]] == ["s3.put"]
    assert windows["status"] == "succeeded" and windows["execution"] == payload_json(
        added)["execution"]
    started = memo.events[0].workflow_execution_started_event_attributes
    assert payload_json(added)["execution"] == started.original_execution_run_id
    assert removed.metadata["encoding"] == b"binary/null"
    # a timer fired before the card went into the memo (the card issued after it)
    def first(events: Sequence[HistoryEvent], kind: EventType.ValueType) -> int:
        return next((e.event_id for e in events if e.event_type == kind), len(events) + 1)

    def card_timer_first(events: Sequence[HistoryEvent]) -> bool:
        carded = first(events, E.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED)
        fired = [e for e in events if e.event_type == E.EVENT_TYPE_TIMER_STARTED
                 and json.loads(e.user_metadata.summary.data) == "step 1 issues its approval card"]
        return len(fired) == 1 and fired[0].event_id < first(
            events, E.EVENT_TYPE_TIMER_FIRED) < carded

    assert card_timer_first(memo.events)
    # the worker asked who is an approver now once per answer; the revoked approver's Update
    # failed, nothing recorded
    current = load(recorded["approved_current_approvers"]).events
    asked = [la["activity_type"] for e in current if (la := local_activity(e)) is not None]
    assert asked.count("guard.approvers") == 2
    outcomes = [e.workflow_execution_update_completed_event_attributes.outcome for e in current
                if e.event_type == E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED]
    assert [o.HasField("success") for o in outcomes] == [False, True]
    assert outcomes[0].failure.message == (
        "'fuzz' is not an approver of this deployment (PLANGATE_APPROVERS)")
    answered = await ending(load(recorded["approved_current_approvers"]))
    assert isinstance(answered, RunReport) and answered.approvals[0].answer is not None
    assert answered.approvals[0].answer.by == "bench"
    # a standing grant stood for the card: none published, the step names the grant
    covered = await ending(load(recorded["granted"]))
    assert isinstance(covered, RunReport) and covered.approvals == []
    assert covered.steps[0].grant is not None and covered.steps[0].grant.approver == "bench"
    # the chain: each run after the first continued from the one before
    runs = [load(recorded[f"continued_as_new_run{i}"]) for i in (1, 2, 3)]
    for before, after in itertools.pairwise(runs):
        this = before.events[0].workflow_execution_started_event_attributes
        nxt = after.events[0].workflow_execution_started_event_attributes
        assert nxt.continued_execution_run_id == this.original_execution_run_id


def patch_ids(events: Sequence[HistoryEvent]) -> list[str]:
    """The patches a history's markers record, in order."""
    return [json.loads(m.marker_recorded_event_attributes.details["patch-data"].payloads[0]
                       .data)["id"] for m in events
            if m.event_type == E.EVENT_TYPE_MARKER_RECORDED
            and m.marker_recorded_event_attributes.marker_name == "core_patch"]


def change_versions(events: Sequence[HistoryEvent]) -> list[list[str]]:
    """What each upsert of TemporalChangeVersion (the SDK's, one a patch) set."""
    return [json.loads(f["TemporalChangeVersion"].data) for f in (
        e.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
        for e in events if e.event_type == E.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES)
        if "TemporalChangeVersion" in f]


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_replay(path: Path):
    history = await asyncio.to_thread(load, path)
    replayer = Replayer(workflows=[], plugins=[PlangateWorkerPlugin()])
    await replayer.replay_workflow(history)
