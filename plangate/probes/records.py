"""Field probes: re-read the record a step touched through its tool's declared reader
(``ProbeContext.read``) and compare one JSON path. What the tool itself returned is never what
these judge. Values compare by JSON type (``plans.jsondoc``: ``false`` is not ``0``), and a path
the record cannot answer (a field of a number) is no answer: ``unknown``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import JsonValue, field_validator

from plangate.plans import jsondoc, jsonpath
from plangate.probes.registry import (
    NoRecord,
    ProbeArgs,
    ProbeContext,
    Unjudgeable,
    Verdict,
    probe,
)

if TYPE_CHECKING:
    from plangate.world.clients import World


class PresentArgs(ProbeArgs):
    path: str

    @field_validator("path")
    @classmethod
    def _parses(cls, v: str) -> str:
        jsonpath.parse(v)
        return v


class CompareArgs(PresentArgs):
    value: JsonValue


async def _field(ctx: ProbeContext, path: str) -> tuple[bool, Any, str]:
    try:
        record = await ctx.read()
    except NoRecord as e:
        return False, None, f"no record to read: {e}"
    try:
        found, value = jsondoc.find(record, path)
    except jsondoc.WrongShape as e:
        raise Unjudgeable(f"the record of {ctx.tool} does not say: {e}") from None
    return found, value, "" if found else f"{path} is absent"


class RecordedArgs(ProbeArgs):
    pass


@probe("effect_recorded", RecordedArgs, system="record")
async def effect_recorded(args: RecordedArgs, world: World, ctx: ProbeContext) -> Verdict:
    """Whether the record this call makes exists, read by the call's idempotency key: found
    holds (observed: the record), not found is violated (the call certainly did not act).
    A tool whose reader does not read by key cannot tell: the probe cannot answer."""
    if not ctx.reads_by_key:
        raise LookupError(f"{ctx.tool} has no reader by idempotency key to tell what happened")
    try:
        record = await ctx.read()
    except NoRecord as e:
        return Verdict(False, None, f"nothing recorded under this call's key: {e}")
    return Verdict(True, record)


@probe("field_present", PresentArgs, system="record")
async def field_present(args: PresentArgs, world: World, ctx: ProbeContext) -> Verdict:
    found, value, why = await _field(ctx, args.path)
    ok = found and value is not None
    return Verdict(ok, value, "" if ok else why or f"{args.path} is null")


@probe("field_equals", CompareArgs, system="record")
async def field_equals(args: CompareArgs, world: World, ctx: ProbeContext) -> Verdict:
    found, value, why = await _field(ctx, args.path)
    if not found:
        return Verdict(False, None, why)
    ok = jsondoc.same(value, args.value)
    return Verdict(ok, value, "" if ok else f"{args.path} is {value!r}, not {args.value!r}")


@probe("field_not_equals", CompareArgs, system="record")
async def field_not_equals(args: CompareArgs, world: World, ctx: ProbeContext) -> Verdict:
    found, value, why = await _field(ctx, args.path)
    if not found:
        return Verdict(False, None, why)
    ok = not jsondoc.same(value, args.value)
    return Verdict(ok, value, "" if ok else f"{args.path} is {value!r}")
