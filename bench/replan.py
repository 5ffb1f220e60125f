"""Replan turnaround: from the final failure of the close-out's step 3 to the first dispatch of
the new plan's first step, with the playbook and with a model that answers at once (the local
OpenAI-compatible server the tests use).

    .venv/bin/python -m bench.replan [--repeats 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics

from bench._stack import Bench, bench_stack
from plangate.demo.scenarios import closeout_plan, seed_replanned_plan
from plangate.demo.schema import seed_acct_3319f
from plangate.records.interface import PROPOSE_ACTIVITY
from plangate.records.report import RunReport, StepState
from plangate.replanner.activity import ReplanActivities
from plangate.replanner.backends.openai import OpenAIBackend
from plangate.testing import FakeOpenAI
from plangate.world.settings import CatalogueSettings, ModelSettings


def turnaround_ms(rep: RunReport) -> float:
    if rep.status != "succeeded" or rep.plan_version != 2:
        raise SystemExit(f"run {rep.run_id} did not recover: {rep.status} {rep.escalation}")
    failed = rep.step(3, 1)
    at_failure = next(t.at for t in failed.transitions if t.state == StepState.REPLANNING)
    first = rep.step(1, 2)
    dispatched = min(t.at for t in first.transitions)
    return (dispatched - at_failure).total_seconds() * 1000


async def measure(b: Bench, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        await seed_acct_3319f(b.world)
        # the re-planned credit and e-mail wait for cards: answered once the timed part is over
        rep = await b.run_approving(closeout_plan(), by="bench", every_s=0.5, after_s=1.0)
        out.append(turnaround_ms(rep))
    return out


async def main(repeats: int) -> None:
    async with bench_stack(replanner="playbook") as b:
        playbook = await measure(b, repeats)
    with FakeOpenAI(responses=[json.dumps(seed_replanned_plan())] * repeats) as fake:
        s = ModelSettings(
            replanner="openai", name="fake-model", base_url=fake.base_url, api_key="sk-bench",
        )
        offered = CatalogueSettings(demo_systems=True)  # the close-out's tools
        # The model alone (no playbook first line), so every turnaround asks it.
        model = ReplanActivities(s, offered, backend=OpenAIBackend.from_settings(s, offered))
        async with bench_stack({PROPOSE_ACTIVITY: model.propose}) as b:
            modelled = await measure(b, repeats)
    for name, xs in (("playbook", playbook), ("model (answers at once)", modelled)):
        print(
            f"replan turnaround, {name}: median {statistics.median(xs):.0f} ms "
            f"{[round(x) for x in xs]}"
        )


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    asyncio.run(main(ap.parse_args().repeats))
