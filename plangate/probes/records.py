"""Field probes: re-read the record a step touched through its tool's declared reader
(``ProbeContext.read``) and compare one JSON path. What the tool itself returned is never what
these judge."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import JsonValue, field_validator

from plangate.plans import jsonpath
from plangate.probes.registry import NoRecord, ProbeArgs, ProbeContext, Verdict, probe

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
        return True, jsonpath.get(record, path), ""
    except jsonpath.PathError as e:
        return False, None, str(e)


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
    ok = value == args.value
    return Verdict(ok, value, "" if ok else f"{args.path} is {value!r}, not {args.value!r}")


@probe("field_not_equals", CompareArgs, system="record")
async def field_not_equals(args: CompareArgs, world: World, ctx: ProbeContext) -> Verdict:
    found, value, why = await _field(ctx, args.path)
    if not found:
        return Verdict(False, None, why)
    ok = value != args.value
    return Verdict(ok, value, "" if ok else f"{args.path} is {value!r}")
