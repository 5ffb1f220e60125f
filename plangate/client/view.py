"""What ``plangate run --wait`` and ``plangate watch`` show while a run goes, and what
``plangate status`` prints: all of it read from the run report (the workflow's ``report``
query, polled).

On a terminal, a table updated in place (rich's ``Live``): each step's state, how long it has
taken, its tool attempts, the outcome of its last check, the answer its failure got and why;
the re-plans as they happen; each approval card with the command that answers it. Elsewhere
(a pipe, a file, a CI log) one plain line per change, then the run's summary.

Nearly all of it was written by a plan, a model or a payload (the goal, tool names, reasons,
details, a card's arguments, the run id): every line and cell is shown through
``plans.visible`` where it leaves this module (``summary``, ``PlainLines``, ``render``, whose
cells are ``Text``, never rich markup), so no escape sequence reaches the terminal.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TextIO

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.live import Live
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from plangate.client.command import plangate_command
from plangate.plans.visible import visible
from plangate.records.answered import answer_words
from plangate.records.approvals import CardStatus
from plangate.records.calls import Outcome, ProbeResult
from plangate.records.report import Phase, RunReport, RunStatus, StepReport, StepState

if TYPE_CHECKING:
    from plangate.client.api import Plangate

POLL_S = 0.5  # how often the report is read
_EPOCH = datetime.min.replace(tzinfo=UTC)

STATE_STYLES = {
    StepState.PENDING: "dim",
    StepState.AWAITING_APPROVAL: "bold yellow",
    StepState.PROBING: "cyan",
    StepState.EXECUTING: "bold cyan",
    StepState.VERIFYING: "cyan",
    StepState.DONE: "green",
    StepState.SKIPPED: "green",
    StepState.WAITING: "yellow",
    StepState.REPLANNING: "magenta",
    StepState.REPLANNED: "magenta",
    StepState.HALTED: "bold red",
    StepState.FAILED: "bold red",
    StepState.CANCELLED: "red",
    StepState.VOID: "dim",
}
STATUS_STYLES = {
    RunStatus.QUEUED: "dim",
    RunStatus.RUNNING: "cyan",
    RunStatus.AWAITING_APPROVAL: "bold yellow",
    RunStatus.SUCCEEDED: "bold green",
    RunStatus.HALTED: "bold red",
    RunStatus.CANCELLED: "red",
    RunStatus.FAILED: "bold red",
}


# -- reading the report ----------------------------------------------------------------------
def clock(seconds: float) -> str:
    """``4.2s`` under a minute, ``12:05`` under an hour, ``3:02:41`` beyond."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    h, rest = divmod(whole, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def span(seconds: float) -> str:
    """A time left, roughly: ``23.9h``, ``15.0m``, ``42s``."""
    if seconds <= 0:
        return "0s (expired)"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"


def elapsed(step: StepReport, now: datetime) -> float | None:
    """Seconds since the step left PENDING, until it ended (or until ``now``); None for a
    step that never began."""
    t = step.transitions
    if not t or step.state in (StepState.PENDING, StepState.VOID):
        return None
    end = (t[-1].last_at or t[-1].at) if step.state.final else now
    return max(0.0, (end - t[0].at).total_seconds())


def last_check(step: StepReport) -> str:
    """The outcome of the step's latest read: ``post: job_state violated (job is requested)``."""
    if not step.checks:
        return ""
    c = step.checks[-1]
    reads = f" ({c.reads} reads)" if c.reads > 1 else ""
    failed = [r for r in c.results if r.outcome is not Outcome.HOLDS]
    if c.phase is Phase.SKIP_PRE and (said := _skip_check(step, failed)):
        return said + reads
    if not failed:
        return f"{c.phase}: holds{reads}"
    r = failed[0]
    more = f" (+{len(failed) - 1})" if len(failed) > 1 else ""
    detail = f": {r.detail}" if r.detail else ""
    return f"{c.phase}: {r.condition.probe} {r.outcome}{more}{detail}{reads}"


