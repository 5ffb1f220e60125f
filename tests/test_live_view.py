"""`plangate watch ID` on a real (pseudo-)terminal: a table updated in place, with each step's
elapsed time and a waiting step's reason; on a pipe, plain lines and no escape codes. Real
subprocesses of the installed script, against a real worker, Temporal and Postgres."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import io
import os
import re
import struct
import termios
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from rich.console import Console

from plangate.client.api import Plangate
from plangate.client.view import card_lines, last_check, render
from plangate.plans.model import Effect
from plangate.records.approvals import ApprovalCard, ApprovalRecord
from plangate.records.report import (
    Answer,
    ReplanRecord,
    RunReport,
    RunStatus,
    StepReport,
    StepState,
    StepTimings,
    Transition,
)
from plangate.testing import console_script, running_worker, until_state
from tests.harness import polling_plan

ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[()][0-9A-Za-z]|\x1b[=>78]")
ELAPSED = r"(\d+\.\ds|\d+:\d\d)"  # 4.2s, 1:05
SEP = r"[\s│]+"  # between the cells of a row
ROWS, COLS = 40, 160


def plain(raw: bytes) -> str:
    return ANSI.sub("", raw.decode(errors="replace")).replace("\r", "")


class Terminal:
    """A pseudo-terminal of ``ROWS`` x ``COLS`` for a child process, and what it wrote there,
    read as it writes (a thread; the child's side closed, reading ends)."""

    def __init__(self, cols: int = COLS) -> None:
        self.master, self.slave = os.openpty()
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, cols, 0, 0))
        self.raw = bytearray()
        self._reader = threading.Thread(target=self._read, daemon=True)

    def started(self) -> None:
        """The child has the slave side: ours is closed, so its exit ends our reading."""
        os.close(self.slave)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # EIO: the child's side is closed
                return
            if not chunk:
                return
            self.raw += chunk

    def close(self) -> None:
        self._reader.join(timeout=10)
        with contextlib.suppress(OSError):
            os.close(self.master)

    @property
    def text(self) -> str:
        return plain(bytes(self.raw))


async def until(
    what: str, ready: Callable[[], bool], shown: Callable[[], str], seconds: float = 30
) -> None:
    for _ in range(int(seconds / 0.1)):
        if ready():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"never saw {what}; the end of what was shown:\n{shown()[-3000:]}")


def waiting_rows(text: str) -> list[str]:
    """The table rows of step 1 while it waits, as the terminal showed them."""
    row = re.compile(
        rf"^\s*1{SEP}warehouse\.run_sql{SEP}WAITING{SEP}{ELAPSED}{SEP}.*wait: the post condition "
        r"declares a wait"
    )
    return [line for line in text.splitlines() if row.search(line)]


async def test_watch_on_a_terminal_and_on_a_pipe(client, settings, stack, pg):
    job = f"view-{uuid.uuid4().hex[:8]}"
    script = console_script("plangate")
    async with running_worker(client, settings) as h:
        api = Plangate(client, h.settings)
        run_id = await api.start(polling_plan(job, interval_s=1))
        await until_state(api.handle(run_id), 1, "WAITING")  # its first read saw "requested"
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        env.update({**stack.env(), "PLANGATE_TASK_QUEUE": h.settings.temporal.task_queue,
                    "TERM": "xterm-256color"})
        tty = Terminal()
        on_tty = await asyncio.create_subprocess_exec(
            script, "watch", run_id, stdin=tty.slave, stdout=tty.slave, stderr=tty.slave,
            env=env,
        )
        tty.started()
        on_pipe = await asyncio.create_subprocess_exec(
            script, "watch", run_id, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=env,
        )
        try:
            # the live view: the waiting step, its reason, its elapsed time growing
            await until("the waiting step shown twice with different elapsed times",
                        lambda: len({re.search(ELAPSED, r).group(0)  # type: ignore[union-attr]
                                     for r in waiting_rows(tty.text)}) >= 2,
                        lambda: tty.text)
            await pg.execute("UPDATE plangate.jobs SET state = 'done' WHERE job_id = %s", (job,))
            code = await asyncio.wait_for(on_tty.wait(), 60)
            out, err = await asyncio.wait_for(on_pipe.communicate(), 60)
        finally:
            for proc in (on_tty, on_pipe):
                if proc.returncode is None:
                    proc.kill()
            tty.close()
    assert code == 0 and on_pipe.returncode == 0, (tty.text[-2000:], err)

    # on the terminal: drawn in place (the cursor moved back over the table), ...
    raw = bytes(tty.raw)
    assert b"\x1b[" in raw and (b"\x1b[2K" in raw or re.search(rb"\x1b\[\d*A", raw))
    screen = tty.text
    first = waiting_rows(screen)[0]
    assert re.search(r"post: job_state violated", first), first  # the last check's outcome
    # ... and the last frame is the run's end: both steps done, each with its elapsed time
    last = screen[screen.rindex(f"run {run_id}"):]
    assert "succeeded" in last.splitlines()[0]
    for n in (1, 2):
        assert re.search(rf"^\s*{n}{SEP}warehouse\.run_sql{SEP}DONE{SEP}{ELAPSED}{SEP}", last,
                         re.MULTILINE), last

    # on a pipe: plain lines, no escape codes, a line per change, then the summary
    text = out.decode()
    assert "\x1b" not in text and err == b""
    lines = text.splitlines()
    waited = [line for line in lines if " v1 step 1 warehouse.run_sql: WAITING after " in line]
    assert waited and "[wait: the post condition declares a wait]" in waited[0], text
    assert re.search(rf"WAITING after {ELAPSED}", waited[0])
    assert any(re.search(rf"v1 step 2 warehouse\.run_sql: DONE after {ELAPSED}", line)
               for line in lines), text
    assert lines[-3:] == [
        f"run {run_id}: succeeded (plan version 1)",
        # done: the wait it went through is over, no longer shown (issue 38's defect)
        "  v1 step 1 warehouse.run_sql: DONE",
        "  v1 step 2 warehouse.run_sql: DONE",
    ]


