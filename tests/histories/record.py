"""Records workflow histories for the replay test. Run by hand after a deliberate, released
change of workflow code, never to make a failing replay pass:

    .venv/bin/python -m tests.histories.record
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import boto3

from activities.demo_schema import seed_acct_3319f
from bench._stack import bench_stack
from plangate.demo import BUCKET, KEY, invoice_csv, saturday_plan
from plangate.scenarios import closeout_plan

HERE = Path(__file__).parent


async def main() -> None:
    async with bench_stack(replanner="playbook") as b:
        s3 = boto3.client("s3", endpoint_url=b.settings.s3_endpoint_url)
        s3.create_bucket(Bucket=BUCKET)
        s3.put_object(Bucket=BUCKET, Key=KEY, Body=invoice_csv(700))
        runs: dict[str, Any] = {}
        runs["saturday_succeeded"] = await b.run(saturday_plan("staging.rec_ok"))
        s3.delete_object(Bucket=BUCKET, Key=KEY)
        runs["saturday_export_deleted"] = await b.run(saturday_plan("staging.rec_gone"))
        await seed_acct_3319f(b.world)
        runs["closeout_replanned"] = await b.run(closeout_plan())
        for name, rep in runs.items():
            ids = [rep.run_id] + [f"{rep.run_id}/replan-{r.attempt}" for r in rep.replans]
            for i, wid in enumerate(ids):
                history = await b.client.get_workflow_handle(wid).fetch_history()
                suffix = "" if i == 0 else f"_replan{i}"
                record = {"workflow_id": wid, "history": json.loads(history.to_json())}
                (HERE / f"{name}{suffix}.json").write_text(json.dumps(record))
                print(f"recorded {name}{suffix} ({rep.status})")


if __name__ == "__main__":
    os.chdir(HERE.parent.parent)
    asyncio.run(main())
