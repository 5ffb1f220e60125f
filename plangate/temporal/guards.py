"""The worker's side of the guard of a team's activities: the table made into plangate tools
(so the probes, the effect ledger, the readers and the policies judge them as they judge a
plan's steps), and the local activities the workflow interceptor asks (``plangate.guard.*``).

Everything protective is derived here from the worker's own table, settings and policies; what
the workflow sends is only which call it is and its arguments, as the activity will receive
them.
"""

from __future__ import annotations

import asyncio
import base64
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, JsonValue, TypeAdapter
from temporalio import activity

from plangate.activities.extensions import Registry, registry_for
from plangate.activities.policing import PolicyBook, request_at_call
from plangate.activities.probe_activity import ProbeActivities
from plangate.activities.tools.registry import CallContext, ToolSpec
from plangate.errors import ConfigurationError
from plangate.plans.catalogue import Catalogue, Contract, Reader
from plangate.plans.guards import needs_approval
from plangate.plans.model import Effect
from plangate.records.calls import ProbeReport, ProbeRequest, StepRef, ToolCall
from plangate.records.interface import (
    TEAM_APPROVERS_ACTIVITY,
    TEAM_CHECK_ACTIVITY,
    TEAM_READ_ACTIVITY,
)
from plangate.records.policy import Outcome
from plangate.temporal.calls import GUARD_VERSION, CheckRequest, GuardCheck, ReadRequest
from plangate.temporal.table import (
    ActivityGuard,
    GuardTable,
    UnboundCheck,
    arguments,
    conditions,
)
from plangate.world import decisions
from plangate.world.clients import World
from plangate.world.errors import ToolError
from plangate.world.settings import Settings

_JSON: TypeAdapter[Any] = TypeAdapter(Any)


class GuardedArgs(BaseModel):
    """A team activity's arguments, as JSON: whatever its converter sends."""

    model_config = ConfigDict(extra="allow", frozen=True)


async def _not_here(args: BaseModel, world: World, ctx: CallContext) -> dict[str, JsonValue]:
    raise ToolError("internal", "a guarded activity is called by its own worker, never here")


def activity_name(fn: Callable[..., Any]) -> str | None:
    defn = getattr(fn, "__temporal_activity_definition", None)
    return getattr(defn, "name", None)


def parameters(fn: Callable[..., Any]) -> list[str]:
    return [p for p in inspect.signature(fn).parameters if p not in ("self", "cls")]


def jsonable(value: Any) -> JsonValue:
    """A team activity's answer as JSON (a pydantic model, a dataclass, plain data)."""
    out: JsonValue = _JSON.dump_python(value, mode="json")
    return out


def reader_spec(name: str, fn: Callable[..., Any]) -> ToolSpec[Any]:
    """The team's reader activity as a read tool for the probes: called with the arguments the
    table maps (by parameter name); None is no record."""

    async def read(args: BaseModel, world: World, ctx: CallContext) -> dict[str, JsonValue]:
        found = fn(**args.model_dump())
        if inspect.isawaitable(found):
            found = await found
        if found is None:
            raise ToolError("not_found", f"{name} found no record")
        record = jsonable(found)
        return record if isinstance(record, dict) else {"value": record}

    return ToolSpec(name, GuardedArgs, Effect.READ, fn=read)


def guarded_spec(name: str, g: ActivityGuard) -> ToolSpec[Any]:
    reader = Reader(g.reader.activity, dict(g.reader.args)) if g.reader is not None else None
    return ToolSpec(
        name, GuardedArgs, g.effect,
        Contract(pre=tuple(c.term() for c in g.pre), post=tuple(c.term() for c in g.post)),
        reader, approval=g.approval, amount=g.amount, amount_unit=g.amount_unit, local_paths=(),
        fn=_not_here,
    )


