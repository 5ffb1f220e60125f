"""Field probes: re-read the record a step touched through its tool's declared reader and compare
one JSON path. What the tool itself returned is never what these judge."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import JsonValue, field_validator

from activities.tools.registry import TOOLS, CallContext
from plans import jsonpath
from probes.registry import ProbeArgs, ProbeContext, Verdict, probe
from world.errors import ToolError

if TYPE_CHECKING:
    from world.clients import World


class PresentArgs(ProbeArgs):
    path: str

    @field_validator("path")
    @classmethod
    def _parses(cls, v: str) -> str:
        jsonpath.parse(v)
        return v


class CompareArgs(PresentArgs):
    value: JsonValue


class NoRecord(Exception):
    pass


def reader_args(ctx: ProbeContext) -> dict[str, Any]:
    spec = TOOLS.get(ctx.tool)
    if spec is None or spec.reader is None:
        raise LookupError(f"tool {ctx.tool} declares no reader for field probes")
    out: dict[str, Any] = {}
    for dst, src in spec.reader.args.items():
        kind, _, name = src.partition(".")
        if kind == "key":
            out[dst] = ctx.idempotency_key
        elif kind == "args" and name in ctx.args:
            out[dst] = ctx.args[name]
        elif kind == "output" and ctx.output is not None and name in ctx.output:
            out[dst] = ctx.output[name]
        else:
            raise NoRecord(f"{src} is not known yet")
    return out


async def read_record(world: World, ctx: ProbeContext) -> Any:
    spec = TOOLS[ctx.tool]
    declared = spec.reader
    if declared is None:
        raise LookupError(f"tool {ctx.tool} declares no reader")
    reader = TOOLS[declared.tool]
    args = reader.args.model_validate(reader_args(ctx))
    try:
        return await reader.fn(args, world, CallContext("probe", 0, ctx.idempotency_key))
    except ToolError as e:
        if e.code == "not_found":
            raise NoRecord(e.detail) from e
        raise


async def _field(world: World, ctx: ProbeContext, path: str) -> tuple[bool, Any, str]:
    try:
        record = await read_record(world, ctx)
    except NoRecord as e:
        return False, None, f"no record to read: {e}"
    try:
        return True, jsonpath.get(record, path), ""
    except jsonpath.PathError as e:
        return False, None, str(e)


class RecordedArgs(ProbeArgs):
    pass


def _reads_by_key(tool: str) -> bool:
    spec = TOOLS.get(tool)
    if spec is None or spec.reader is None:
        return False
    sources = spec.reader.args.values()
    return "key" in sources and all(s == "key" or s.startswith("args.") for s in sources)


@probe("effect_recorded", RecordedArgs, system="record")
async def effect_recorded(args: RecordedArgs, world: World, ctx: ProbeContext) -> Verdict:
    """Whether the record this call makes exists, read by the call's idempotency key: found
    holds (observed: the record), not found is violated (the call certainly did not act).
    A tool whose reader does not read by key cannot tell: the probe cannot answer."""
    if not _reads_by_key(ctx.tool):
        raise LookupError(f"{ctx.tool} has no reader by idempotency key to tell what happened")
    try:
        record = await read_record(world, ctx)
    except NoRecord as e:
        return Verdict(False, None, f"nothing recorded under this call's key: {e}")
    return Verdict(True, record)


@probe("field_present", PresentArgs, system="record")
async def field_present(args: PresentArgs, world: World, ctx: ProbeContext) -> Verdict:
    found, value, why = await _field(world, ctx, args.path)
    ok = found and value is not None
    return Verdict(ok, value, "" if ok else why or f"{args.path} is null")


@probe("field_equals", CompareArgs, system="record")
async def field_equals(args: CompareArgs, world: World, ctx: ProbeContext) -> Verdict:
    found, value, why = await _field(world, ctx, args.path)
    if not found:
        return Verdict(False, None, why)
    ok = value == args.value
    return Verdict(ok, value, "" if ok else f"{args.path} is {value!r}, not {args.value!r}")


@probe("field_not_equals", CompareArgs, system="record")
async def field_not_equals(args: CompareArgs, world: World, ctx: ProbeContext) -> Verdict:
    found, value, why = await _field(world, ctx, args.path)
    if not found:
        return Verdict(False, None, why)
    ok = value != args.value
    return Verdict(ok, value, "" if ok else f"{args.path} is {value!r}")
