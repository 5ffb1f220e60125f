"""A step's first read (its skip check, then its pre conditions), as one value.

The step reads it itself, or the call before it reads it ahead of it: the guards' activity for a
run's first steps, or the step before's post check (in its tool's activity right after the call,
or in the workflow's own read). Whichever call makes it computes it once, where it is scheduled,
and the answer is paired with it (``answered``): the step takes it as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ConfigDict, Field

from plangate.plans._base import Model
from plangate.plans.guards import StepGuard, skip_check, version_condition
from plangate.plans.model import Condition, Step
from plangate.records.calls import ProbeReport


class ReadAhead(Model):
    model_config = ConfigDict(defer_build=True, frozen=True)

    n: int  # the step it is for
    conditions: list[Condition]  # the skip check first, then the pre conditions read here
    skip: int = 0  # how many of ``conditions`` are the skip check
    # conditions (by key) read only as evidence to skip: arguments that do not fit them are
    # "no evidence" (``ProbeRequest.lenient``)
    lenient: list[str] = Field(default_factory=list)
    # pre conditions (by key) left out here: read at the step's call, which acts only if they
    # hold (a read just before would only repeat it)
    at_call: list[str] = Field(default_factory=list)
    report: ProbeReport | None = None  # what ``conditions`` read, in their order

    @classmethod
    def whole(
        cls, step: Step, g: StepGuard, args: Mapping[str, Any], pre: list[Condition],
        post: list[Condition],
    ) -> ReadAhead:
        """What the step reads before its call: the skip check (every post condition and the
        evidence that this call's effect is in place), then every pre condition."""
        done = skip_check(step, g, args, post)
        return cls(
            n=step.n, conditions=done + pre, skip=len(done),
            lenient=[c.key() for c in done[len(post):]],
        )

    @classmethod
    def fused(
        cls, step: Step, g: StepGuard, args: Mapping[str, Any], pre: list[Condition],
        post: list[Condition],
    ) -> ReadAhead:
        """The step's first read as the step before's post check makes it: the skip check and,
        of the pre conditions, only the version the call will carry; the others are left to
        the call. A step a person approves reads them all before its card is shown."""
        whole = cls.whole(step, g, args, pre, post)
        if g.approval:
            return whole
        version = version_condition(g, args)
        kept = [c for c in pre if version is not None and c.key() == version.key()]
        conditions = whole.conditions[: whole.skip] + kept
        read = {c.key() for c in conditions}
        left = [c.key() for c in pre if c.key() not in read]
        return whole.model_copy(update={"conditions": conditions, "at_call": left})

    def answered(self, report: ProbeReport) -> ReadAhead:
        """This read with what it read (``report``: one result a condition, in order)."""
        return self.model_copy(update={"report": report})