async def test_watch_on_an_80_column_terminal_keeps_the_approve_line_whole(
    client, settings, stack
):
    """`plangate watch` of a run waiting for a card, on a real 80-column pseudo-terminal: no
    line wider than 80, and the approve command, pasted as shown, is the command."""
    plan = {"goal": "a card on a narrow terminal", "steps": [
        {"n": 1, "tool": "warehouse.run_sql", "effect": "write", "approval": "required",
         "args": {"statement": "select_one"}}]}
    async with running_worker(client, settings) as h:
        api = Plangate(client, h.settings)
        run_id = await api.start(plan, run_id=f"narrow-view-{uuid.uuid4().hex}")
        await until_state(api.handle(run_id), 1, "AWAITING_APPROVAL")
        (card,) = (await api.report(run_id)).approvals
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        env.update({**stack.env(), "PLANGATE_TASK_QUEUE": h.settings.temporal.task_queue,
                    "TERM": "xterm-256color"})
        tty = Terminal(cols=80)
        watch = await asyncio.create_subprocess_exec(
            console_script("plangate"), "watch", run_id, stdin=tty.slave, stdout=tty.slave,
            stderr=tty.slave, env=env)
        tty.started()
        try:
            await until("the reject command's digest", lambda: tty.text.count(card.digest) >= 3,
                        lambda: tty.text)
            shown_now = tty.text
            await api.cancel(run_id, reason="the view was the point")
            await asyncio.wait_for(watch.wait(), 60)
        finally:
            if watch.returncode is None:
                watch.kill()
            tty.close()
    frame = shown_now[shown_now.rindex(f"run {run_id}"):]
    assert max(len(line) for line in shown_now.splitlines()) <= 80, shown_now
    assert pasted(frame, "plangate approve") == (
        f"plangate approve {run_id} --step 1 --digest {card.digest}"), frame


def shown(rep: RunReport, height: int = 0, width: int = COLS) -> str:
    screen = io.StringIO()
    Console(file=screen, width=width, force_terminal=False).print(render(rep, NOW, height))
    return screen.getvalue()


NOW = datetime(2026, 3, 12, 7, 30, tzinfo=UTC)


def step(version: int, n: int, state: str, began_s_ago: float | None = None) -> StepReport:
    rep = StepReport(n=n, tool="customer.update", plan_version=version, effect=Effect.WRITE,
                     state=StepState(state), timings=StepTimings(plan_made_at=NOW))
    if began_s_ago is not None:
        rep.transitions = [Transition(state=StepState.PROBING,
                                      at=NOW - timedelta(seconds=began_s_ago)),
                           Transition(state=StepState(state), at=NOW)]
    return rep


