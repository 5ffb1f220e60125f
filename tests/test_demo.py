"""`plangate demo`, the README's first command, runs its own embedded stack and says how the
world ended up after each incident; this process's environment is left as it was."""

from __future__ import annotations

import json
import os
from pathlib import Path

from plangate.demo.replay import run_demo, saturday_plan

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "saturday.json"


def test_the_demos_saturday_plan_is_the_readmes_first_plan():
    """The demo runs examples/saturday.json (its table renamed per case), so it ends in the
    words ``plangate run`` of that plan ends in: halted, not failed."""
    plan = saturday_plan("staging.vendor_invoice_202603")
    plan["steps"][0]["args"]["dest"] = plan["steps"][1]["args"]["source"] = (
        "work/2026-03-invoice.csv")
    assert plan == json.loads(EXAMPLE.read_text())


async def test_demo_replays_both_incidents(state_dir, capsys):
    environ_before = dict(os.environ)
    assert await run_demo(state_dir) == 0
    assert dict(os.environ) == environ_before  # its AWS_* variables were its own, for a while
    out = capsys.readouterr().out
    assert "run: SUCCESS (2 steps, 0 failed, 2 succeeded); world: 0 rows" in out  # naive
    assert "614 rows in staging.inv_present" in out
    # the export deleted, then truncated: the run's own word, as plangate run says it
    assert out.count("run: halted") >= 2 and "run: failed" not in out
    assert "no table" in out  # the truncated export: the load rolled back, table and all
    assert "credits [(612.4, 'suspense')]" in out  # what the naive executor did
    assert "credits [(612.4, 'account')]" in out  # what plangate did
    # the deployment's default, said, and the card the credit waited on
    assert ("plangate demo: money and external steps wait for a person (the default; "
            "PLANGATE_APPROVE_EFFECTS=none turns it off)") in out
    (card,) = [line for line in out.splitlines() if "will call billing.issue_credit(" in line]
    assert card.strip().startswith("card: v2 step 4 will call billing.issue_credit(account_id="
                                   "'acct_3319f', amount_eur=612.4) [money]: waits for a person")
    # under the heading of the run that printed it, not the case before (issue 48)
    lines = out.splitlines()
    above = [line for line in lines[: lines.index(card)] if line.startswith("== ")]
    assert above[-1] == "== plangate (playbook re-planner)", above
    assert out.rstrip().endswith("every outcome as expected")
