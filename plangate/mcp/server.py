"""The front door: an MCP server whose tools are plangate's plan tools and the deployment's
guarded tools, each a call of the Python API (``plangate.client.api.Plangate``), nothing
re-implemented.

- ``check_plan``: every problem of a plan, each with its step and field (structured);
- ``run_plan``: start a run of a plan, answered with its run id;
- ``run_report``: a run's report (the JSON ``plangate status --json`` prints);
- ``cancel_run``: cancel a run, with a reason and who asks, recorded in its report and history;
- the resource ``plangate://catalogue``: the deployment's tools and probes, their effect
  classes, argument schemas and contracts;
- the resource ``plangate://plan-language`` and the prompt ``plan_language``: the plan
  language with an example (``plangate.mcp.language``); ``plan`` of ``check_plan`` and
  ``run_plan`` carries the plan's JSON schema;
- every tool of the catalogue under a name models accept (``s3.put`` as ``s3_put``:
  ``plangate.mcp.names``), titled with its catalogue name, each call a one-step guarded run
  (``plangate.mcp.guarded``), answered as a task where it must wait and the client declared
  the Tasks extension (``plangate.mcp.tasks``).

There is no approve tool, on purpose: an MCP client holds no approver's key and can never
answer a card; approval stays with credentialed approvers (the CLI, the approval page).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_REQUEST, ToolAnnotations
from pydantic import BaseModel, WithJsonSchema

from plangate import __version__
from plangate.client.api import NoWorkerAnswered, RunEnded, RunIdInUse, UnknownRun
from plangate.client.checked import Checked
from plangate.mcp.access import Access
from plangate.mcp.clients import (
    CLIENT_SCOPE,
    DEFAULT_RUNS_PER_MINUTE,
    Clients,
    McpClient,
    NotYourRun,
    RunsLimited,
    StartLimit,
)
from plangate.mcp.guarded import RUN_PREFIX, GuardedCall, description, hints
from plangate.mcp.language import LANGUAGE_URI, language_text, plan_schema
from plangate.mcp.names import served_name, served_names
from plangate.mcp.reads import FastReads
from plangate.mcp.tasks import Caller, GuardedTasks
from plangate.plans.catalogue import Catalogue, Term, ToolInfo
from plangate.plans.load import PlanError
from plangate.plans.problem import Problem as PlanProblem
from plangate.records.report import RunReport
from plangate.world.settings import Settings

CATALOGUE_URI = "plangate://catalogue"
# the plan argument: validated as any object (check_plan names every problem), described by
# the plan's schema
PlanArg = Annotated[dict[str, Any], WithJsonSchema(plan_schema())]


class Problem(BaseModel):
    """One problem of a plan: the step and field it names (None where it names none), and the
    whole line as ``plangate check`` prints it. A step whose ``n`` is unusable is named by its
    place in the list (``step #3, field n: ...``): ``step`` is None, ``position`` is 3 and
    ``field`` is kept."""

    step: int | None
    field: str | None
    message: str
    position: int | None = None


class CheckResult(BaseModel):
    valid: bool
    problems: list[Problem]
    warnings: list[str]


class RunStarted(BaseModel):
    run_id: str


class CancelRequested(BaseModel):
    run_id: str
    reason: str
    requester: str


# the hints of plangate's own tools: checking a plan and reading a report change nothing; a
# run may act on the world (its steps guarded); a cancel stops a run, and again does nothing
READS = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                        open_world_hint=False)
STARTS = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False,
                         open_world_hint=True)
CANCELS = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                          open_world_hint=False)

_F = TypeVar("_F", bound=Callable[..., Any])


def own_tool(server: MCPServer, hints: ToolAnnotations) -> Callable[[_F], _F]:
    """One of plangate's own tools, its docstring as its description without the source's
    indentation (the SDK takes ``__doc__`` as it is), with ``hints``."""

    def register(fn: _F) -> _F:
        described = server.tool(description=inspect.cleandoc(fn.__doc__ or ""),
                                annotations=hints)
        return described(fn)

    return register


def problem(p: PlanProblem) -> Problem:
    """The place the plan language recorded with the problem, never parsed from its line."""
    if isinstance(p.step, str):  # "#3": the third step, its n unusable (plans.load.step_label)
        return Problem(step=None, field=p.field, message=str(p),
                       position=int(p.step.removeprefix("#")))
    return Problem(step=p.step, field=p.field, message=str(p))


def _term(t: Term) -> dict[str, Any]:
    return {"probe": t.probe, "from_args": t.from_args, "fixed": t.fixed,
            "identifies": t.identifies, "when": t.when}


def catalogue_json(cat: Catalogue) -> dict[str, Any]:
    """The catalogue as a client reads it: per tool its effect class, argument schema,
    contract and whether every call waits for a person; per probe its system and schema."""
    return {
        "tools": [
            {
                "name": name, "served_as": served_name(name), "effect": t.effect.value,
                "approval": t.approval, "description": t.description,
                "args_schema": t.args.model_json_schema(),
                "contract": {phase: [_term(x) for x in getattr(t.contract, phase)]
                             for phase in ("pre", "post", "done")},
                "reader": None if t.reader is None
                else {"tool": t.reader.tool, "args": dict(t.reader.args)},
            }
            for name, t in sorted(cat.tools.items())
        ],
        "probes": [
            {"name": name, "system": p.system, "args_schema": p.args.model_json_schema()}
            for name, p in sorted(cat.probes.items())
        ],
    }


async def _guarded_placeholder() -> None:
    """Never called: the Tasks extension answers every call of a guarded tool."""


def guarded_tool(info: ToolInfo, served: str, settings: Settings) -> Tool:
    """The MCP tool of a catalogue tool, under its ``served`` name (``plangate.mcp.names``),
    titled with its catalogue name: its argument model's schema, hints from its effect."""
    tool = Tool.from_function(
        _guarded_placeholder, name=served, title=info.name,
        description=description(info, settings.policy.approve_effects),
        annotations=hints(info), structured_output=False,
    )
    return tool.model_copy(update={"parameters": info.args.model_json_schema()})


DEFAULT_ANSWER_WITHIN_S = 10.0
DEFAULT_APPROVAL_URL = "http://127.0.0.1:8765/"


def caller_of(clients: Clients) -> Caller:
    """Who sent a request: the client the HTTP layer authenticated it as (its bearer token),
    else the server's one client (stdio, or a loopback server without tokens). Never a name
    the request carries."""

    def caller(ctx: ServerRequestContext[Any, Any]) -> McpClient:
        scope = getattr(ctx.request, "scope", None)
        who = scope.get(CLIENT_SCOPE) if isinstance(scope, dict) else None
        if isinstance(who, McpClient):
            return who
        if clients.stdio is None:  # tokens required, yet none reached here: refuse
            raise MCPError(code=INVALID_REQUEST, message="no client identity")
        return clients.stdio

    return caller


def build_server(
    settings: Settings, *, answer_within_s: float = DEFAULT_ANSWER_WITHIN_S,
    approval_url: str = DEFAULT_APPROVAL_URL, clients: Clients | None = None,
    runs_per_minute: int = DEFAULT_RUNS_PER_MINUTE, reads_by_worker: bool = True,
) -> MCPServer:
    """The MCP server of the deployment ``settings`` describe (``plangate mcp`` runs it). A
    guarded call is answered once its run has ended or waits for a person, or after
    ``answer_within_s`` seconds (then as a task, or the run's id and state); a card's input
    request points a person at ``approval_url`` (the approval page). ``clients``: who may
    call (default: stdio's one client with the server's submitter key); each starts at most
    ``runs_per_minute`` runs a minute (0: no limit), a read counted as a run.
    ``reads_by_worker``: a call of a tool the catalogue declares ``read`` is offered to the
    worker first, answered without a run where it can be (``plangate.mcp.reads``)."""
    from plangate.activities.catalogue import catalogue
    from plangate.client.checked import check

    clients = clients or Clients.over_stdio(settings.identity.submitter_key)
    caller = caller_of(clients)
    access = Access(settings, StartLimit(runs_per_minute))
    known = catalogue(settings.catalogue)
    served = served_names(known.tools)  # served name -> catalogue name; a clash: NameClash

    def checked(call: GuardedCall, info: ToolInfo) -> Checked:
        try:
            return check(call.plan(info), settings)
        except PlanError as e:
            raise ToolError("call refused: " + "; ".join(e.problems)) from None

    async def start_guarded(who: McpClient, call: GuardedCall, info: ToolInfo, run_id: str,
                            admitted: bool) -> str:
        done = checked(call, info)
        return await access.start(who, done, run_id=run_id, once=call.request_id is not None,
                                  admitted=admitted)

    reads = FastReads(access, answer_within_s)

    async def read_guarded(who: McpClient, call: GuardedCall, info: ToolInfo
                           ) -> tuple[RunReport | None, bool]:
        if not reads.offered(info):
            return None, False
        return await reads.answer(who, checked(call, info)), True

    tasks = GuardedTasks(
        {name: known.tools[tool] for name, tool in served.items()},
        start=start_guarded, access=access, caller=caller,
        answer_within_s=answer_within_s, approval_url=approval_url,
        read=read_guarded if reads_by_worker else None,
        approvers=[name for name, _ in settings.policy.approvers],
    )
    server: MCPServer = MCPServer(
        name="plangate",
        version=__version__,
        instructions=(
            "Check a plan (check_plan), start it (run_plan), read its report (run_report), "
            "cancel it (cancel_run); or call one tool of the catalogue, guarded (each call a "
            "one-step run). Every step runs guarded by probes of the real systems; a step "
            "that needs approval waits for a credentialed person, never for this client. "
            "Catalogue tools are served as s3_put for s3.put (the title is the catalogue "
            "name, which plans use). The plan language, with an example: the resource "
            f"{LANGUAGE_URI} or the prompt plan_language; the tools and their contracts: "
            f"{CATALOGUE_URI}. Each client sees and cancels only the runs it started."
        ),
        tools=[guarded_tool(known.tools[tool], name, settings)
               for name, tool in sorted(served.items())],
        extensions=[tasks],
    )

    @own_tool(server, READS)
    def check_plan(plan: PlanArg, strict: bool = False) -> CheckResult:
        """Validate and lint a plan (goal, steps) for this deployment; starts nothing. Every
        problem names its step and field."""
        try:
            done = check(plan, settings, strict=strict)
        except PlanError as e:
            return CheckResult(valid=False, problems=[problem(p) for p in e.problems],
                               warnings=[])
        return CheckResult(valid=True, problems=[], warnings=done.warnings)

    @own_tool(server, STARTS)
    async def run_plan(plan: PlanArg, ctx: Context, run_id: str | None = None
                       ) -> RunStarted:
        """Start a run of a plan (checked first: a bad plan starts nothing); its run id. A
        run id you choose must be new (no run, running or ended, had it) and must not begin
        with mcp- (the ids of guarded calls)."""
        who = caller(ctx.request_context)
        if run_id is not None and run_id.startswith(RUN_PREFIX):
            raise ToolError(f"run_id {run_id!r}: ids beginning {RUN_PREFIX!r} are this "
                            "server's (guarded calls); choose another, or none")
        try:
            done = check(plan, settings)
        except PlanError as e:
            raise ToolError("plan rejected: " + "; ".join(e.problems)) from None
        try:
            return RunStarted(run_id=await access.start(who, done, run_id=run_id))
        except (RunIdInUse, RunsLimited) as e:
            raise ToolError(str(e)) from None

    @own_tool(server, READS)
    async def run_report(run_id: str, ctx: Context) -> dict[str, Any]:
        """The run report of a queued, running or ended run this client started: the JSON
        `plangate status --json` prints (its conditions written flat, as in plans)."""
        try:
            api = await access.mine(caller(ctx.request_context), run_id)
            rep = await api.report(run_id)
        except (NotYourRun, UnknownRun, NoWorkerAnswered) as e:
            raise ToolError(str(e)) from None
        # as serialized, not as the model validates: the schema of RunReport would refuse
        # the flat conditions its own serializer writes
        report: dict[str, Any] = json.loads(rep.model_dump_json())
        return report

    @own_tool(server, CANCELS)
    async def cancel_run(run_id: str, reason: str, ctx: Context) -> CancelRequested:
        """Cancel a run this client started: no step is dispatched after it; the reason, and
        this client as the requester, are recorded in its report and its Temporal history."""
        who = caller(ctx.request_context)
        try:
            api = await access.mine(who, run_id)
            await api.cancel(run_id, reason=reason, requester=who.requester)
        except (NotYourRun, UnknownRun, RunEnded) as e:
            raise ToolError(str(e)) from None
        return CancelRequested(run_id=run_id, reason=reason, requester=who.requester)

    @server.resource(CATALOGUE_URI, name="catalogue", mime_type="application/json",
                     description="the deployment's tools and probes: effect classes, argument "
                     "schemas, contracts")
    def catalogue_resource() -> dict[str, Any]:
        return catalogue_json(catalogue(settings.catalogue))

    @server.resource(LANGUAGE_URI, name="plan-language", mime_type="text/markdown",
                     description="the plan language: fields, conditions, bindings, limits, "
                     "and an example plan")
    def language_resource() -> str:
        return language_text()

    @server.prompt(name="plan_language", title="Write a plangate plan")
    def plan_language() -> str:
        """The plan language with an example: read it before writing a plan for check_plan
        and run_plan."""
        return language_text()

    return server


async def serve_stdio(settings: Settings, **options: Any) -> None:
    """Serve on this process's stdin and stdout until the client closes them."""
    await build_server(settings, **options).run_stdio_async()
