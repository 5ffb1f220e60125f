"""A step's answer in words that say what happened. The router answers a failure it cannot
route around with "re-plan"; when the run then makes none (its plan allows none, its re-plans
are spent, it ended first), the step is told as it ended and why, not as a re-plan to come."""

from __future__ import annotations

from plangate.records.report import Answer, RunReport, StepReport


def answer_words(rep: RunReport, step: StepReport) -> str:
    """``replan: <reason>``, ``wait: <reason>``, ...; the reason alone with no answer; a
    re-plan never asked for as :func:`not_replanned` says it."""
    if step.answer is None:
        return step.reason
    return not_replanned(rep, step) or f"{step.answer}: {step.reason}"


def not_replanned(rep: RunReport, step: StepReport) -> str | None:
    """``failed (<code>); not re-planned: <why>`` for a step answered "re-plan" in a run that
    ended without asking for one after it; else None."""
    if step.answer is not Answer.REPLAN or not rep.status.final or _asked(rep, step):
        return None
    f = rep.failure
    mine = f is not None and (f.step, f.plan_version) == (step.n, step.plan_version)
    ended = step.state.value.lower()  # failed, or halted for a person
    head = f"{ended} ({f.code})" if f is not None and mine else ended
    if rep.replans_max == 0:
        why = "the plan allows none (budget.replans_max 0)"
    elif rep.replans_used >= rep.replans_max:
        why = f"the run's {rep.replans_max} re-plans were spent"
    else:
        why = f"the run ended first ({rep.status.value})"
    return f"{head}; not re-planned: {why}"


def _asked(rep: RunReport, step: StepReport) -> bool:
    return any((r.after_step, r.after_version) == (step.n, step.plan_version)
               for r in rep.replans)
