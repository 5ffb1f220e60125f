"""Tools that call an MCP server's tool, as the MCP servers file declares them
(``mcp.file``): plangate's name, the server's tool, the effect the file gives it
(a server's own annotations never weaken it), the arguments a plan may pass (checked by
``plangate check`` with no connection) and the contract its steps are guarded by.

A server that does not answer is ``unavailable`` (raised from ``ServerDown``, a
``ConnectionError``: the step's probes then wait for the server); an answer with ``isError``, or
a protocol error, is ``tool_error`` with the server's message (permanent: the server said no),
or ``not_found`` where its text holds what the file says an absent record's answer holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, JsonValue

from plangate.activities.tools.mcp.file import ContractDecl, TermDecl, ToolDecl
from plangate.activities.tools.mcp.probes import args_model, where
from plangate.activities.tools.mcp.sessions import McpServers, ServerDown, ServerRefused, ToolAnswer
from plangate.activities.tools.mcp.templates import fill_arguments
from plangate.activities.tools.registry import PROBE_READ, CallContext, ToolSpec
from plangate.plans import jsondoc
from plangate.plans.catalogue import Contract, Reader, Term
from plangate.plans.model import Effect
from plangate.probes.registry import Unjudgeable
from plangate.world.errors import ToolError

if TYPE_CHECKING:
    from plangate.world.clients import World

DETAIL_MAX = 500


def contract(decl: ContractDecl) -> Contract:
    return Contract(pre=tuple(map(_term, decl.pre)), post=tuple(map(_term, decl.post)))


def _term(t: TermDecl) -> Term:
    return Term(t.probe, dict(t.from_args), dict(t.fixed), identifies=t.identifies,
                when=dict(t.when))


def result(answer: ToolAnswer, at: str, for_probe: bool) -> dict[str, JsonValue]:
    """A call's result: its text, its structured content, and the text as JSON when it is one
    strict document (``plans.jsondoc``; else null, so a bind from it fails loudly rather than
    taking the last of two keys). Read for a field probe (the tool is a reader), an answer that
    is no record is refused, as a probe's own read is (``mcp.probes.document``): no content,
    a key named twice, neither structured content nor JSON text."""
    if for_probe and answer.structured is None and not answer.text.strip():
        raise Unjudgeable(f"the answer of {at} has no content")
    try:
        parsed: JsonValue = jsondoc.loads(answer.text)
    except jsondoc.NotJson as e:
        if for_probe and (isinstance(e, jsondoc.DuplicateKey) or answer.structured is None):
            raise Unjudgeable(f"the answer of {at} {e}") from None
        parsed = None
    return {"text": answer.text, "structured": answer.structured, "json": parsed}


def tool_spec(servers: McpServers, server: str, name: str, decl: ToolDecl) -> ToolSpec[Any]:
    """The tool ``name`` of ``server`` as the file declares it."""

    async def call(args: BaseModel, world: World, ctx: CallContext) -> dict[str, JsonValue]:
        values: dict[str, JsonValue] = args.model_dump(mode="json")
        template = decl.call if decl.call is not None else {k: f"{{{k}}}" for k in values}
        sent = fill_arguments(template, values)
        try:
            answer = await servers.on(world).call(server, decl.tool, sent, ctx.idempotency_key)
        except ServerDown as e:
            raise ToolError("unavailable", f"{name}: {e}"[:DETAIL_MAX]) from e
        except ServerRefused as e:
            raise ToolError("tool_error", f"{name}: {decl.tool}: {e}"[:DETAIL_MAX]) from e
        if answer.is_error:
            # the file's word for "no such record" (a reader's absent record), else a failure
            absent = decl.not_found is not None and decl.not_found in answer.text
            code = "not_found" if absent else "tool_error"
            raise ToolError(code, f"{name}: {decl.tool}: {answer.text}"[:DETAIL_MAX])
        return result(answer, where(server, decl.tool), for_probe=ctx.run_id == PROBE_READ)

    call.__qualname__ = call.__name__ = "tool_" + name.replace(".", "_")
    reader = Reader(decl.reader.tool, dict(decl.reader.args)) if decl.reader else None
    # its arguments are the server's: a `path` names the server's file, never one of
    # plangate's work directory, so none is confined to it (checking._paths)
    return ToolSpec(
        name, args_model(name, decl.args), Effect(decl.effect), contract(decl.contract),
        reader, approval=decl.approval, description=decl.description, local_paths=(),
        fn=call,
    )
