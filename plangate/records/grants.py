"""Standing grants: an approver's signed word that calls of one tool, for one principal, whose
arguments keep within stated bounds, may run without a card, a number of times, until a time.

A grant's terms are data, never code: arguments equal to a value (``account_id=acct_1``),
numbers at most a limit (``amount_eur<=50``; the tool's amount argument is compared in its
whole units, ``plans.amounts``, so a tool in cents is bounded in the same units as one in
euros), strings with a prefix (``key^=exports/``). Every argument a grant names must be in the
call and keep its bound; an argument it does not name is free. Its identity is the SHA-256 of
its canonical JSON (its terms); its approver signs those terms (``GRANT``, an Ed25519 signature
like an approval's, ``records.signing``). Pure and deterministic.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Annotated

from pydantic import ConfigDict, Field, JsonValue, StringConstraints

from plangate.plans._base import Model
from plangate.plans.amounts import Moves, moved
from plangate.plans.words import many
from plangate.records import signing

GRANT = "plangate/grant/v1"  # the signature's domain: a grant's is never an approval's
MAX_USES = 10_000
MAX_TTL = timedelta(days=90)  # a standing grant stands at most this long
# the issuer's clock and Postgres's may differ this much: a grant just issued covers at once
CLOCK_SKEW = timedelta(minutes=5)
_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,62}$"
_PRINCIPAL = r"^[A-Za-z_][A-Za-z0-9_.@\-]{0,62}$"
_ID = r"^[0-9a-f]{64}$"

Arg = Annotated[str, StringConstraints(pattern=_NAME)]
Limit = Annotated[str, StringConstraints(pattern=r"^-?[0-9]{1,15}(\.[0-9]{1,6})?$")]
GrantId = Annotated[str, StringConstraints(pattern=_ID)]


class GrantTerms(Model):
    """What an approver grants: the signed part."""

    tool: str = Field(min_length=1, max_length=200)
    principal: str = Field(pattern=_PRINCIPAL)  # the run acts for (``on_behalf_of``)
    equals: dict[Arg, str | int | bool] = Field(default_factory=dict, max_length=16)
    at_most: dict[Arg, Limit] = Field(default_factory=dict, max_length=16)
    prefix: dict[Arg, Annotated[str, StringConstraints(min_length=1, max_length=500)]] = Field(
        default_factory=dict, max_length=16)
    uses: int = Field(ge=1, le=MAX_USES)
    issued_at: datetime
    expires_at: datetime
    approver: str = Field(pattern=signing.NAME.pattern)
    note: str = Field(default="", max_length=300)

    def canonical(self) -> bytes:
        data = self.model_dump(mode="json")
        return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()

    def grant_id(self) -> str:
        return hashlib.sha256(self.canonical()).hexdigest()

    def words(self) -> str:
        """One line for a person: what the grant covers."""
        bounds = [f"{k}={v}" for k, v in sorted(self.equals.items())]
        bounds += [f"{k}<={v}" for k, v in sorted(self.at_most.items())]
        bounds += [f"{k}^={v}" for k, v in sorted(self.prefix.items())]
        where = f" where {', '.join(bounds)}" if bounds else ""
        return (f"{self.tool} for {self.principal}{where}: {many(self.uses, 'use')} until "
                f"{self.expires_at.isoformat()} (granted by {self.approver})")


class Grant(Model):
    """A grant as issued: its terms and its approver's signature over them."""

    terms: GrantTerms
    signature: str = Field(max_length=200)

    @property
    def grant_id(self) -> str:
        return self.terms.grant_id()


def issue(key: signing.SigningKey, terms: GrantTerms) -> Grant:
    """``terms`` signed by ``key`` (whose name must be the terms' approver)."""
    if terms.approver != key.name:
        raise signing.KeyProblem(f"the key is {key.name}'s, the grant names {terms.approver}")
    return Grant(terms=terms, signature=key.sign(GRANT, terms.model_dump(mode="json")))


def signature_refusal(grant: Grant, approvers: Mapping[str, bytes]) -> str | None:
    """Why ``grant`` is not an approver's of this deployment now, or None."""
    t = grant.terms
    public = approvers.get(t.approver)
    if public is None:
        return f"grant {grant.grant_id[:12]}: {t.approver!r} is not an approver of this " \
               "deployment (PLANGATE_APPROVERS)"
    if not signing.verify(public, GRANT, t.model_dump(mode="json"), grant.signature):
        return f"grant {grant.grant_id[:12]}: its signature does not verify with the key of " \
               f"{t.approver}"
    return None


def self_granted(t: GrantTerms, approvers: Mapping[str, bytes], submitter: str | None,
                 submitter_key: bytes | None) -> str | None:
    """Why the grant does not count for a run its approver submitted (by name, or by key), as
    a submitter never approves its own run; else None."""
    if submitter is None:
        return None
    key = approvers.get(t.approver)
    if t.approver == submitter or (key is not None and key == submitter_key):
        return (f"the grant's approver {t.approver} submitted this run: a submitter never "
                "approves its own run")
    return None


def terms_refusal(t: GrantTerms, tool: str, principal: str | None, info: Moves | None,
                  args: Mapping[str, JsonValue], now: datetime) -> str | None:
    """Why a call of ``tool`` for ``principal`` with its fully bound ``args`` is outside
    ``t`` at ``now``, or None. ``info``: the tool's catalogue entry (its amount argument)."""
    if t.tool != tool:
        return f"the grant is of {t.tool}, not {tool}"
    if t.principal != principal:
        return f"the grant is for {t.principal}, the run acts for {principal or 'nobody'}"
    if not t.issued_at - CLOCK_SKEW <= now < t.expires_at:
        return f"the grant is valid from {t.issued_at.isoformat()} to {t.expires_at.isoformat()}"
    for name, value in t.equals.items():
        got = args.get(name)
        if got != value or type(got) is not type(value):
            return f"{name} is {got!r}, the grant covers {value!r} only"
    for name, limit in t.at_most.items():
        amount = _number(info, name, args)
        if amount is None:
            return f"{name} is not a number the grant can bound"
        if amount > Decimal(limit):
            return f"{name} is {amount}, the grant covers at most {limit}"
    for name, start in t.prefix.items():
        got = args.get(name)
        if not isinstance(got, str) or not got.startswith(start):
            return f"{name} is {got!r}, the grant covers values beginning {start!r} only"
    return None


def _number(info: Moves | None, name: str, args: Mapping[str, JsonValue]) -> Decimal | None:
    """The argument ``name`` as a number: the tool's amount in its whole units (``moved``),
    any other a finite JSON number (never a bool, never a string)."""
    if info is not None and info.amount == name:
        return moved(info, args, strings=False)
    value = args.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


class CoverRequest(Model):
    """What a plan run asks the worker (``grant.cover``): is this exact call covered by a
    standing grant? Which run it is, the worker takes from Temporal, never from here."""

    plan_version: int
    step: int
    tool: str
    args: dict[str, JsonValue]  # fully bound, as the call will carry them
    on_behalf_of: str | None = None
    idempotency_key: str
    submitter: str | None = None  # the run's verified submitter: never its own grant's user


class Cover(Model):
    """The worker's answer: the grant that covers the call, one use reserved for its key
    (None: not covered, ``why``)."""

    grant_id: str | None = None
    approver: str | None = None
    why: str = ""


class GrantSeen(Model):
    """A grant as the policies see it at the call (``context.grant``)."""

    model_config = ConfigDict(frozen=True, defer_build=True)  # in a (hashable) PolicyRequest

    id: str
    approver: str
    uses: int
    used: int  # uses taken before this one (reserved or consumed)
