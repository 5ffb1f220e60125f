"""What the Temporal UI and visibility show of a run: its status as the current details (no
command) and, where the namespace has them registered, as search attributes, upserted when
they change (one command each); and in its memo the cards it waits on (``records.cards``),
upserted when they change, so that a card list reads them in one visibility query, and at its
end its tool calls' windows (``records.windows``), so that the staleness report reads them in
the listing of finished runs."""

from __future__ import annotations

from temporalio import workflow

from plangate.records import visibility
from plangate.records.approvals import ApprovalRecord, CardStatus
from plangate.records.cards import CARDS_MEMO, CardsMemo
from plangate.records.report import RunReport, RunStatus
from plangate.records.windows import WINDOWS_MEMO, WINDOWS_MEMO_MAX, RunWindows, executions

# the pending cards' digests are in it so that a second card (the status unchanged) is shown
Seen = tuple[RunStatus, int, int, tuple[str, ...]]


def pending(r: RunReport) -> list[ApprovalRecord]:
    return [a for a in r.approvals
            if a.status is CardStatus.PENDING and a.plan_version == r.plan_version]


def seen(r: RunReport) -> Seen:
    return (r.status, r.plan_version, r.replans_used, tuple(a.digest for a in pending(r)))


class Shown:
    def __init__(self, goal: str) -> None:
        self.goal = visibility.short_goal(goal)
        self.upserts = False  # the run upserts its search attributes (``begin``)
        self.last: Seen | None = None
        self.upserted: visibility.Values | None = None
        self.memo = False  # the run keeps its pending cards in its memo (``begin``)
        self.cards: tuple[str, ...] = ()  # the digests the memo holds

    def begin(self, upserts: bool) -> None:
        """``upserts``: the namespace has the attributes registered, and the run's code sets
        them. What the client (or the run before, for a run that continued as new) set
        already is not set again."""
        self.upserts = upserts
        self.upserted = visibility.current(workflow.info().typed_search_attributes)
        self.memo = upserts  # the card list reads memos only where it can query

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
        self._cards(r)

    def _cards(self, r: RunReport) -> None:
        if not self.memo:
            return
        cards = pending(r)
        digests = tuple(a.digest for a in cards)
        if digests == self.cards:
            return
        self.cards = digests
        memo = CardsMemo(execution=workflow.info().run_id, goal=r.goal, cards=cards)
        workflow.upsert_memo({CARDS_MEMO: memo if cards else None})

    def end(self, r: RunReport) -> RunWindows:
        """The run ends (in this workflow task): its calls' windows in its memo, unless they
        are too many to keep there (the report then fetches the result); the windows."""
        info = workflow.info()
        submitted = r.submitted_at or info.start_time
        calls = executions(r, submitted, r.begun_at or submitted)
        memo = RunWindows(execution=info.run_id, run_id=r.run_id, status=r.status, calls=calls)
        if len(memo.model_dump_json()) <= WINDOWS_MEMO_MAX:
            workflow.upsert_memo({WINDOWS_MEMO: memo})
        return memo

    def hand_over(self) -> None:
        """This execution continues as new: its attributes say so (``continued``, waiting for
        no one), so that a query for the runs awaiting approval finds the execution that holds
        the card, not every one the run went through."""
        if self.upserts:
            changes = visibility.updates((visibility.CONTINUED, self.goal, False), self.upserted)
            if changes:
                workflow.upsert_search_attributes(changes)
        if self.memo and self.cards:  # the next execution shows them as its own
            workflow.upsert_memo({CARDS_MEMO: None})
            self.cards = ()

    def _upsert(self, values: visibility.Values) -> None:
        changes = visibility.updates(values, self.upserted)
        if changes:
            workflow.upsert_search_attributes(changes)
            self.upserted = values