@dataclass
class Guarded:
    """One worker's guard: its table (with the team's parameter names), the table as plangate
    tools, the world and settings they are judged against. Filled when the worker is
    configured (``bind``) and opened when it runs."""

    table: GuardTable
    settings: Settings
    principal: str | None = None
    specs: dict[str, ToolSpec[Any]] = field(default_factory=dict)
    registry: Registry | None = None
    world: World | None = None
    book: PolicyBook | None = None
    probes: ProbeActivities | None = None
    visible: bool = False

    def bind(self, activities: Mapping[str, Callable[..., Any]], *,
             runs_workflows: bool = False) -> None:
        """The team's activities, by name: the guarded ones' parameters, the readers' calls.
        ``runs_workflows``: this worker's workflows are guarded here (its cards are made and
        its pre conditions read on this worker). ``ConfigurationError`` naming each entry this
        worker cannot guard as the worker running the activity will judge it."""
        base = registry_for(self.settings.catalogue)
        problems = [why for name, g in self.table.activities.items()
                    if (why := _unfit(name, g, activities, runs_workflows, base)) is not None]
        readers = {g.reader.activity for g in self.table.activities.values() if g.reader}
        clash = sorted((set(self.table.activities) | readers) & set(base.tools))
        problems += [f"{name!r} is a tool of plangate's deployment: a team's activity needs "
                     "a name of its own" for name in clash]
        if problems:
            raise ConfigurationError("the guard table does not fit this worker: "
                                     + "; ".join(problems))
        self.table = self.table.with_params(
            {n: parameters(fn) for n, fn in activities.items() if self.table.get(n)})
        specs: dict[str, ToolSpec[Any]] = {}
        for name, g in self.table.activities.items():
            specs[name] = guarded_spec(name, g)
            fn = activities.get(g.reader.activity) if g.reader is not None else None
            if g.reader is not None and fn is not None:
                specs[g.reader.activity] = reader_spec(g.reader.activity, fn)
        registry = Registry()
        registry.add_specs({**base.tools, **specs}, base.probes)
        self.specs, self.registry = specs, registry.seal()

    def open(self, world: World) -> None:
        if self.registry is None:
            self.bind({})
        registry = self.registry
        if registry is None:
            raise RuntimeError("the guard table was not bound")
        self.world = world
        cat = Catalogue(tools=dict(registry.tools), probes=dict(registry.probes))
        self.book = PolicyBook(self.settings.policy, world.settings.scope, cat)
        self.probes = ProbeActivities(world, self.settings.catalogue, registry)

    def ready(self) -> tuple[World, ProbeActivities, PolicyBook]:
        if self.world is None or self.probes is None or self.book is None:
            raise RuntimeError("plangate's guard runs only inside a worker with its plugin")
        return self.world, self.probes, self.book

    def call_of(self, name: str, n: int, key: str, args: dict[str, JsonValue],
                workflow_id: str) -> ToolCall:
        g = self.table.activities[name]
        return ToolCall(
            step=StepRef(run_id=workflow_id, plan_version=GUARD_VERSION, n=n, tool=name,
                         args=args),
            idempotency_key=key, on_behalf_of=self.principal,
            check=conditions(g.pre, args),
        )


