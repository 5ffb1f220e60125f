"""Probes that read an MCP server back through one of its read tools, as the MCP servers file
declares them (``probes.mcp_file``): the read tool's arguments are built from the probe's own
(``{arg}`` templates), and its answer is judged by a JSON path and one predicate over its
structured content, or over its text (the text parsed as JSON when it parses, else the text
itself is ``$``).

A server that does not answer raises (``ServerDown``): the probe is ``unknown`` and the step
waits for the server. A read tool that answers with an error never holds: the claim is
``violated`` (or, with ``on_error: unknown``, the probe could not answer).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, JsonValue, create_model

from plangate.plans import jsonpath
from plangate.probes.mcp_file import ArgDecl, CheckDecl, ProbeDecl
from plangate.probes.mcp_templates import fill, fill_arguments
from plangate.probes.registry import ProbeContext, ProbeSpec, Verdict
from plangate.world.mcp_sessions import McpServers, ToolAnswer

if TYPE_CHECKING:
    from plangate.world.clients import World

_TYPES: dict[str, Any] = {
    "string": str, "integer": int, "number": float, "boolean": bool,
    "array": list[JsonValue], "object": dict[str, JsonValue],
}
OBSERVED_MAX = 2000  # characters of a text a verdict keeps as what it observed


def args_model(name: str, args: dict[str, ArgDecl]) -> type[BaseModel]:
    """The pydantic model of declared arguments: strict types, nothing extra, optional ones
    ``None`` when left out."""
    fields: dict[str, Any] = {
        n: ((_TYPES[a.type] | None, None) if a.optional else (_TYPES[a.type], ...))
        for n, a in args.items()
    }
    config = ConfigDict(extra="forbid", frozen=True, strict=True)
    model: type[BaseModel] = create_model(
        "Args_" + name.replace(".", "_"), __config__=config, **fields
    )
    return model


def document(answer: ToolAnswer, source: str) -> JsonValue:
    """What a judgement's ``$`` is: the structured content, or the text (as JSON if it is)."""
    if source == "structured" or (source == "auto" and answer.structured is not None):
        if answer.structured is None:
            raise LookupError("the server sent no structured content")
        structured: JsonValue = answer.structured
        return structured
    try:
        parsed: JsonValue = json.loads(answer.text)
        return parsed
    except ValueError:
        return answer.text


def judge(check: CheckDecl, doc: JsonValue, values: dict[str, JsonValue]) -> Verdict:
    try:
        value = jsonpath.get(doc, check.path)
        found = True
    except jsonpath.PathError as e:
        value, found, missing = None, False, str(e)
    seen = _observed(value)
    if check.predicate == "present":
        there = found and value is not None
        ok = there == bool(check.present)
        why = f"{check.path} is present: {seen!r}" if there else f"{check.path} is absent"
        return Verdict(ok, seen, "" if ok else why)
    if not found:
        return Verdict(False, None, missing)
    want = fill(check.expected, values)
    if check.predicate == "equals":
        ok = value == want
        return Verdict(ok, seen, "" if ok else f"{check.path} is {seen!r}, not {want!r}")
    has = _contains(value, want)
    if check.predicate == "contains":
        return Verdict(has, seen, "" if has else f"{check.path} does not contain {want!r}")
    return Verdict(not has, seen, f"{check.path} contains {want!r}" if has else "")


def _contains(value: JsonValue, want: JsonValue) -> bool:
    if isinstance(value, str):
        return isinstance(want, str) and want in value
    if isinstance(value, list):
        return want in value
    if isinstance(value, dict):
        return isinstance(want, str) and want in value
    return False


def _observed(value: JsonValue) -> JsonValue:
    if isinstance(value, str) and len(value) > OBSERVED_MAX:
        return value[:OBSERVED_MAX] + "..."
    return value


def probe_spec(servers: McpServers, server: str, name: str, decl: ProbeDecl) -> ProbeSpec[Any]:
    """The probe ``name`` of ``server`` as the file declares it."""

    async def read(args: BaseModel, world: World, ctx: ProbeContext) -> Verdict:
        values: dict[str, JsonValue] = args.model_dump(mode="json")
        answer = await servers.on(world).call(server, decl.tool, fill_arguments(decl.call, values))
        if answer.is_error:
            why = f"{decl.tool} answered with an error: {answer.text}"[:500]
            if decl.on_error == "unknown":
                raise LookupError(why)
            return Verdict(False, None, why)
        return judge(decl.check, document(answer, decl.check.source), values)

    read.__qualname__ = read.__name__ = "probe_" + name.replace(".", "_")
    return ProbeSpec(name, args_model(name, decl.args), f"mcp:{server}", fn=read)
