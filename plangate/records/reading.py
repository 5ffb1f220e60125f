"""A read answered without a run (``plangate mcp``'s fast path for a tool the deployment's
catalogue declares ``read``): what the front sends the worker's standalone activity
(``activities.reading``), and what it answers.

The request carries the one-step plan and its signed submission, as a run's input does; never
what guards it. The worker answers with the call's report, shaped as a run's, or says why a
run must answer instead (``run``: anything but a plain, guarded, successful read). A report
names the call it answers (``Asked``: the activity's id, the tool, a digest of the arguments),
and the front takes none that names another (``ReadAnswer.refusal``): whoever else can start
or answer an activity in the namespace cannot hand the front another call's answer."""

from __future__ import annotations

import hashlib

from plangate.plans._base import Model
from plangate.plans.limits import canonical_json
from plangate.plans.model import Plan
from plangate.records.proofs import Submission
from plangate.records.report import RunReport


class ReadCall(Model):
    plan: Plan  # one step of one tool, as ``plangate mcp`` makes it
    submission: Submission | None = None


class Asked(Model):
    """The call a read answers, as the worker read it: the activity's id (Temporal's word,
    ``activity.info()``), the step's tool and the SHA-256 of its arguments (canonical JSON)."""

    call_id: str
    tool: str
    args_sha256: str

    @classmethod
    def of(cls, call_id: str, plan: Plan) -> Asked | None:
        """The call ``plan`` is under ``call_id`` (None: the plan is not one step)."""
        if len(plan.steps) != 1:
            return None
        (step,) = plan.steps
        return cls(call_id=call_id, tool=step.tool,
                   args_sha256=hashlib.sha256(canonical_json(step.args)).hexdigest())


class ReadAnswer(Model):
    """``report``: the call answered (it succeeded), ``asked`` the call it answers; else
    ``run`` says why a run must answer it (the worker's word: a tool that is no read here, a
    refusal, a card, a failure)."""

    report: RunReport | None = None
    run: str = ""
    asked: Asked | None = None

    def refusal(self, call_id: str, plan: Plan) -> str | None:
        """Why this report is no answer to the call ``plan`` under ``call_id`` (None: it is,
        or there is no report to take)."""
        if self.report is None:
            return None
        want = Asked.of(call_id, plan)
        if want is None or self.asked is None:
            return "it names no call"
        if self.asked != want:
            got = self.asked
            return (f"it answers {got.tool} (arguments {got.args_sha256[:12]}) under "
                    f"{got.call_id!r}, not {want.tool} (arguments {want.args_sha256[:12]}) "
                    f"under {call_id!r}")
        rep = self.report
        if rep.run_id != call_id or [s.tool for s in rep.steps] != [want.tool]:
            return (f"its report is of {rep.run_id!r} ({', '.join(s.tool for s in rep.steps)}), "
                    f"not of {call_id!r} ({want.tool})")
        return None
