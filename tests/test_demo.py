"""`plangate demo`, the README's first command, runs its own embedded stack and says how the
world ended up after each incident; this process's environment is left as it was."""

from __future__ import annotations

import os

from plangate.demo.replay import run_demo


async def test_demo_replays_both_incidents(state_dir, capsys):
    environ_before = dict(os.environ)
    assert await run_demo(state_dir) == 0
    assert dict(os.environ) == environ_before  # its AWS_* variables were its own, for a while
    out = capsys.readouterr().out
    assert "run: SUCCESS (2 steps, 0 failed, 2 succeeded); world: 0 rows" in out  # naive
    assert "614 rows in staging.inv_present" in out
    assert "credits [(612.4, 'suspense')]" in out  # what the naive executor did
    assert "credits [(612.4, 'account')]" in out  # what plangate did
    # the deployment's default, said, and the card the credit waited on
    assert ("plangate demo: money and external steps wait for a person (the default; "
            "PLANGATE_APPROVE_EFFECTS=none turns it off)") in out
    (card,) = [line for line in out.splitlines() if "will call billing.issue_credit(" in line]
    assert card.strip().startswith("card: v2 step 4 will call billing.issue_credit(account_id="
                                   "'acct_3319f', amount_eur=612.4) [money]: waits for a person")
    assert out.rstrip().endswith("every outcome as expected")