# where a step stands once its pre conditions held: it went on to its card or its call
_PAST_PRE = {StepState.AWAITING_APPROVAL, StepState.EXECUTING, StepState.VERIFYING,
             StepState.DONE}


def _skip_check(step: StepReport, failed: list[ProbeResult]) -> str:
    """The read before a call: the skip check (is the effect already in place?), then the
    pre conditions, in one record. Its skip conditions not holding is the normal case (the
    call is made), not a violation; the pre conditions come last, so a step stopped there
    shows the last result that did not hold."""
    if step.state is StepState.SKIPPED:
        return "skip check: already holds: skipped"
    went_on = step.state in _PAST_PRE or step.attempts > 0
    if went_on:
        return "skip check: not done yet; pre: holds"
    if not failed:
        return ""
    r = failed[-1]
    detail = f": {r.detail}" if r.detail else ""
    return f"{Phase.SKIP_PRE}: {r.condition.probe} {r.outcome}{detail}"


def card_lines(rep: RunReport, now: datetime | None = None, width: int = 0) -> list[str]:
    """Each approval card readably: what will happen, to what, its digest, its expiry; a
    waiting card with the commands that answer it, each in lines of at most ``width`` (0: one
    line each; ``command``)."""
    now = now or datetime.now(UTC)
    out: list[str] = []
    for a in rep.approvals:
        c = a.card
        args = ", ".join(f"{k}={v!r}" for k, v in c.args.items())
        # a card the run ended without an answer to waits for nobody: no lines to answer it
        unanswered = a.status is CardStatus.PENDING and rep.status.final
        shown = "unanswered" if unanswered else a.status.value
        out.append(f"  card for v{a.plan_version} step {a.step}: {shown}")
        out.append(f"    will call {c.tool}({args}) [{c.effect}]")
        for claim, seen in c.observed.items():
            out.append(f"    observed {claim}: {seen}")
        if c.on_behalf_of or c.policy_bundle:
            out.append(f"    on behalf of {c.on_behalf_of or '-'}, policy {c.policy_bundle or '-'}")
        if c.policy is not None:
            p = c.policy
            asks = f"{p.approvers} distinct approver{'s' if p.approvers != 1 else ''}"
            out.append(f"    asked by the policy {', '.join(p.policies) or '-'}: {asks} "
                       f"({p.bundle})")
        out.append(f"    digest {a.digest}")
        for given in a.approvals:  # where the policy asks several distinct approvers
            out.append(f"    approved by {given.by} at {given.at.isoformat()} "
                       f"({a.approvals.index(given) + 1} of {a.needed})")
        if a.answer is not None:
            x = a.answer
            said = f": {x.reason}" if x.reason else ""
            out.append(f"    {x.decision} by {x.by or 'someone'} at {x.at.isoformat()}{said}")
        elif unanswered:
            out.append(f"    no longer waiting: the run ended ({rep.status.value})")
        elif a.status is CardStatus.PENDING:
            left = (a.expires_at - now).total_seconds()
            out.append(f"    expires in {span(left)} ({a.expires_at.isoformat()})")
            step = ["--step", str(a.step)]
            digest = ["--digest", a.digest]  # last: on a line of its own when it must wrap
            me = plangate_command()
            out += command([me, "approve", rep.run_id, *step, *digest], 4, width)
            out += command([me, "reject", rep.run_id, *step, "--reason", "TEXT", *digest], 4,
                           width)
    return out


