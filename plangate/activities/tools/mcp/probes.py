"""Probes that read an MCP server back through one of its read tools, as the MCP servers file
declares them (``mcp.file``): the read tool's arguments are built from the probe's own
(``{arg}`` templates), and its answer is judged by a JSON path and one predicate over its
structured content, or over its text (the text parsed as JSON when it parses, else the text
itself is ``$``).

An answer that says nothing is no evidence either way (``Unjudgeable``, so ``unknown``, never
``holds``): no content, JSON naming a key twice, text that is not JSON asked for a path, a path
that asks a field of what is no object. Values compare by JSON type (``plans.jsondoc``).

A server that does not answer raises (``ServerDown``): the probe is ``unknown`` and the step
waits for the server. A read tool that answers with an error never holds: the claim is
``violated`` (or, with ``on_error: unknown``, the probe could not answer).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, JsonValue, create_model

from plangate.activities.tools.mcp.file import ArgDecl, CheckDecl, ProbeDecl
from plangate.activities.tools.mcp.sessions import McpServers, ToolAnswer
from plangate.activities.tools.mcp.templates import fill, fill_arguments
from plangate.plans import jsondoc
from plangate.probes.registry import ProbeContext, ProbeSpec, Unjudgeable, Verdict

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


def where(server: str, tool: str) -> str:
    return f"MCP server {server} tool {tool}"


def document(answer: ToolAnswer, check: CheckDecl, at: str) -> JsonValue:
    """What a judgement's ``$`` is: the structured content, or the text (as JSON if it is).
    An answer that says nothing is refused (``Unjudgeable``: the probe is ``unknown``): no
    content at all, JSON text naming a key twice (whichever source is judged), and text that is
    not JSON asked for more than ``$``. ``at``: the server and tool, to name them."""
    if answer.structured is None and not answer.text.strip():
        raise Unjudgeable(f"the answer of {at} has no content")
    structured = check.source == "structured" or (
        check.source == "auto" and answer.structured is not None)
    text: JsonValue = answer.text
    try:
        text = jsondoc.loads(answer.text)
    except jsondoc.DuplicateKey as e:
        raise Unjudgeable(f"the answer of {at} {e}") from None
    except jsondoc.NotJson as e:
        if not structured and check.path != "$":
            raise Unjudgeable(f"the answer of {at} {e}: it has no {check.path}") from None
    if not structured:
        return text
    if answer.structured is None:
        raise Unjudgeable(f"the answer of {at} has no structured content")
    doc: JsonValue = answer.structured
    return doc


def judge(check: CheckDecl, doc: JsonValue, values: dict[str, JsonValue],
          at: str = "the read tool") -> Verdict:
    """``check`` over ``doc``, by JSON type (``plans.jsondoc``): ``false`` never equals ``0``.
    A path the document cannot answer (a field of a number) is ``Unjudgeable``: absence is
    only what an object or array says by not holding it."""
    try:
        found, value = jsondoc.find(doc, check.path)
    except jsondoc.WrongShape as e:
        raise Unjudgeable(f"the answer of {at} does not say: {e}") from None
    missing = f"{check.path} is absent"
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
        ok = jsondoc.same(value, want)
        return Verdict(ok, seen, "" if ok else f"{check.path} is {seen!r}, not {want!r}")
    has = jsondoc.contains(value, want)
    if check.predicate == "contains":
        return Verdict(has, seen, "" if has else f"{check.path} does not contain {want!r}")
    return Verdict(not has, seen, f"{check.path} contains {want!r}" if has else "")


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
        at = where(server, decl.tool)
        return judge(decl.check, document(answer, decl.check, at), values, at)

    read.__qualname__ = read.__name__ = "probe_" + name.replace(".", "_")
    # its arguments are the server's: none is a path in plangate's work directory
    return ProbeSpec(name, args_model(name, decl.args), f"mcp:{server}", local_paths=(), fn=read)
