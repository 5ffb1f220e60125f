"""What the Temporal UI and visibility show of a run: its status as the current details (no
command) and, where the namespace has them registered, as search attributes, upserted when
they change (one command each)."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from plangate.records import visibility
    from plangate.records.report import RunReport, RunStatus

Seen = tuple[RunStatus, int, int]


def seen(r: RunReport) -> Seen:
    return (r.status, r.plan_version, r.replans_used)


class Shown:
    def __init__(self, goal: str) -> None:
        self.goal = visibility.short_goal(goal)
        self.upserts = False  # the run upserts its search attributes (``begin``)
        self.last: Seen | None = None
        self.upserted: visibility.Values | None = None

    def begin(self, upserts: bool) -> None:
        """``upserts``: the namespace has the attributes registered, and the run's code sets
        them. What the client (or the run before, for a run that continued as new) set
        already is not set again."""
        self.upserts = upserts
        self.upserted = visibility.current(workflow.info().typed_search_attributes)

    def changed(self, r: RunReport) -> bool:
        return seen(r) != self.last

    def show(self, r: RunReport) -> None:
        now = seen(r)
        if now == self.last:
            return
        self.last = now
        workflow.set_current_details(
            f"**{r.status.value}** · plan version {r.plan_version} · re-plans "
            f"{r.replans_used} of {r.replans_max}"
        )
        if not self.upserts:
            return
        self._upsert(visibility.values(r.status, self.goal))

    def hand_over(self) -> None:
        """This execution continues as new: its attributes say so (``continued``, waiting for
        no one), so that a query for the runs awaiting approval finds the execution that holds
        the card, not every one the run went through."""
        if self.upserts:
            changes = visibility.updates((visibility.CONTINUED, self.goal, False), self.upserted)
            if changes:
                workflow.upsert_search_attributes(changes)

    def _upsert(self, values: visibility.Values) -> None:
        changes = visibility.updates(values, self.upserted)
        if changes:
            workflow.upsert_search_attributes(changes)
            self.upserted = values