def test_the_view_shows_re_plans_and_the_card_waiting():
    card = ApprovalCard(run_id="plan-x", plan_version=2, step=1, tool="customer.update",
                        effect=Effect.WRITE, args={"account_id": "acct_1"}, issued_at=NOW,
                        expires_at=NOW + timedelta(hours=24))
    rep = RunReport(
        run_id="plan-x", goal="close out acct_1", status=RunStatus.AWAITING_APPROVAL,
        plan_version=2, replans_used=1,
        steps=[step(1, 1, "DONE", 2.5), step(1, 2, "REPLANNING", 3), step(1, 3, "VOID"),
               step(2, 1, "AWAITING_APPROVAL", 75), step(2, 2, "PENDING")],
        replans=[ReplanRecord(attempt=1, after_step=2, after_version=1, backend="playbook",
                              accepted=True, reason="restore the record first")],
        approvals=[ApprovalRecord(step=1, plan_version=2, digest=card.digest(),
                                  expires_at=card.expires_at, card=card)],
    )
    text = shown(rep)
    rows = {line.split("│")[0].strip(): line for line in text.splitlines() if "│" in line}
    assert re.search(rf"DONE{SEP}2\.5s", rows["v1·1"])
    assert "REPLANNING" in rows["v1·2"] and re.search(rf"VOID{SEP}-", rows["v1·3"])
    assert re.search(rf"AWAITING_APPROVAL{SEP}1:15", rows["v2·1"])
    assert "re-plan 1 of 2 after v1 step 2 by playbook: accepted: plan version 2 (restore " \
           "the record first)" in text
    assert f"plangate approve plan-x --step 1 --digest {card.digest()}" in text
    assert f"plangate reject plan-x --step 1 --reason TEXT --digest {card.digest()}" in text
    assert "expires in 1.0d" in text


def pasted(text: str, start: str) -> str:
    """The command that begins ``start`` as a shell reads it pasted: its lines continued with
    a trailing backslash joined."""
    lines = text.splitlines()
    i = next(i for i, line in enumerate(lines) if line.lstrip().startswith(start))
    words = []
    while True:
        line = lines[i].strip()
        words.append(line.removesuffix("\\").strip())
        if not line.endswith("\\"):
            return " ".join(words)
        i += 1


def test_the_view_fits_80_columns_and_its_commands_paste_whole():
    """On an 80-column terminal no line is wider than 80 (issue 48: the table broke and the
    approve line wrapped before its digest): the step's tries, answer and last check share a
    cell, and the approve and reject commands are continued over lines, the digest whole on
    one of them; pasted, each is the command. On a wide terminal, a line each."""
    run_id = "plan-3f2a9c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b"
    card = ApprovalCard(run_id=run_id, plan_version=1, step=2, tool="billing.issue_credit",
                        effect=Effect.MONEY, args={"account_id": "acct_1", "amount_eur": 612.4},
                        issued_at=NOW, expires_at=NOW + timedelta(hours=24))
    waits = step(1, 1, "WAITING", 75)
    waits.attempts, waits.answer = 2, Answer.WAIT
    waits.reason = "the post condition declares a wait"
    rep = RunReport(run_id=run_id, goal="credit the unused balance of closed account acct_1",
                    status=RunStatus.AWAITING_APPROVAL,
                    steps=[waits, step(1, 2, "AWAITING_APPROVAL", 3)],
                    approvals=[ApprovalRecord(step=2, plan_version=1, digest=card.digest(),
                                              expires_at=card.expires_at, card=card)])
    approve = f"plangate approve {run_id} --step 2 --digest {card.digest()}"
    reject = f"plangate reject {run_id} --step 2 --reason TEXT --digest {card.digest()}"
    for width in (80, 200):
        text = shown(rep, width=width)
        assert max(len(line) for line in text.splitlines()) <= width, text
        assert pasted(text, "plangate approve") == approve, text
        assert pasted(text, "plangate reject") == reject, text
        assert any(card.digest() in line for line in text.splitlines() if "--digest" in line)
        one_line = any(line.strip() == approve for line in text.splitlines())
        assert one_line is (width == 200), text
        assert re.search(rf"^\s*1{SEP}customer\.update{SEP}WAITING{SEP}1:15{SEP}", text,
                         re.MULTILINE), text
    narrow = shown(rep, width=80)
    assert re.search(rf"WAITING{SEP}1:15{SEP}2 tool attempts\s*$", narrow, re.MULTILINE), narrow
    assert "declares a wait" in narrow, narrow


