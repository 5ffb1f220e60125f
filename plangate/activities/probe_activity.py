"""The probe activity: evaluates a step's bound conditions against the world, concurrently.

A condition that names what it reads outside the deployment's scope (``plans.scope``) is not
read: it is ``violated`` (never a pass), its detail saying ``out_of_scope``. Violated, not
unknown: a tool's own target read by its contract is then refused by the tool itself, as a
write out of scope is (``out_of_scope``, 403: the run halts)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import psycopg
from pydantic import JsonValue, ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from plangate.activities import metrics
from plangate.activities.extensions import Registry, registry_for
from plangate.activities.tools.registry import PROBE_READ, CallContext, ToolSpec
from plangate.activities.workspace import run_files
from plangate.plans.model import Condition
from plangate.plans.scope import refusals
from plangate.probes.registry import NoRecord, ProbeContext, ProbeSpec
from plangate.records.calls import Outcome, ProbeReport, ProbeRequest, ProbeResult
from plangate.records.interface import PROBE_ACTIVITY
from plangate.world import ledger
from plangate.world.clients import World
from plangate.world.errors import ToolError
from plangate.world.outages import unreachable
from plangate.world.settings import CatalogueSettings
from plangate.world.spans import span

PROBE_TIMEOUT_S = 15.0
# reads a call's record by its idempotency key (``probes.records``)
READ_BACK_PROBE = "effect_recorded"


def probe_context(
    req: ProbeRequest, world: World, tools: Mapping[str, ToolSpec[Any]]
) -> ProbeContext:
    """The guarded step, with a reader of its record through its tool's declared reader
    (``tools``: the deployment's)."""
    spec = tools.get(req.step.tool)
    reader = spec.reader if spec else None

    async def read() -> dict[str, JsonValue]:
        if reader is None:
            raise LookupError(f"tool {req.step.tool} declares no reader for field probes")
        out: dict[str, Any] = {}
        for dst, src in reader.args.items():
            kind, _, name = src.partition(".")
            if kind == "key":
                out[dst] = req.idempotency_key
            elif kind == "args" and name in req.step.args:
                out[dst] = req.step.args[name]
            elif kind == "output" and req.output is not None and name in req.output:
                out[dst] = req.output[name]
            else:
                raise NoRecord(f"{src} is not known yet")
        read_tool = tools.get(reader.tool)
        if read_tool is None:  # a team's reader on another worker (plangate.temporal)
            raise LookupError(f"the reader {reader.tool} is not on this worker")
        # acting for nobody: a probe reads as the worker's own role, never the run's principal
        # (world.pg.act_as says why); only the tool re-checks the principal's authority
        ctx = CallContext(PROBE_READ, 0, req.idempotency_key)
        try:
            return await read_tool.fn(read_tool.args.model_validate(out), world, ctx)
        except ToolError as e:
            if e.code == "not_found":
                raise NoRecord(e.detail) from e
            raise

    return ProbeContext(
        req.step.tool, req.step.args, req.idempotency_key, read=read,
        reads_by_key=bool(reader and reader.by_key), run_id=req.step.run_id,
        files=run_files(world, req.idempotency_key),
    )


class ProbeActivities:
    def __init__(
        self, world: World, catalogue: CatalogueSettings, registry: Registry | None = None
    ) -> None:
        """``registry``: the tools and probes to read with, where not the deployment's own
        (a team's guarded activities and their readers: ``plangate.temporal``)."""
        self.world = world
        registry = registry or registry_for(catalogue)
        self.tools, self.probes = registry.tools, registry.probes
        self.scope = world.settings.scope

    async def _one(self, cond: Condition, ctx: ProbeContext, lenient: bool) -> ProbeResult:
        t0 = time.perf_counter()

        def done(outcome: Outcome, observed: object = None, detail: str = "") -> ProbeResult:
            ms = (time.perf_counter() - t0) * 1000
            return ProbeResult.model_validate(
                {"condition": cond, "outcome": outcome, "observed": observed,
                 "detail": detail, "elapsed_ms": ms}
            )

        spec = self.probes.get(cond.probe)
        if spec is None:
            metrics.probe_read(metrics.UNREGISTERED, "none", Outcome.UNKNOWN.value)
            return done(Outcome.UNKNOWN, detail=f"no probe named {cond.probe!r}")
        result = await self._read(spec, cond, ctx, lenient, done)
        metrics.probe_read(spec.name, spec.system, result.outcome.value)
        return result

    async def _read(
        self,
        spec: ProbeSpec[Any],
        cond: Condition,
        ctx: ProbeContext,
        lenient: bool,
        done: Callable[..., ProbeResult],
    ) -> ProbeResult:
        try:
            args = spec.args.model_validate(cond.args)
        except ValidationError as e:
            # Arguments bound from a result that do not fit the probe: asking again cannot help.
            if lenient:
                return done(Outcome.VIOLATED, detail=f"no evidence: arguments: {e}"[:500])
            bad = done(Outcome.UNKNOWN, detail=f"arguments: {e}"[:500])
            return bad.model_copy(update={"invalid_args": True})
        outside = refusals(self.scope, cond.args, spec.reads, bound=True)
        refused = next((why for _, why in outside), None)
        if refused is not None:
            return done(Outcome.VIOLATED, detail=f"out_of_scope: {refused}"[:500])
        attrs = {"plangate.run_id": ctx.run_id, "plangate.probe": cond.probe,
                 "plangate.tool": ctx.tool}
        with span(self.world.tracer, f"probe {cond.probe}", attrs) as s:
            try:
                async with asyncio.timeout(PROBE_TIMEOUT_S):  # no task of its own per read
                    verdict = await spec.fn(args, self.world, ctx)
            except Exception as e:  # could not answer: unknown, which fails the step, never passes
                unknown = done(Outcome.UNKNOWN, detail=f"{type(e).__name__}: {e}"[:500])
                if s is not None:
                    s.set_attribute("plangate.outcome", Outcome.UNKNOWN.value)
                return unknown.model_copy(update={"unreachable": unreachable(e)})
            outcome = Outcome.HOLDS if verdict.holds else Outcome.VIOLATED
            if s is not None:
                s.set_attribute("plangate.outcome", outcome.value)
            return done(outcome, verdict.observed, verdict.detail)

    async def _found_by_key(self, req: ProbeRequest, report: ProbeReport) -> None:
        """A call's record read back by its key: its row in the effect ledger, left open by a
        call that never answered, is done (``world.ledger.found_by_key``)."""
        for r in report.results:
            if r.condition.probe == READ_BACK_PROBE and r.outcome is Outcome.HOLDS:
                try:
                    await ledger.found_by_key(self.world, req.idempotency_key, r.observed)
                except (psycopg.Error, OSError, TimeoutError):  # the read stands; the row waits
                    activity.logger.warning("the effect ledger did not take a read-back of %s",
                                            req.idempotency_key, exc_info=True)

    async def read(self, req: ProbeRequest) -> ProbeReport:
        """Every condition of ``req``, read at once: a probe that cannot answer is ``UNKNOWN``
        in the report, never raised (the tool's activity reads this way around its call)."""
        ctx = probe_context(req, self.world, self.tools)
        t0 = time.perf_counter()
        lenient = set(req.lenient)
        reads = [self._one(c, ctx, c.key() in lenient) for c in req.conditions]
        results = [await reads[0]] if len(reads) == 1 else await asyncio.gather(*reads)
        return ProbeReport(
            results=list(results),
            read_at=datetime.now(UTC),
            elapsed_ms=(time.perf_counter() - t0) * 1000,
        )

    @activity.defn(name=PROBE_ACTIVITY)
    async def evaluate(self, req: ProbeRequest) -> ProbeReport:
        report = await self.read(req)
        await self._found_by_key(req, report)
        if any(r.invalid_args for r in report.results):
            names = ", ".join(f"{r.condition.key()}: {r.detail}" for r in report.results
                              if r.invalid_args)
            raise ApplicationError(
                f"probe arguments do not fit: {names}",
                report.model_dump(mode="json"),
                type="bad_arguments",
                non_retryable=True,
            )
        if report.unknown:
            # Retryable: the activity's RetryPolicy bounds how often we ask again. When every
            # probe that could not answer found its system down, the step waits for the system
            # (the workflow's outage patience) rather than failing.
            names = ", ".join(f"{r.condition.key()}: {r.detail}" for r in report.unknown)
            down = all(r.unreachable for r in report.unknown)
            raise ApplicationError(
                f"probes could not answer: {names}",
                report.model_dump(mode="json"),
                type="system_unavailable" if down else "probe_unknown",
            )
        return report