def _unfit(name: str, g: ActivityGuard, activities: Mapping[str, Callable[..., Any]],
           runs_workflows: bool, base: Registry) -> str | None:
    """Why this worker cannot guard entry ``name`` (None: it can). Where the activity runs,
    its parameters are its function's (a ``params`` that differs would name a card's
    arguments otherwise than the call's) and its reader is needed (the ledger and the checks
    at the call read through it). Where only its workflows run, ``params`` names the
    arguments, and the reader is needed where a pre condition reads through it (read here
    before a card and after its answer)."""
    entry = f"entry {name!r}"
    fn = activities.get(name)
    if fn is not None and g.params is not None and g.params != parameters(fn):
        return (f"{entry} says params {g.params} and this worker's activity {name} takes "
                f"{parameters(fn)}: drop params, or make it the function's")
    if fn is None and runs_workflows and g.params is None:
        return (f"{entry}: this worker runs the workflows that call {name} but not {name} "
                "itself, so it cannot read the names of its arguments, which its cards show "
                "and the call is checked against: add params: [NAME, ...] to the entry, the "
                "activity's parameters in order")
    reader = g.reader.activity if g.reader is not None else None
    if reader is None or reader in activities:
        return None
    if fn is not None:
        return (f"{entry} names the reader {reader!r}, which is not an activity of this "
                f"worker: {name} runs here, and the effect ledger and the checks at its call "
                "read its record through the reader")
    read_here = [c.probe for c in g.pre
                 if (p := base.probes.get(c.probe)) is not None and p.system == "record"]
    if runs_workflows and read_here:
        return (f"{entry}: its pre condition {read_here[0]} reads through the reader "
                f"{reader!r}, and this worker reads it before a card: register {reader} on "
                "this worker")
    return None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class GuardActivities:
    """The local activities of the workflow interceptor."""

    def __init__(self, guarded: Guarded) -> None:
        self.g = guarded

    @activity.defn(name=TEAM_CHECK_ACTIVITY)
    async def check(self, request: str) -> str:
        return (await self.checked(CheckRequest.model_validate_json(request))).model_dump_json()

    async def checked(self, req: CheckRequest) -> GuardCheck:
        world, probes, book = self.g.ready()
        policy = self.g.settings.policy
        g = self.g.table.get(req.activity)
        spec = self.g.specs.get(req.activity)
        base = GuardCheck(
            effect=g.effect if g else Effect.MONEY, halts=bool(g and g.on_failure == "halt"),
            approvers={n: _b64(k) for n, k in policy.approvers},
            approval_ttl_s=policy.approval_ttl_s, on_behalf_of=self.g.principal,
            policy_bundle=policy.policy_bundle, visible=self.g.visible,
        )
        if g is None or spec is None:
            return base.model_copy(update={
                "refusal": f"{req.activity} is not in this worker's guard table",
                "refusal_code": "not_permitted"})
        args = arguments(req.values, g.params)
        base = base.model_copy(update={"args": args})
        try:
            call = self.g.call_of(req.activity, req.n, req.key, args, req.workflow_id)
            post = conditions(g.post, args)
        except UnboundCheck as e:
            return base.model_copy(update={"refusal": str(e), "refusal_code": "bad_arguments"})
        need = needs_approval(said=False, effect=g.effect, approve_effects=policy.approve_effects,
                              tool_says=g.approval, replanned=False)
        out = base.model_copy(update={"pre": call.check, "post": post, "approval": need})
        if book.on:
            try:
                cedar = await asyncio.to_thread(book.current)
            except ToolError as e:
                return out.model_copy(update={"refusal": e.detail, "refusal_code": e.code})
            call = call.model_copy(update={"approval_required": need})
            request = request_at_call(spec, call, None, None, 0)
            d = cedar.decide(request)
            cedar.remember(request, d)  # the call takes it where it asks the same
            if not req.again:
                await decisions.record(world, d, run_id=req.workflow_id,
                                       plan_version=GUARD_VERSION, step=req.n, tool=req.activity,
                                       principal=self.g.principal, at_call=False)
            out = out.model_copy(update={"policy": d.mark(), "policy_bundle": d.bundle})
            if d.refuses:
                named = ", ".join(d.policies) or "no policy permits it (default deny)"
                why = (f"{req.activity} is forbidden by the deployment's policy ({named}, "
                       f"bundle {d.bundle}): {d.reason}")
                return out.model_copy(update={"refusal": why[:2000],
                                              "refusal_code": "policy_denied"})
            if d.enforced and d.outcome is Outcome.PERMIT_WITH_PEOPLE:
                out = out.model_copy(update={"approval": True})
        if call.check and out.approval:
            # a card shows what the pre conditions observe; without one they are read only at
            # the call, the instant before the activity acts (as a plan step's are)
            read = await probes.read(ProbeRequest(step=call.step, conditions=call.check,
                                                  idempotency_key=req.key))
            out = out.model_copy(update={"read": read})
        return out

    @activity.defn(name=TEAM_READ_ACTIVITY)
    async def read(self, request: str) -> str:
        req = ReadRequest.model_validate_json(request)
        _, probes, _ = self.g.ready()
        report: ProbeReport = await probes.evaluate(ProbeRequest(
            step=req.step, conditions=req.conditions, idempotency_key=req.key))
        return report.model_dump_json()

    @activity.defn(name=TEAM_APPROVERS_ACTIVITY)
    async def approvers(self, workflow_id: str) -> str:
        """Who may answer a card now: name -> public key, base64 (a JSON object)."""
        import json

        return json.dumps({n: _b64(k) for n, k in self.g.settings.policy.approvers})