def command(words: list[str], indent: int, width: int = 0) -> list[str]:
    """A shell command to paste, indented: one line, or where it is wider than ``width`` (0:
    no limit), lines continued with `` \\`` that break only between an option and the one
    before it, never inside a word (a digest is never split: the lines pasted work)."""
    line = " " * indent + " ".join(words)
    if not width or len(line) <= width:
        return [line]
    parts: list[str] = []  # an option with its value, or a word
    for w in words:
        if parts and parts[-1].startswith("--") and " " not in parts[-1]:
            parts[-1] += " " + w
        else:
            parts.append(w)
    lines = [" " * indent + parts[0]]
    for part in parts[1:]:
        if len(lines[-1]) + 1 + len(part) + 2 <= width:  # and room for its " \\"
            lines[-1] += " " + part
        else:
            lines[-1] += " \\"
            lines.append(" " * (indent + 2) + part)
    return lines


def replan_lines(rep: RunReport) -> list[str]:
    out = []
    for r in rep.replans:
        verdict = f"accepted: plan version {r.after_version + 1}" if r.accepted else "refused"
        said = f" ({r.reason})" if r.reason else ""
        by = f" by {r.backend}" if r.backend else ""
        out.append(
            f"  re-plan {r.attempt} of {rep.replans_max} after v{r.after_version} step "
            f"{r.after_step}{by}: {verdict}{said}"
        )
        out += [f"    - {p}" for p in r.problems]
    return out


def outcome_lines(rep: RunReport) -> list[str]:
    lines = []
    if rep.failure:
        f = rep.failure
        lines.append(
            f"  failure: step {f.step} {f.tool} {f.code} (retryable: {str(f.retryable).lower()})"
            f" {f.detail}"
        )
    if rep.escalation:
        lines.append(f"  escalation: {rep.escalation}")
    if rep.cancellation:
        c = rep.cancellation
        lines.append(f"  cancelled by {c.requester or 'someone'}: {c.reason or 'no reason given'}")
    return lines


def summary(rep: RunReport) -> str:
    """The run report in a few lines (``plangate status``, and the end of a plain watch)."""
    lines = [f"run {rep.run_id}: {rep.status.value} (plan version {rep.plan_version})"]
    if rep.starts_at is not None:
        lines.append(f"  queued: starts at {rep.starts_at.isoformat()}")
    for s in rep.steps:
        reason = f" [{answer_words(rep, s)}]" if s.answer else ""
        lines.append(f"  v{s.plan_version} step {s.n} {s.tool}: {s.state.value}{reason}")
        if s.grant is not None:
            lines.append(f"    no card: covered by standing grant {s.grant.id[:12]} of "
                         f"{s.grant.approver}")
    lines += outcome_lines(rep)
    lines += card_lines(rep)
    return "\n".join(visible(line) for line in lines)


# -- on a terminal: a table updated in place -------------------------------------------------
def _run_elapsed(rep: RunReport, now: datetime) -> float | None:
    began = [s.transitions[0].at for s in rep.steps if s.transitions]
    if not began:
        return None
    ended = [s.transitions[-1].last_at or s.transitions[-1].at for s in rep.steps if s.transitions]
    return ((max(ended) if rep.status.final else now) - min(began)).total_seconds()


