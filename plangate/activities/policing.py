"""The deployment's Cedar policies where a call acts (``PLANGATE_POLICIES``, docs/policy.md).

The worker holds the bundle in force (``PolicyBook``): read when it starts, parsed again when
the policy files' bytes change (their digest, never their size or time), so a change while a
run waits is in force at its next call. At the call the tool's activity decides again, from
what it was handed and verified and what its check at the call observed, never from what the
workflow says of the decision:

- the bundle the run was decided under is not the one in force: 412 ``policy_superseded``;
- forbidden (a forbid, or no permit): 403 ``policy_denied``, nothing sent;
- permitted with people: the call needs that many distinct approvers' proofs
  (403 ``approval_missing`` otherwise);
- a write, external or money call is decided against the principal's running totals under
  the effect ledger's lock per principal, in the transaction that records its intent, so a
  limit holds for calls started at once (``world.ledger.begin(gate=)``).

In shadow mode (``PLANGATE_POLICY_MODE=shadow``) every decision is made and nothing is refused
for it. Without ``PLANGATE_POLICIES`` nothing here runs: the settings decide as before.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import JsonValue
from temporalio import activity

from plangate.activities.tools.registry import ToolSpec
from plangate.errors import ConfigurationError
from plangate.plans.amounts import moved
from plangate.plans.catalogue import Catalogue, ToolInfo
from plangate.plans.model import Effect
from plangate.plans.scope import Scope
from plangate.plans.words import many
from plangate.records.calls import ProbeReport, ToolCall
from plangate.records.grants import GrantSeen
from plangate.records.policy import Decision, PolicyRequest, Totals
from plangate.world import decisions, ledger
from plangate.world.clients import World
from plangate.world.errors import ToolError
from plangate.world.policies import Bundle, bundle_read, cents, read_directory, resources_of
from plangate.world.settings import POLICIES_VAR, PolicySettings


def _contents(directory: Path) -> tuple[str, list[tuple[str, bytes]] | None, str]:
    """The policy files' bytes now and their SHA-256 (name and bytes of each); where they
    cannot be read: no files, and why (its first line), which stands in for the digest.
    Read whole on every call: a file edited with its size and time kept (``rsync -a``,
    ``cp -p``) is still a change (a few KB hash in microseconds)."""
    try:
        files = read_directory(directory, POLICIES_VAR)
    except (ConfigurationError, OSError) as e:
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        return f"unreadable: {why}", None, why
    h = hashlib.sha256()
    for name, data in files:
        for part in (name.encode(), data):
            h.update(len(part).to_bytes(8, "big"))
            h.update(part)
    return h.hexdigest(), files, ""


class PolicyBook:
    """The bundle in force on this worker: None without ``PLANGATE_POLICIES``."""

    def __init__(self, policy: PolicySettings, scope: Scope, catalogue: Catalogue) -> None:
        self.policy, self.scope, self.catalogue = policy, scope, catalogue
        self._lock = threading.Lock()
        self._seen: str | None = None  # the digest of the files the bundle was read from
        self._bundle: Bundle | None = None
        self._broken: str | None = None

    @property
    def on(self) -> bool:
        return self.policy.policies is not None

    def current(self) -> Bundle:
        """The bundle now (parsed again when the files' bytes changed). ``ToolError``
        ``policy_denied`` when the files in force cannot be read: no call is decided by a
        bundle nobody wrote."""
        directory = self.policy.policies
        if directory is None:
            raise RuntimeError("no PLANGATE_POLICIES")  # callers ask ``on`` first
        seen, files, why = _contents(directory)
        with self._lock:
            if seen != self._seen:
                if files is None:
                    self._bundle, self._broken = None, why
                else:
                    try:  # the very bytes hashed: a change meanwhile is the next call's
                        self._bundle, self._broken = bundle_read(
                            files, self.policy, self.scope, self.catalogue), None
                    except ConfigurationError as e:
                        self._bundle, self._broken = None, str(e).splitlines()[0]
                self._seen = seen
            if self._bundle is None:
                raise ToolError("policy_denied",
                                f"not called: the policies in force cannot be read: {self._broken}")
            return self._bundle


def reads_observed(bundle: Bundle) -> bool:
    """Whether the decision waits for the check at the call (its ``context.observed``)."""
    return "observed" in bundle.reads


def reads_totals(bundle: Bundle) -> bool:
    """Whether the decision is made against the running totals, under the ledger's lock."""
    return "totals" in bundle.reads


def call_request(
    tool: str, info: ToolInfo | None, effect: Effect, args: Mapping[str, JsonValue],
    principal: str | None, *, now: datetime | None = None, submitter: str | None = None,
    approvals: int = 0, observed: dict[str, JsonValue] | None = None, totals: Totals | None = None,
    approval_asked: bool = False, grant: GrantSeen | None = None,
) -> PolicyRequest:
    """What a decision about a call reads: its tool, effect, arguments, what they name and
    move, its principal and now (the same before the call and at it); the rest is what the
    caller knows (at the call: the submitter, approvals, the check, the running totals)."""
    amount = None if info is None else moved(info, args, strings=False)
    return PolicyRequest(
        principal=principal or "", submitter=submitter or "", tool=tool, effect=effect,
        resources=resources_of(tool, info, args), args=dict(args),
        amount_cents=0 if amount is None else cents(amount), observed=observed or {},
        now=now or datetime.now(UTC), approvals=approvals,
        totals=Totals() if totals is None else totals, approval_asked=approval_asked,
        grant=grant,
    )


def request_at_call(
    spec: ToolSpec[Any], call: ToolCall, checked: ProbeReport | None, submitter: str | None,
    approvals: int, totals: ledger.LedgerTotals | None = None, grant: GrantSeen | None = None,
) -> PolicyRequest:
    """What the policies may read of this call, as the activity knows it (``grant``: the
    standing grant whose use admitted it)."""
    return call_request(
        spec.name, spec, spec.effect, call.step.args, call.on_behalf_of,
        submitter=submitter, approvals=approvals,
        observed=None if checked is None else {r.condition.key(): r.observed
                                               for r in checked.results},
        totals=None if totals is None else totals.in_cents(),
        approval_asked=call.approval_required, grant=grant,
    )


async def judged(
    world: World, spec: ToolSpec[Any], call: ToolCall, decision: Decision, given: int
) -> None:
    """Keep the decision where it is counted, then ``enforce`` it."""
    await keep(world, spec, call, decision)
    enforce(spec, call, decision, given)


async def keep(world: World, spec: ToolSpec[Any], call: ToolCall, decision: Decision) -> None:
    """The decision in ``world.decisions`` (a plain permit is not kept)."""
    await decisions.record(
        world, decision, run_id=activity.info().workflow_id or call.step.run_id,
        plan_version=call.step.plan_version, step=call.step.n, tool=spec.name,
        principal=call.on_behalf_of, at_call=True)


def enforce(spec: ToolSpec[Any], call: ToolCall, decision: Decision, given: int) -> None:
    """Refuse the call where ``decision`` (in force, enforced) says so. ``given``: how many
    distinct approvers' proofs the activity verified for this call."""
    if decision.refuses:
        named = ", ".join(decision.policies) or "no policy permits it (default deny)"
        raise ToolError("policy_denied", f"not called: {spec.name} forbidden by the "
                        f"deployment's policy ({named}): {decision.reason}"[:500],
                        {"bundle": decision.bundle, "policies": list(decision.policies)})
    missing = decision.approvals_missing(given)
    if decision.enforced and missing > 0:
        raise ToolError("approval_missing", (
            f"not called: the deployment's policy ({', '.join(decision.policies)}) asks "
            f"{many(decision.approvers, 'distinct approver')} of {spec.name}; {given} approved"))


def refuse_superseded(call: ToolCall, bundle: Bundle) -> None:
    """A run decided under another bundle than the one in force: 412, nothing sent."""
    if call.policy_bundle != bundle.bundle:
        raise ToolError(
            "policy_superseded",
            f"the run was decided under policy bundle {call.policy_bundle!r}; this "
            f"deployment now enforces {bundle.bundle!r}",
            {"policy_bundle": call.policy_bundle, "current": bundle.bundle},
        )
