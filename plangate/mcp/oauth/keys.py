"""The keys an issuer signs its tokens with: its metadata found by RFC 8414 (then OpenID
discovery), its ``jwks_uri`` read, the key set cached and read again when a token names a key it
does not hold (the issuer rotated its keys), at most ``REFETCHES_PER_MINUTE`` times a minute: a
stranger sending tokens with made-up key ids cannot make this server hammer the issuer.

Only asymmetric keys are taken (RSA, EC, OKP): a key set's ``oct`` (shared secret) key is never
a verifying key, whatever a token's header asks."""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx2

from plangate.errors import PlangateError

REFETCHES_PER_MINUTE = 6
RETRY_AFTER_S = 5.0  # after a failed read, the issuer is not asked again for this long
MAX_AGE_S = 3600.0  # a key set older than this is read again before use
ASYMMETRIC = frozenset({"RSA", "EC", "OKP"})

Fetch = Callable[[str], Awaitable[Any]]
log = logging.getLogger(__name__)


class IssuerUnreachable(PlangateError):
    """The issuer's metadata or key set could not be read (or is not what RFC 8414 says)."""


def metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata may be: RFC 8414's well-known URI (inserted before the
    issuer's path), then OpenID discovery's (inserted, then appended)."""
    p = urlsplit(issuer)
    path = p.path.rstrip("/")

    def at(well_known: str) -> str:
        return urlunsplit((p.scheme, p.netloc, well_known, "", ""))

    urls = [at(f"/.well-known/oauth-authorization-server{path}")]
    if path:
        urls.append(at(f"/.well-known/openid-configuration{path}"))
    urls.append(at(f"{path}/.well-known/openid-configuration"))
    return urls


async def _get_json(url: str) -> Any:
    async with httpx2.AsyncClient(timeout=10.0, follow_redirects=False) as http:
        resp = await http.get(url, headers={"Accept": "application/json"})
    if resp.status_code != 200:
        raise IssuerUnreachable(f"{url} answered {resp.status_code}")
    try:
        return resp.json()
    except ValueError:
        raise IssuerUnreachable(f"{url} answered no JSON") from None


class IssuerKeys:
    """The verifying keys of ``issuer`` by key id (``fetch``: GET a URL's JSON)."""

    def __init__(self, issuer: str, *, fetch: Fetch = _get_json,
                 refetches_per_minute: int = REFETCHES_PER_MINUTE,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.issuer = issuer
        self._fetch = fetch
        self._per_minute = refetches_per_minute
        self._clock = clock
        self._jwks_uri: str | None = None
        self._keys: dict[str | None, dict[str, Any]] = {}
        self._read_at: float | None = None
        self._retry_at = float("-inf")
        self._failed = ""
        self._refetches: collections.deque[float] = collections.deque()
        self._lock = asyncio.Lock()
        self.reads = 0  # how many times the key set was read

    async def key(self, kid: str | None) -> dict[str, Any] | None:
        """The JWK of ``kid`` (None: the key set's one key, where it has one), or None where
        the issuer does not publish it, even after reading its key set again.
        ``IssuerUnreachable`` where the keys were never read, or a key unknown here could not
        be looked up; a key set past its age whose issuer does not answer is kept in use."""
        async with self._lock:
            now = self._clock()
            if self._read_at is None:
                await self._read(now)
            elif now - self._read_at > MAX_AGE_S:
                try:
                    await self._read(now)
                except IssuerUnreachable as e:
                    log.warning("%s; the keys read before stay in use", e)
            elif self._find(kid) is None and self._may_refetch(now):
                await self._read(now)
            return self._find(kid)

    def _find(self, kid: str | None) -> dict[str, Any] | None:
        if kid is None:
            return next(iter(self._keys.values())) if len(self._keys) == 1 else None
        return self._keys.get(kid)

    def _may_refetch(self, now: float) -> bool:
        while self._refetches and self._refetches[0] <= now - 60.0:
            self._refetches.popleft()
        if len(self._refetches) >= self._per_minute:
            return False
        self._refetches.append(now)
        return True

    async def _read(self, now: float) -> None:
        """Read the key set; a failure is not tried again for ``RETRY_AFTER_S`` (requests
        meanwhile are told at once), so an issuer that is down is not asked once a request."""
        if now < self._retry_at:
            raise IssuerUnreachable(f"{self._failed} (asked again {RETRY_AFTER_S:.0f} s after "
                                    "it failed)")
        try:
            if self._jwks_uri is None:
                self._jwks_uri = await self._discover()
            jwks = await self._fetch(self._jwks_uri)
            found = jwks.get("keys") if isinstance(jwks, dict) else None
            if not isinstance(found, list):
                raise IssuerUnreachable(f"{self._jwks_uri} is not a JWK set")
        except (IssuerUnreachable, httpx2.HTTPError) as e:
            self._retry_at = now + RETRY_AFTER_S
            why = str(e) if isinstance(e, IssuerUnreachable) else f"{type(e).__name__}: {e}"
            self._failed = f"{self.issuer}'s keys cannot be read: {why}"
            raise IssuerUnreachable(self._failed) from None
        self._keys = {
            k.get("kid"): k for k in found
            if isinstance(k, dict) and k.get("kty") in ASYMMETRIC and k.get("use", "sig") == "sig"
        }
        self._read_at = now
        self.reads += 1

    async def _discover(self) -> str:
        why: list[str] = []
        for url in metadata_urls(self.issuer):
            try:
                meta = await self._fetch(url)
            except IssuerUnreachable as e:
                why.append(str(e))
                continue
            except httpx2.HTTPError as e:
                why.append(f"{url}: {type(e).__name__}: {e}")
                continue
            if not isinstance(meta, dict):
                why.append(f"{url} is not a metadata document")
                continue
            if meta.get("issuer") != self.issuer:  # RFC 8414 3.3: exactly the issuer asked
                raise IssuerUnreachable(f"{url} names issuer {meta.get('issuer')!r}, not "
                                        f"{self.issuer!r}")
            jwks_uri = meta.get("jwks_uri")
            if not isinstance(jwks_uri, str) or not jwks_uri:
                raise IssuerUnreachable(f"{url} names no jwks_uri")
            return jwks_uri
        raise IssuerUnreachable(f"no metadata for issuer {self.issuer}: {'; '.join(why)}")