def _shown_steps(rep: RunReport, room: int) -> tuple[list[StepReport], Counter[str]]:
    """The steps that fit ``room`` rows: those in flight first, then the next pending ones,
    then the latest finished; and a count, by state, of the rest."""
    if len(rep.steps) <= room:
        return list(rep.steps), Counter()

    def latest(s: StepReport) -> datetime:
        return s.transitions[-1].last_at or s.transitions[-1].at if s.transitions else _EPOCH

    active = [s for s in rep.steps if not s.state.final and s.state is not StepState.PENDING]
    pending = [s for s in rep.steps if s.state is StepState.PENDING]
    ended = sorted((s for s in rep.steps if s.state.final), key=latest, reverse=True)
    chosen = (active + pending[: max(1, room // 4)] + ended + pending)[:room]
    keep = {id(s) for s in chosen}
    hidden = Counter(s.state.value for s in rep.steps if id(s) not in keep)
    return [s for s in rep.steps if id(s) in keep], hidden


# below this many columns the table has no room for a column each for the tries, the last
# check and the answer: they share one cell (a line each), so a row fits 80 columns
WIDE = 120


def _table(rep: RunReport, steps: list[StepReport], now: datetime, width: int) -> Table:
    """The steps' rows: on a wide terminal (or ``width`` 0) a column each; on a narrow one
    the tries, the answer and the last check in one cell, a line each, that wraps."""
    wide = not width or width >= WIDE
    table = Table(expand=True, show_edge=False, pad_edge=False)
    table.add_column("step", justify="right", no_wrap=True)
    table.add_column("tool", no_wrap=True)
    table.add_column("state", no_wrap=True)
    table.add_column("elapsed", justify="right", no_wrap=True)
    if wide:
        table.add_column("tries", justify="right", no_wrap=True)
        table.add_column("last check", ratio=2)
        table.add_column("answer and reason", ratio=3)
    else:
        table.add_column("tries, answer, last check", ratio=1, min_width=12)
    many = len({s.plan_version for s in rep.steps}) > 1
    for s in steps:
        took_s = elapsed(s, now)
        tries = str(s.attempts) if s.attempts else ""
        said, check = answer_words(rep, s), last_check(s)
        cells: list[RenderableType]
        if wide:
            cells = [tries, Text(visible(check)), Text(visible(said))]
        else:
            told = [f"{s.attempts} tool attempt{'s' if s.attempts != 1 else ''}"] * bool(tries)
            told += [x for x in (said, check) if x]
            cells = [Text("\n".join(visible(x) for x in told))]  # a line each
        table.add_row(
            f"v{s.plan_version}·{s.n}" if many else str(s.n),
            Text(visible(s.tool)),
            Text(s.state.value, style=STATE_STYLES[s.state]),
            clock(took_s) if took_s is not None else "-",
            *cells,
            style="dim" if s.plan_version != rep.plan_version else "",
        )
    return table


def _line(line: str, style: str) -> RenderableType:
    """A line of the cards, re-plans or outcome, wrapped under its own indent."""
    text = line.lstrip(" ")
    return Padding(Text(visible(text), style=style), (0, 0, 0, len(line) - len(text)),
                   expand=False)


@dataclass(frozen=True)
class _View:
    """The live view, laid out at the width of the console that draws it (the terminal's,
    read again at every refresh: a resized terminal gets its own layout)."""

    rep: RunReport
    now: datetime
    height: int

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield _laid_out(self.rep, self.now, self.height, options.max_width)


def render(rep: RunReport, now: datetime, height: int = 0) -> RenderableType:
    """The live view of ``rep`` at ``now`` (``height``: the terminal's rows, 0 for no limit),
    at the width of the console it is drawn on. Every line fits that width; an approve or
    reject command is continued over lines (`` \\``) where it must wrap, never split inside
    a word."""
    return _View(rep, now, height)


def _laid_out(rep: RunReport, now: datetime, height: int, width: int) -> RenderableType:
    head = Text.assemble(
        ("run ", "bold"), (visible(rep.run_id), "bold"), "  ",
        (rep.status.value, STATUS_STYLES[rep.status]),
        f"  plan version {rep.plan_version}",
        f"  re-plans {rep.replans_used} of {rep.replans_max}",
    )
    took = _run_elapsed(rep, now)
    if took is not None:
        head.append(f"  {clock(took)}")
    parts: list[RenderableType] = [head, Text(visible(f"goal: {rep.goal}"), style="dim")]
    if rep.starts_at is not None:
        parts.append(Text(f"queued: starts at {rep.starts_at.isoformat()}", style="yellow"))
    cards = card_lines(rep, now, width)
    extra = cards + replan_lines(rep) + outcome_lines(rep)
    room = max(5, height - 8 - len(extra)) if height else len(rep.steps)
    steps, hidden = _shown_steps(rep, room)
    parts.append(_table(rep, steps, now, width))
    if hidden:
        rest = ", ".join(f"{n} {state}" for state, n in sorted(hidden.items()))
        parts.append(Text(f"  ... and {sum(hidden.values())} more: {rest}", style="dim"))
    parts += [_line(line, "magenta") for line in replan_lines(rep)]
    parts += [_line(line, "red") for line in outcome_lines(rep)]
    me, continued = plangate_command(), False
    for line in cards:
        if continued or line.lstrip().startswith((me + " ", "--")):  # a command, cut to fit
            parts.append(Text(visible(line), style="bold", no_wrap=True, overflow="fold"))
        else:
            parts.append(_line(line, "yellow"))
        continued = line.endswith(" \\")
    return Group(*parts)


# -- elsewhere: a line per change ------------------------------------------------------------
@dataclass
class PlainLines:
    """One line for each change between successive reports: the run's status, a step's state,
    answer or attempts, a re-plan, a card."""

    steps: dict[tuple[int, int], tuple[object, ...]] = field(default_factory=dict)
    status: RunStatus | None = None
    replans: int = 0
    cards: dict[tuple[int, int, str], CardStatus] = field(default_factory=dict)

    def changes(self, rep: RunReport, now: datetime) -> list[str]:
        stamp = now.astimezone().strftime("%H:%M:%S")
        out: list[str] = []
        if rep.status is not self.status:
            self.status = rep.status
            out.append(f"{stamp} run {rep.run_id}: {rep.status.value} "
                       f"(plan version {rep.plan_version})")
        for s in rep.steps:
            key = (s.plan_version, s.n)
            seen = (s.state, s.answer, s.reason, s.attempts)
            if self.steps.get(key) == seen or (key not in self.steps and s.state is
                                               StepState.PENDING):
                self.steps[key] = seen
                continue
            self.steps[key] = seen
            took = elapsed(s, now)
            line = f"{stamp} v{s.plan_version} step {s.n} {s.tool}: {s.state.value}"
            if took is not None:
                line += f" after {clock(took)}"
            if s.attempts:
                line += f", {s.attempts} tool attempt{'s' if s.attempts > 1 else ''}"
            if s.answer:
                line += f" [{answer_words(rep, s)}]"
            if check := last_check(s):
                line += f"; last check {check}"
            out.append(line)
        for line in replan_lines(rep)[self.replans:]:
            out.append(f"{stamp}{line}")
        self.replans = len(replan_lines(rep))
        for a in rep.approvals:
            key2 = (a.plan_version, a.step, a.digest)
            if self.cards.get(key2) is a.status:
                continue
            self.cards[key2] = a.status
            if a.status is CardStatus.PENDING:
                out.append(f"{stamp} card for v{a.plan_version} step {a.step} waits for a person:")
                out += card_lines(rep.model_copy(update={"approvals": [a]}), now)[1:]
            else:
                out.append(f"{stamp} card for v{a.plan_version} step {a.step}: {a.status.value}")
        return [visible(line) for line in out]


# -- following a run -------------------------------------------------------------------------
async def follow(
    api: Plangate, run_id: str, out: TextIO, *, live: bool | None = None, every_s: float = POLL_S
) -> RunReport:
    """Show the run on ``out`` until it ends: a live table when ``out`` is a terminal (or
    ``live``), else plain lines and the summary. The final report."""
    live = out.isatty() if live is None else live
    rep: RunReport | None = None
    if live:
        console = Console(file=out, highlight=False)
        with Live(console=console, auto_refresh=False, transient=False) as view:
            async for rep in api.poll(run_id, every_s):
                view.update(render(rep, datetime.now(UTC), console.height), refresh=True)
    else:
        lines = PlainLines()
        async for rep in api.poll(run_id, every_s):
            for line in lines.changes(rep, datetime.now(UTC)):
                print(line, file=out, flush=True)
    if rep is None:  # pragma: no cover - poll always yields the final report
        rep = await api.result(run_id)
    if not live:
        print(summary(rep), file=out, flush=True)
    return rep
