"""How a client addresses a plan run through Temporal, by name: the workflow type, its query,
Updates and signals. A client uses these, never the workflow's class, so it loads no workflow
code (``tests/test_client.py`` holds them to the workflow's own definitions)."""

from __future__ import annotations

PLAN_RUN = "PlanRun"  # the workflow type, as Temporal visibility lists it
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