def test_a_long_plan_fits_the_terminal():
    rep = RunReport(run_id="plan-x", goal="a thousand steps",
                    steps=[step(1, n, "DONE", 1) for n in range(1, 601)]
                    + [step(1, 601, "EXECUTING", 4)]
                    + [step(1, n, "PENDING") for n in range(602, 1001)])
    text = shown(rep, height=30)
    assert len(text.splitlines()) <= 30
    assert re.search(rf"601{SEP}customer\.update{SEP}EXECUTING{SEP}4\.0s", text)
    assert re.search(r"\.\.\. and \d+ more: \d+ DONE, \d+ PENDING", text)


def test_a_card_of_a_run_that_ended_offers_no_answer():
    """A run cancelled (or halted) while its card waited: the card shows it was never answered,
    with no approve or reject line to run against an ended run."""
    card = ApprovalCard(run_id="plan-y", plan_version=1, step=1, tool="customer.update",
                        effect=Effect.WRITE, args={"account_id": "acct_2"}, issued_at=NOW,
                        expires_at=NOW + timedelta(hours=24))
    record = ApprovalRecord(step=1, plan_version=1, digest=card.digest(),
                            expires_at=card.expires_at, card=card)
    for status in (RunStatus.CANCELLED, RunStatus.HALTED):
        rep = RunReport(run_id="plan-y", goal="close out acct_2", status=status,
                        steps=[step(1, 1, "CANCELLED")], approvals=[record])
        lines = card_lines(rep, NOW)
        assert lines[0] == "  card for v1 step 1: unanswered"
        assert f"    no longer waiting: the run ended ({status.value})" in lines
        assert not any("plangate approve" in x or "plangate reject" in x for x in lines)
    running = RunReport(run_id="plan-y", goal="close out acct_2",
                        status=RunStatus.AWAITING_APPROVAL, steps=[step(1, 1, "AWAITING_APPROVAL")],
                        approvals=[record])
    assert any("plangate approve plan-y --step 1" in x for x in card_lines(running, NOW))


async def test_the_read_before_a_call_shows_a_skip_as_a_skip(client, settings, s3, pg):
    """The read before a call is the skip check (the effect already in place?) and the pre
    conditions, in one record. A step skipped as designed shows "already holds: skipped", even
    where a pre condition no longer holds; a step whose effect was not in place, which went on
    to its call, shows that, not its skip conditions as "violated"."""
    bucket, tag = f"view-skip-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex[:8]
    target = f"staging.view_skip_{tag}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="export.csv", Body=b"id\n1\n2\n3\n")
    s3.put_object(Bucket=bucket, Key="go", Body=b"yes")
    loads = {"tool": "warehouse.load", "args": {"target": target, "source": f"view/{tag}.csv"},
             "pre": [{"probe": "object_exists", "bucket": bucket, "key": "go"}],
             "post": [{"probe": "table_rowcount", "table": target, "min": 3}]}
    plan = {
        "goal": "load it once", "budget": {"replans_max": 0},
        "steps": [
            {"n": 1, "tool": "s3.get", "effect": "read",
             "args": {"bucket": bucket, "key": "export.csv", "dest": f"view/{tag}.csv"}},
            {"n": 2, "depends_on": [1], **loads},
        ],
    }
    # the plan again (a run's files are its own: it fetches the export again), its load's read
    # before the call made as the fetch's post read or its own
    load = {**plan, "goal": "load it again"}
    missing = {"goal": "load a file that is not there", "budget": {"replans_max": 0},
               "steps": [{"n": 1, "tool": "warehouse.load", "effect": "write",
                          "args": {"target": f"{target}_x", "source": f"view/{tag}-x.csv"}}]}
    async with running_worker(client, settings) as h:
        loaded = await h.run(plan)
        s3.delete_object(Bucket=bucket, Key="go")  # a pre condition that no longer holds
        again = await h.run(load)
        failed = await h.run(missing)
    cur = await pg.execute(f"SELECT count(*) FROM {target}")  # the test's own literal name
    assert (await cur.fetchone())[0] == 3 and loaded.status == "succeeded"

    skipped = again.step(2)
    assert skipped.state is StepState.SKIPPED and skipped.checks[-1].phase == "skip+pre"
    # "go" is gone, so the step, had its effect not been in place, would have been refused:
    # its read before the call (the fetch's post read) found the effect first and read no more
    assert [r.outcome for r in skipped.checks[-1].results] == ["holds"] * 3
    assert last_check(skipped) == "skip check: already holds: skipped"

    called = failed.step(1)  # its checks held; the tool then failed (no such file)
    assert called.state is StepState.FAILED and called.attempts >= 1
    assert called.checks[-1].phase == "skip+pre"
    assert last_check(called) == "skip check: not done yet; pre: holds"
    assert "violated" not in last_check(called)
