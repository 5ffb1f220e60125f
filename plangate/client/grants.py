"""Standing grants from the client's side (``records.grants``, ``world.grants``): issued,
signed with an approver key of this process (``PLANGATE_APPROVER_KEY``), listed and revoked in
the deployment's Postgres. Every term is checked before anything is signed or written: a tool
of the deployment's catalogue, arguments it takes, numbers and values of the right kind, a
number of uses and an expiry within bounds (``BadGrant``, one line naming what is wrong)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation

from pydantic import ValidationError

from plangate.activities.catalogue import catalogue
from plangate.records.grants import MAX_TTL, MAX_USES, Grant, GrantTerms, issue
from plangate.records.signing import SigningKey
from plangate.world import grants
from plangate.world.clients import World
from plangate.world.settings import CatalogueSettings

_DURATION = re.compile(r"^([0-9]{1,6})([smhd])$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class BadGrant(ValueError):
    """A grant's terms that cannot be issued (or a grant id that names none): why."""


def duration(text: str) -> timedelta:
    """``90s``, ``30m``, ``8h``, ``7d``."""
    m = _DURATION.fullmatch(text.strip())
    if m is None:
        raise BadGrant(f"--expires-in {text!r} is not a duration such as 30m, 8h or 7d")
    return timedelta(seconds=int(m.group(1)) * _UNIT[m.group(2)])


def pairs(given: list[str], flag: str) -> dict[str, str]:
    """``NAME=VALUE`` each, a name once."""
    out: dict[str, str] = {}
    for item in given:
        name, eq, value = item.partition("=")
        if not eq or not name.strip():
            raise BadGrant(f"{flag} {item!r} is not NAME=VALUE")
        if name.strip() in out:
            raise BadGrant(f"{flag} names {name.strip()} twice")
        out[name.strip()] = value
    return out


def terms(cat: CatalogueSettings, key: SigningKey, *, tool: str, principal: str,
          equals: Mapping[str, str | int | bool], at_most: Mapping[str, str],
          prefix: Mapping[str, str], uses: int, expires_in: timedelta, note: str = "",
          now: datetime | None = None) -> GrantTerms:
    """The terms, each checked against the tool's arguments."""
    info = catalogue(cat).tools.get(tool)
    if info is None:
        raise BadGrant(f"{tool!r} is not a tool of this deployment's catalogue")
    fields = info.args.model_fields
    for flag, names in (("--arg", equals), ("--at-most", at_most), ("--prefix", prefix)):
        for name in names:
            if name not in fields:
                raise BadGrant(f"{flag} {name}: {tool} takes no argument {name} "
                               f"(it takes {', '.join(sorted(fields))})")
    for name, limit in at_most.items():
        try:
            if not Decimal(limit).is_finite():
                raise InvalidOperation
        except InvalidOperation:
            raise BadGrant(f"--at-most {name}={limit}: {limit!r} is not a number") from None
    if not 1 <= uses <= MAX_USES:
        raise BadGrant(f"--uses {uses}: a grant has 1 to {MAX_USES} uses")
    if not timedelta(0) < expires_in <= MAX_TTL:
        raise BadGrant(f"--expires-in: a grant stands more than 0 s and at most {MAX_TTL.days} "
                       "days")
    issued = (now or datetime.now(UTC)).replace(microsecond=0)
    try:
        return GrantTerms(tool=tool, principal=principal, equals=dict(equals),
                          at_most={k: str(Decimal(v)) for k, v in at_most.items()},
                          prefix=dict(prefix), uses=uses, issued_at=issued,
                          expires_at=issued + expires_in, approver=key.name, note=note)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise BadGrant(f"the grant's {where}: {first['msg']}") from None


async def issued(world: World, key: SigningKey, t: GrantTerms) -> Grant:
    """``t`` signed with ``key`` and kept."""
    grant = issue(key, t)
    await grants.store(world, grant)
    return grant


async def revoked(world: World, grant_id: str, by: str) -> datetime:
    """The grant revoked (its time); ``BadGrant`` where no grant has that id."""
    if not re.fullmatch(r"[0-9a-f]{64}", grant_id):
        raise BadGrant(f"{grant_id!r} is not a grant id (64 hexadecimal digits, as grant list "
                       "prints it)")
    at = await grants.revoke(world, grant_id, by)
    if at is None:
        raise BadGrant(f"no grant {grant_id}")
    return at
