"""A read answered without a run (``plangate mcp``'s fast path for a tool the deployment's
catalogue declares ``read``): what the front sends the worker's standalone activity
(``activities.reading``), and what it answers.

The request carries the one-step plan and its signed submission, as a run's input does; never
what guards it. The worker answers with the call's report, shaped as a run's, or says why a
run must answer instead (``run``: anything but a plain, guarded, successful read)."""

from __future__ import annotations

from plangate.plans._base import Model
from plangate.plans.model import Plan
from plangate.records.proofs import Submission
from plangate.records.report import RunReport


class ReadCall(Model):
    plan: Plan  # one step of one tool, as ``plangate mcp`` makes it
    submission: Submission | None = None


class ReadAnswer(Model):
    """``report``: the call answered (it succeeded); else ``run`` says why a run must answer
    it (the worker's word: a tool that is no read here, a refusal, a card, a failure)."""

    report: RunReport | None = None
    run: str = ""
