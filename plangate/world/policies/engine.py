"""A bundle (the deployment's policies, parsed once) and the decision it makes about a call.

The bundle's digest is SHA-256 over, in order: a format tag, the schema's text (with the
catalogue's ``Args``), the built-in policies' text (which the deciding settings generate:
``PLANGATE_APPROVE_EFFECTS``, the allowed buckets and schemas, the artifacts bucket, whether
``PLANGATE_POLICIES`` is set), the mode (``PLANGATE_POLICY_MODE``) and every policy file, name
and bytes, sorted by name. ``bundle = "cedar:" + hex[:16]``. Nothing else is in it: the
directory's path, the other settings, the time.

``decide`` is pure: the request carries everything (the time too), nothing is read.
One Cedar request per resource the call names; the call is permitted only when every one is.
Cedar skips a policy that fails to evaluate (a forbid that errors would not forbid): here any
such error forbids the call, and the failing policies are named. ``decide_all`` decides many
calls (a plan version's steps) as ``decide`` decides each, in one Cedar call where their
entities agree (Cedar parses the entities and runs the batch once: ~0.1 ms a call against ~0.3
ms alone, ``bench.policy``).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import cedarpy
from pydantic import JsonValue

from plangate.plans.catalogue import Catalogue, ToolInfo
from plangate.plans.scope import Scope, table_parts, targets
from plangate.records.policy import (
    CEDAR_BUNDLE,
    Decision,
    Outcome,
    PolicyMode,
    PolicyRequest,
    ResourceRef,
)
from plangate.world.policies.builtin import builtin_policies
from plangate.world.policies.recall import CHANGING, Recall
from plangate.world.policies.schema import (
    CedarType,
    ValueProblem,
    arg_types,
    cedar_args,
    long,
    schema_text,
)
from plangate.world.policies.source import (
    PolicyFileError,
    SourcePolicy,
    read_all,
    read_directory,
)
from plangate.world.settings.policy import POLICIES_VAR, PolicySettings

FORMAT = b"plangate-cedar-bundle/1"
BUILTIN_FILE = "plangate:built-in"
_EVAL_ERROR = re.compile(r"error while evaluating policy `([^`]+)`")
_CACHE_SIZE = 8


@dataclass(frozen=True)
class Bundle:
    """The policies in force, parsed: what ``decide`` evaluates."""

    bundle: str  # cedar:<16 hex>
    digest: str  # the whole SHA-256
    mode: PolicyMode
    policies: Mapping[str, SourcePolicy]  # by id, built-ins first, then files in order
    arg_types: Mapping[str, CedarType]
    schema: str
    _set: Any  # cedarpy.PolicySet
    _schema: Any  # cedarpy.Schema
    # which of the context's ``now``, ``observed`` and ``totals`` any policy names (``reading``)
    reads: frozenset[str] = frozenset(CHANGING)
    _recall: Recall = field(default_factory=Recall, compare=False, repr=False)

    @property
    def ids(self) -> list[str]:
        return list(self.policies)

    @property
    def recalls(self) -> bool:
        """Whether a call may take the guards' decision of the same request (``recall``): its
        policies read nothing that changes between the two."""
        return not self.reads & CHANGING

    def decide(self, request: PolicyRequest) -> Decision:
        return decide(self, request)

    def decide_all(self, requests: Sequence[PolicyRequest]) -> list[Decision]:
        return decide_all(self, requests)

    def remember(self, request: PolicyRequest, decision: Decision) -> None:
        """Keep a decision made before the call (the guards') for the call to take."""
        if self.recalls:
            self._recall.put(request, decision)

    def recall(self, request: PolicyRequest) -> Decision | None:
        """The decision remembered for this very request (made at ``request.now``), where
        the bundle ``recalls``; else None: decide."""
        return self._recall.get(request) if self.recalls else None


_cache: OrderedDict[str, Bundle] = OrderedDict()


def digest_of(
    files: Sequence[tuple[str, bytes]], schema: str, builtin: str, mode: PolicyMode
) -> str:
    h = hashlib.sha256(FORMAT)

    def part(b: bytes) -> None:
        h.update(len(b).to_bytes(8, "big"))
        h.update(b)

    part(schema.encode())
    part(builtin.encode())
    part(mode.encode())
    for name, data in sorted(files):
        part(name.encode())
        part(data)
    return h.hexdigest()


def reading(policies: Sequence[SourcePolicy]) -> frozenset[str]:
    """Which of the context's ``now``, ``observed`` and ``totals`` the policies name. Cedar has
    no computed attribute names, so a policy that reads one names it: a string search of the
    policies' JSON form may say yes wrongly (a string literal), never no wrongly."""
    text = json.dumps([p.est for p in policies])
    return frozenset(a for a in CHANGING if f'"{a}"' in text)


def bundle_of(
    files: Sequence[tuple[str, bytes]], policy: PolicySettings, scope: Scope,
    catalogue: Catalogue,
) -> Bundle:
    """The bundle of these files (name, bytes) and settings; ``PolicyFileError`` names every
    problem of the files. Parsed once per digest (a few are kept)."""
    types_ = arg_types(catalogue)
    schema = schema_text(types_)
    builtin = builtin_policies(policy, scope)
    digest = digest_of(files, schema, builtin, policy.policy_mode)
    if digest in _cache:
        _cache.move_to_end(digest)
        return _cache[digest]
    found = read_all([(BUILTIN_FILE, builtin.encode()), *files], schema, BUILTIN_FILE)
    est = {"staticPolicies": {p.id: p.est for p in found}, "templates": {},
           "templateLinks": []}
    b = Bundle(
        bundle=f"{CEDAR_BUNDLE}{digest[:16]}", digest=digest, mode=policy.policy_mode,
        policies={p.id: p for p in found}, arg_types=types_, schema=schema,
        _set=cedarpy.PolicySet.from_json_str(json.dumps(est)),
        _schema=cedarpy.Schema.from_str(schema), reads=reading(found),
    )
    _cache[digest] = b
    while len(_cache) > _CACHE_SIZE:
        _cache.popitem(last=False)
    return b


def load_bundle(policy: PolicySettings, scope: Scope, catalogue: Catalogue) -> Bundle:
    """The deployment's bundle: its ``PLANGATE_POLICIES`` files (read now) and the built-ins.
    ``ConfigurationError`` (``PolicyFileError`` for the files' problems) when it cannot be
    used: a worker refuses to start."""
    if policy.policies is None:
        return bundle_of([], policy, scope, catalogue)
    return bundle_read(read_directory(policy.policies, POLICIES_VAR), policy, scope, catalogue)


def bundle_read(
    files: Sequence[tuple[str, bytes]], policy: PolicySettings, scope: Scope,
    catalogue: Catalogue,
) -> Bundle:
    """``bundle_of`` the files read from ``PLANGATE_POLICIES`` (``read_directory``): its
    problems name that directory."""
    try:
        return bundle_of(files, policy, scope, catalogue)
    except PolicyFileError as e:
        raise (e.under(policy.policies) if policy.policies is not None else e) from None


def resources_of(tool: str, info: ToolInfo | None, args: Mapping[str, Any]) -> tuple[
        ResourceRef, ...]:
    """What a call names, from its tool's declared writes and reads (``plans.scope``): the
    buckets (with the ``key`` argument, if any) and tables; a name not bound yet, or not a
    string, is not among them. None: the tool itself."""
    out: list[ResourceRef] = []
    if info is not None:
        for declared, read in ((info.writes, False), (info.reads, True)):
            for n, value in targets(declared, args):
                name = value
                if n.kind == "table":
                    schema, table = table_parts(value)
                    name = f"{schema}.{table}"
                key = args.get("key") if n.kind == "bucket" else None
                ref = ResourceRef(kind=n.kind, name=name, read=read,
                                  key=key if isinstance(key, str) else "")
                if ref not in out:
                    out.append(ref)
    return tuple(out) or (ResourceRef(kind="tool", name=tool),)


def _resource_entity(r: ResourceRef, tool: str) -> dict[str, Any]:
    schema = table_parts(r.name)[0] if r.kind == "table" else ""
    return {
        "uid": {"type": "Plangate::Resource", "id": f"{r.kind}:{r.name}:{r.key}:{r.read}"},
        "attrs": {"kind": r.kind, "name": r.name, "key": r.key, "schema": schema,
                  "schema_lower": schema.lower(), "read": r.read, "tool": tool},
        "parents": [],
    }


def _observed(observed: Mapping[str, JsonValue]) -> list[dict[str, str]]:
    return [{"condition": k, "value": v if isinstance(v, str) else json.dumps(v, sort_keys=True)}
            for k, v in sorted(observed.items())]


def _context(bundle: Bundle, r: PolicyRequest) -> dict[str, Any]:
    args, _ = cedar_args(r.args, bundle.arg_types)
    now = r.now
    if now.tzinfo is None:
        raise ValueProblem("now has no time zone")
    utc = now.timestamp()
    return {
        "tool": r.tool, "args": args, "amount_cents": long(r.amount_cents),
        "observed": _observed(r.observed),
        "now": {"epoch_s": long(int(utc)), "hour": now.hour, "minute": now.minute,
                "weekday": now.isoweekday()},
        "approvals": long(r.approvals),
        "totals": {k: long(v) for k, v in r.totals.model_dump().items()},
        "approval_asked": r.approval_asked,
        **({} if r.grant is None else {"grant": {
            "id": r.grant.id, "approver": r.grant.approver, "uses": long(r.grant.uses),
            "used": long(r.grant.used)}}),
    }


def _forbid(bundle: Bundle, r: PolicyRequest, reason: str, ids: Sequence[str] = (),
            errors: Sequence[str] = ()) -> Decision:
    return Decision(outcome=Outcome.FORBID, bundle=bundle.bundle, policies=tuple(ids),
                    decided_at=r.now, errors=tuple(errors), enforced=bundle.mode == "enforce",
                    reason=reason)


@dataclass(frozen=True)
class _Asked:
    """One call put to Cedar: its entities (by uid) and a request per resource it names."""

    entities: dict[tuple[str, str], dict[str, Any]]
    requests: list[dict[str, Any]]


def _uid(e: dict[str, Any]) -> tuple[str, str]:
    return e["uid"]["type"], e["uid"]["id"]


def _asked(bundle: Bundle, r: PolicyRequest) -> _Asked | Decision:
    """What Cedar is asked of the call ``r``; the decision already, where it cannot be put."""
    try:
        context = _context(bundle, r)
    except ValueProblem as e:
        return _forbid(bundle, r, f"the call cannot be put to the policies: {e}", errors=[str(e)])
    principal = {"type": "Plangate::Principal", "id": r.principal or "worker"}
    entities: list[dict[str, Any]] = [{
        "uid": principal, "attrs": {"submitter": r.submitter},
        "parents": [{"type": "Plangate::Submitter", "id": r.submitter}] if r.submitter else [],
    }]
    if r.submitter:
        entities.append({"uid": {"type": "Plangate::Submitter", "id": r.submitter},
                         "attrs": {}, "parents": []})
    resources = r.resources or (ResourceRef(kind="tool", name=r.tool),)
    requests = []
    for res in resources:
        entity = _resource_entity(res, r.tool)
        entities.append(entity)
        requests.append({"principal": principal,
                         "action": {"type": "Plangate::Action", "id": r.effect.value},
                         "resource": entity["uid"], "context": context})
    return _Asked({_uid(e): e for e in entities}, requests)


def decide(bundle: Bundle, r: PolicyRequest) -> Decision:
    """The decision about the call ``r`` describes: pure (``r.now`` is the time decided)."""
    return decide_all(bundle, [r])[0]


def decide_all(bundle: Bundle, rs: Sequence[PolicyRequest]) -> list[Decision]:
    """Each call's decision, as ``decide`` makes it, in as few Cedar calls as their entities
    allow: one, unless two calls name one entity differently (a resource named by two tools:
    its ``tool`` differs), which then go to Cedar apart. Cedar evaluates each request of a
    batch alone (an entity no request reaches changes no answer)."""
    out: list[Decision | None] = [None] * len(rs)
    batches: list[tuple[dict[tuple[str, str], dict[str, Any]], list[tuple[int, _Asked]]]] = []
    for i, r in enumerate(rs):
        asked = _asked(bundle, r)
        if isinstance(asked, Decision):
            out[i] = asked
            continue
        for entities, members in batches:
            if all(entities.get(uid, e) == e for uid, e in asked.entities.items()):
                entities.update(asked.entities)
                members.append((i, asked))
                break
        else:
            batches.append((dict(asked.entities), [(i, asked)]))
    for entities, members in batches:
        results = cedarpy.is_authorized_batch(
            [q for _, a in members for q in a.requests], bundle._set,
            json.dumps(list(entities.values())), schema=bundle._schema)
        at = 0
        for i, a in members:
            out[i] = _judged(bundle, rs[i], results[at:at + len(a.requests)])
            at += len(a.requests)
    return [d for d in out if d is not None]


def _judged(bundle: Bundle, r: PolicyRequest, results: Sequence[Any]) -> Decision:
    """The decision of the call ``r`` from Cedar's answers to its requests."""
    errors = [e for res in results for e in res.diagnostics.errors]
    if errors or any(res.decision is cedarpy.Decision.NoDecision for res in results):
        failing = sorted({m.group(1) for e in errors if (m := _EVAL_ERROR.search(e))})
        named = f" ({', '.join(failing)})" if failing else ""
        return _forbid(bundle, r, f"a policy could not be evaluated{named}: an error forbids",
                       failing, errors or ["no decision"])
    denied = [res for res in results if not res.allowed]
    if denied:
        ids = sorted({i for res in denied for i in res.diagnostics.reasons})
        why = f"forbidden by {', '.join(ids)}" if ids else "no policy permits it (default deny)"
        return _forbid(bundle, r, why, ids)
    permitting: set[str] = set()
    people = 0
    for result in results:
        reasons = [bundle.policies[i] for i in result.diagnostics.reasons]
        if all(p.approval_only for p in reasons):  # approval policies never permit alone
            return _forbid(bundle, r, "no policy permits it (default deny; only approval "
                           f"policies apply: {', '.join(p.id for p in reasons)})")
        permitting |= {p.id for p in reasons}
        people = max([people, *(p.approvers for p in reasons)])
    outcome = Outcome.PERMIT_WITH_PEOPLE if people else Outcome.PERMIT
    said = sorted(permitting)
    reason = (f"{people} distinct approver{'s' * (people > 1)} ({', '.join(said)})" if people
              else f"permitted by {', '.join(said)}")
    return Decision(outcome=outcome, bundle=bundle.bundle, policies=tuple(said),
                    approvers=people, decided_at=r.now, enforced=bundle.mode == "enforce",
                    reason=reason)
