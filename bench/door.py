"""What the door's verification costs a call (issue 46): the seal plangate's workflow makes for a
tool call and the check its activity makes of it, over a guarded step's real ``ToolCall`` (a
signed submission, pre and post conditions, encoded by the worker's payload converter), timed
call by call in this process. No server: the seal is the only work measured.

- seal: the workflow side (``workflows.sealing``): the call's arguments encoded, made canonical,
  digested, and the HMAC;
- verify: the activity side (``worker.door``): the same from the decoded call, and the HMAC
  compared.

    .venv/bin/python -m bench.door [--calls 20000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from datetime import UTC, datetime

from temporalio.contrib.pydantic import pydantic_data_converter

from bench.guard_cost import plan
from plangate.plans.load import parse_plan
from plangate.records import seal
from plangate.records.calls import StepRef, ToolCall
from plangate.records.proofs import sign_submission
from plangate.records.signing import SigningKey

CONVERTER = pydantic_data_converter.payload_converter
KEY = os.urandom(seal.KEY_BYTES)
NAMESPACE, WORKFLOW, RUN, ACTIVITY = "default", "plan-bench-door", "0199-run", "warehouse.run_sql"


def a_call() -> ToolCall:
    p = parse_plan(plan(1, True))
    step = p.steps[0]
    sub = sign_submission(SigningKey.generate("agent"), WORKFLOW, p,
                          datetime.now(UTC))
    return ToolCall(
        step=StepRef(run_id=WORKFLOW, plan_version=1, n=step.n, tool=step.tool,
                     args=step.args),
        idempotency_key="0123456789abcdef01234567~0123456789abcdef/v1/1",
        check=step.pre, after=step.post, submission=sub, on_behalf_of="bench",
    )


def sealed(call: ToolCall) -> bytes:
    datas = [p.data for p in CONVERTER.to_payloads([call])]
    return seal.seal(KEY, namespace=NAMESPACE, workflow_id=WORKFLOW, run_id=RUN,
                     activity=ACTIVITY, args=seal.args_digest(datas))


def verified(call: ToolCall, given: bytes) -> bool:
    datas = [p.data for p in CONVERTER.to_payloads([call])]
    return seal.verifies(KEY, given, namespace=NAMESPACE, workflow_id=WORKFLOW, run_id=RUN,
                         activity=ACTIVITY, args=seal.args_digest(datas))


def timed(fn: object, calls: int) -> list[float]:
    out = []
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        fn()  # type: ignore[operator]
        out.append((time.perf_counter_ns() - t0) / 1000)
    return out


def main(calls: int) -> None:
    call = a_call()
    # the activity's call is the one its worker decoded from the wire, not the workflow's
    wire = CONVERTER.to_payloads([call])
    (decoded,) = CONVERTER.from_payloads(wire, [ToolCall])
    given = sealed(call)
    if not verified(decoded, given):
        raise SystemExit("the decoded call's seal does not verify")
    size = len(wire[0].data)
    for _ in range(1000):  # warm-up
        sealed(call)
        verified(decoded, given)
    s = timed(lambda: sealed(call), calls)
    v = timed(lambda: verified(decoded, given), calls)
    q = statistics.quantiles
    print(f"a guarded step's ToolCall, {size} bytes as encoded; {calls} calls each, in turn")
    for name, xs in (("seal (workflow)", s), ("verify (activity)", v)):
        pct = q(xs, n=100)
        print(f"  {name:<18} p50 {pct[49]:6.1f} us  p99 {pct[98]:6.1f} us  max {max(xs):7.1f} us")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    main(parser.parse_args().calls)
