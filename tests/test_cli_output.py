"""What the command line prints of a plan's words: a goal, a key or a tool name holding terminal
escapes (a title change, a screen clear, colours, a C1 CSI, a carriage return, a right-to-left
override) reaches the terminal escaped, never raw, from the installed script as a user runs it;
``--json`` stays the same JSON."""

from __future__ import annotations

import asyncio
import io
import json
import os
import uuid
from datetime import UTC, datetime
from typing import Any

import yaml
from rich.console import Console

from plangate.client.api import Plangate
from plangate.client.view import render
from plangate.plans.load import parse_plan
from plangate.plans.model import Effect
from plangate.plans.visible import visible, visible_json
from plangate.records.report import RunReport, RunStatus, StepReport, StepState, StepTimings
from plangate.replanner.planner import Draft
from plangate.testing import console_script, running_worker

# what must never reach a terminal raw: ESC, BEL, CR, C1 CSI (UTF-8), RLO (UTF-8)
RAW = (b"\x1b", b"\x07", b"\r", b"\xc2\x9b", b"\xe2\x80\xae")
HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x1b[31mred\x9b1m\rover\u202eevil"
SHOWN = "\\x1b]0;pwned\\x07\\x1b[2J\\x1b[31mred\\x9b1m\\rover\\u202eevil"


def assert_clean(out: bytes, what: str) -> None:
    for raw in RAW:
        assert raw not in out, (what, raw, out[-2000:])


async def plangate(env: dict[str, str], *argv: str) -> tuple[int, bytes, bytes]:
    proc = await asyncio.create_subprocess_exec(
        console_script("plangate"), *argv, env=env, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out, err


async def test_a_goal_and_a_key_with_terminal_escapes_are_shown_escaped(
    client, settings, stack, s3, tmp_path
):
    bucket = f"esc-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    key = f"{HOSTILE}.csv"  # missing: the failure's detail names it
    plan: dict[str, Any] = {"goal": f"reconcile {HOSTILE}", "budget": {"replans_max": 0},
                            "steps": [{"n": 1, "tool": "s3.get", "effect": "read",
                                       "args": {"bucket": bucket, "key": key,
                                                "dest": "esc/k.csv"}}]}
    async with running_worker(client, settings) as h:
        run_id = await Plangate(client, h.settings).start(plan)
        rep = await Plangate(client, h.settings).result(run_id)
        assert rep.failure is not None and HOSTILE in rep.failure.detail  # it is there to show
        env = {**os.environ, **stack.env(), "PLANGATE_TASK_QUEUE": h.settings.temporal.task_queue}
        for _ in range(50):  # visibility lists the run within a second or so
            code, listed, err = await plangate(env, "runs")
            if run_id.encode() in listed:
                break
            await asyncio.sleep(0.2)
        assert code == 0, err
        assert_clean(listed + err, "runs")
        assert f"reconcile {SHOWN}".encode() in listed, listed

        code, status, err = await plangate(env, "status", run_id)
        assert code == 1, err  # the run failed
        assert_clean(status + err, "status")
        assert f"s3://{bucket}/{SHOWN}.csv does not exist".encode() in status, status

        code, watched, err = await plangate(env, "watch", run_id)  # a pipe: lines, summary
        assert code == 1 and b"s3.get: FAILED" in watched, err
        assert_clean(watched + err, "watch")

        for argv in (("runs", "--json"), ("status", run_id, "--json")):
            code, out, err = await plangate(env, *argv)
            assert_clean(out + err, " ".join(argv))
            doc = json.loads(out)  # still JSON, and the same text in it
            goal = doc[0]["goal"] if argv[0] == "runs" else doc["goal"]
            assert goal == plan["goal"], goal

    # a problem of a plan names what the plan wrote: escaped too
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"goal": HOSTILE, "steps": [
        {"n": 1, "tool": f"evil{HOSTILE}", "args": {}}]}))
    code, out, err = await plangate({**os.environ, **stack.env()}, "check", str(bad))
    assert code == 2 and f"evil{SHOWN}".encode() in err, err
    assert_clean(out + err, "check")


def test_the_live_view_shows_escapes_and_markup_as_text():
    now = datetime(2026, 3, 12, 7, 30, tzinfo=UTC)
    rep = RunReport(
        run_id="plan-x", goal=f"[bold red]{HOSTILE}", status=RunStatus.RUNNING,
        steps=[StepReport(n=1, tool=f"[link=http://evil]{HOSTILE}", plan_version=1,
                          effect=Effect.READ, state=StepState.PENDING,
                          timings=StepTimings(plan_made_at=now))],
    )
    screen = io.StringIO()
    Console(file=screen, width=400, force_terminal=True, color_system="truecolor").print(
        render(rep, now))
    text = screen.getvalue()
    assert f"[bold red]{SHOWN}" in text and f"[link=http://evil]{SHOWN}" in text
    # rich's own colours are escape sequences; none of the goal's survives as one
    assert "\x1b]" not in text and "\x07" not in text and "\x1b[2J" not in text
    assert "\r" not in text and "\u202e" not in text and "\x9b" not in text


def test_visible_escapes_what_acts_on_a_terminal_and_keeps_json_the_same():
    assert visible(HOSTILE) == SHOWN
    assert visible(SHOWN) == SHOWN  # escaping the escaped changes nothing
    assert visible("zero\u200bwidth \U000e0041 tab\tline\nend") == (
        "zero\\u200bwidth \\U000e0041 tab\\tline\\nend")
    assert visible("two\nlines\r", lines=True) == "two\nlines\\r"
    assert visible("Müller, 東京, ✓") == "Müller, 東京, ✓"  # text is text
    value = {"goal": HOSTILE + "\x7f\u2028\U000e0041 Müller"}
    for doc in (json.dumps(value, ensure_ascii=False, indent=2),
                RunReport(run_id="r", goal=value["goal"]).model_dump_json(indent=2)):
        shown = visible_json(doc)
        assert json.loads(shown)["goal"] == value["goal"]
        assert visible(shown, lines=True) == shown and "Müller" in shown


def test_a_drafted_plan_is_written_escaped_and_reads_back_the_same():
    plan = parse_plan({"goal": f"load {HOSTILE}", "steps": [
        {"n": 1, "tool": "warehouse.run_sql", "effect": "read",
         "args": {"statement": "select_one", "params": {"note": "a\u202eb Müller"}}}]})
    draft = Draft(plan=plan, reason="one step\nsteps: []\n\x1b[2J", findings=["f\rx"])
    text = draft.as_yaml()
    assert visible(text, lines=True) == text  # nothing hidden left, line feeds apart
    assert text.startswith("# plangate plan: one step\\nsteps: []\\n\\x1b[2J\n"), text
    assert "#   - f\\rx" in text
    assert yaml.safe_load(text) == plan.model_dump(mode="json", exclude_defaults=True)
    # a plan with nothing hidden keeps its text as it was written
    plain = Draft(plan=parse_plan({"goal": "load Müller", "steps": [
        {"n": 1, "tool": "warehouse.run_sql", "args": {"statement": "select_one"}}]}))
    assert "goal: load Müller" in plain.as_yaml()
