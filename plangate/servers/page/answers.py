"""What became of the answers given on the page: the step's state (an approval) or the run's
(a rejection), read from the run's report, and the last few answers, listed with the cards."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import cast

from plangate.client.api import PendingApprovals, Plangate
from plangate.records.approvals import ApprovalDecision
from plangate.records.report import RunReport, StepReport

RECENT_MAX = 10  # answers given here, listed with what became of them


@dataclass(frozen=True)
class Given:
    """An answer given on this page, to say later what became of it."""

    run_id: str
    step: int
    digest: str
    decision: ApprovalDecision
    by: str
    at: datetime


def _step_of(rep: RunReport, given: Given) -> StepReport | None:
    version = next((a.plan_version for a in rep.approvals if a.digest == given.digest),
                   rep.plan_version)
    try:
        return rep.step(given.step, version)
    except KeyError:
        return None


def what_next(rep: RunReport, given: Given) -> tuple[str, bool]:
    """What became of an answer, in a sentence (approved: the step's state first; rejected:
    the run's), and whether it has settled (nothing more will happen to it by itself)."""
    step = _step_of(rep, given)
    state = step.state if step is not None else None
    run = f"the run is {rep.status}"
    if rep.failure is not None:
        run += f" ({rep.failure.code}{': ' + rep.failure.detail if rep.failure.detail else ''})"
    newer = any(a.step == given.step and a.digest != given.digest and a.answer is None
                and a.status == "pending" for a in rep.approvals)
    if step is None:
        text = f"step {given.step} is not in the run's report; {run}"
    else:
        said = f"step {step.n} ({step.tool}) is {state}"
        if step.reason and state is not None and state.final and state != "DONE":
            said += f": {step.reason}"
        if newer:
            said += " (what its probes observe changed: a new card waits)"
        text = (f"{said}; {run}" if given.decision is ApprovalDecision.APPROVE
                else f"{run}; {said}")
    settled = rep.status.final or newer or (state is not None and state.final)
    return text, settled


@dataclass
class Answers:
    """The answers given here, newest first, read again when the cards are listed."""

    api: Plangate
    recent: deque[Given] = field(default_factory=lambda: deque(maxlen=RECENT_MAX))

    async def became(self, given: Given, wait_s: float = 0.0) -> str:
        """What became of an answer; waits up to ``wait_s`` for it to settle."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                rep = await asyncio.wait_for(self.api.report(given.run_id), 5)
            except Exception as e:  # one unreadable run never hides the cards
                return f"the run's report could not be read ({type(e).__name__})"
            text, settled = what_next(rep, given)
            if settled or time.monotonic() >= deadline:
                return text
            await asyncio.sleep(0.25)

    async def listing(self) -> tuple[PendingApprovals, Sequence[tuple[Given, str]]]:
        """The cards waiting, and the answers given here with what became of them."""
        given = list(self.recent)
        pending, *became = await asyncio.gather(self.api.pending_approvals(),
                                                *(self.became(g) for g in given))
        return cast(PendingApprovals, pending), list(zip(given, cast(list[str], became),
                                                         strict=True))
