"""plangate's Temporal interface, by name, declared here once: the workflow types, the run's
query, Updates and signals, and every activity plangate's workflows schedule. A client uses these,
never the workflow's class, so it loads no workflow code; the workflows, activities and workers
name them from here (``tests/test_client.py`` holds them to the definitions and registrations).
Histories record these names: one changed is a history that no longer replays."""

from __future__ import annotations

PLAN_RUN = "PlanRun"  # the workflow type, as Temporal visibility lists it
REPLAN_WORKFLOW = "Replan"  # the child workflow a re-plan runs in
REPORT_QUERY = "report"  # -> RunReport
APPROVE_UPDATE = "approve"  # ApprovalAnswer -> ApprovalReceipt
REJECT_UPDATE = "reject"  # ApprovalAnswer -> ApprovalReceipt
ANSWER_SIGNAL = "answer"  # ApprovalAnswer, for a client that can only signal
CANCEL_SIGNAL = "cancel"  # CancelRequest

# A run that did not succeed fails its execution (so Temporal's own views do not show it as
# completed) with an ApplicationError of one of these types, the run report in its details.
HALTED_ERROR = "PlanHalted"
FAILED_ERROR = "PlanFailed"
CANCELLED_ERROR = "PlanCancelled"  # cancelled by the signal: Canceled cannot carry a report
ENDED_ERRORS = (HALTED_ERROR, FAILED_ERROR, CANCELLED_ERROR)
# an answer its Update's validator let through, refused when it is applied: its approver is no
# longer one
ANSWER_REFUSED_ERROR = "AnswerRefused"

# plangate's worker's activities (a tool's activity is named by the tool, from the catalogue)
GUARD_ACTIVITY = "guard.resolve"  # local: a plan's guards resolved, and its first reads
APPROVERS_ACTIVITY = "guard.approvers"  # local: who may answer a card, now
DECIDE_ACTIVITY = "guard.decide"  # local: a step's call decided with its arguments bound
PROBE_ACTIVITY = "probe.evaluate"  # local: conditions read
PROPOSE_ACTIVITY = "replanner.propose"  # local: the re-planner asked for a plan
REVIEW_ACTIVITY = "replanner.review"  # local: a proposed plan checked and its guards resolved
WINDOWS_ACTIVITY = "windows.record"  # local: an ended run's windows kept in Postgres
INDEX_ACTIVITY = "index.record"  # local: a run's status and pending cards in the runs index
GRANT_COVER_ACTIVITY = "grant.cover"  # local: a standing grant covers a call (a use reserved)
CATALOGUE_ACTIVITY = "plangate.catalogue"  # a worker's catalogue announced; never scheduled
# a standalone activity (no workflow): one read tool's call over MCP, guarded by the worker
READ_CALL_ACTIVITY = "plangate.read_call"
# the catalogue's is registered on its own poller
WORKER_ACTIVITIES = (GUARD_ACTIVITY, APPROVERS_ACTIVITY, DECIDE_ACTIVITY, PROBE_ACTIVITY,
                     PROPOSE_ACTIVITY, REVIEW_ACTIVITY, WINDOWS_ACTIVITY, INDEX_ACTIVITY,
                     GRANT_COVER_ACTIVITY)

# plangate.temporal's local activities, on a team's worker (``PlangatePlugin``)
TEAM_CHECK_ACTIVITY = "plangate.guard.check"  # the guards of a call, decided and read
TEAM_READ_ACTIVITY = "plangate.guard.read"  # conditions read (a post check)
TEAM_APPROVERS_ACTIVITY = "plangate.guard.approvers"  # who may answer a card, now
TEAM_ACTIVITIES = (TEAM_CHECK_ACTIVITY, TEAM_READ_ACTIVITY, TEAM_APPROVERS_ACTIVITY)
