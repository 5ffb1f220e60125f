"""What ``plangate mcp --http`` takes as OAuth 2.1 (the MCP specification's authorization, the
server a resource server): who issues its tokens, what it is, the scopes every request needs and
the clients it serves, read from the environment.

- ``PLANGATE_MCP_OAUTH_ISSUER``: the authorization server's issuer identifier (https, or http
  on a loopback address), its metadata found by RFC 8414 or OpenID discovery;
- ``PLANGATE_MCP_OAUTH_RESOURCE``: this server's URL as its clients reach it (``https://
  mcp.example/mcp``), the audience every token must name;
- ``PLANGATE_MCP_OAUTH_SCOPES``: the scopes every request's token must carry (none by default);
- ``PLANGATE_MCP_OAUTH_CLIENTS``: ``NAME:CLIENT_ID[:KEY]`` entries separated by commas, or a
  file's path with one a line, as ``PLANGATE_MCP_TOKENS``: the client a token names (its
  ``client_id`` claim) served as NAME, its runs signed with KEY (else the server's key); a
  token of a client not listed is refused;
- ``PLANGATE_MCP_OAUTH_CLIENT_CLAIM``: the claim naming the client (default ``client_id``, RFC
  9068; ``azp``, ``sub``, ``cid`` or ``appid`` where an issuer names it there)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from plangate.errors import ConfigurationError
from plangate.mcp.clients import McpClient, named_clients
from plangate.records.signing import SigningKey
from plangate.servers.tokens import is_loopback

ISSUER_VAR = "PLANGATE_MCP_OAUTH_ISSUER"
RESOURCE_VAR = "PLANGATE_MCP_OAUTH_RESOURCE"
SCOPES_VAR = "PLANGATE_MCP_OAUTH_SCOPES"
CLIENTS_VAR = "PLANGATE_MCP_OAUTH_CLIENTS"
CLAIM_VAR = "PLANGATE_MCP_OAUTH_CLIENT_CLAIM"
VARS = (ISSUER_VAR, RESOURCE_VAR, SCOPES_VAR, CLIENTS_VAR, CLAIM_VAR)
DEFAULT_CLAIM = "client_id"
# RFC 6749 section 3.3: a scope token; no quote nor backslash, so it goes into a header as is
_SCOPE = re.compile(r"^[\x21\x23-\x5b\x5d-\x7e]+$")
_CLAIM = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")


@dataclass(frozen=True)
class OAuthSettings:
    """A resource server's settings: tokens of ``issuer`` for ``resource`` carrying ``scopes``,
    their clients by the value of ``client_claim``."""

    issuer: str
    resource: str
    scopes: tuple[str, ...] = ()
    client_claim: str = DEFAULT_CLAIM
    by_client_id: Mapping[str, McpClient] = field(default_factory=dict, repr=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str], server_key: SigningKey | None
                 ) -> OAuthSettings | None:
        """The settings ``env`` gives, None where it sets none of them; a
        ``ConfigurationError`` naming the variable where one cannot be used."""
        given = {v: env.get(v, "").strip() for v in VARS}
        if not any(given.values()):
            return None
        for needed in (ISSUER_VAR, RESOURCE_VAR, CLIENTS_VAR):
            if not given[needed]:
                rest = ", ".join(v for v in VARS if given[v])
                raise ConfigurationError(f"{needed} is not set ({rest} is): OAuth needs "
                                         f"{ISSUER_VAR}, {RESOURCE_VAR} and {CLIENTS_VAR}")
        claim = given[CLAIM_VAR] or DEFAULT_CLAIM
        if not _CLAIM.match(claim):
            raise ConfigurationError(f"{CLAIM_VAR}: {claim!r} is not a claim's name")
        return cls(
            issuer=_issuer(given[ISSUER_VAR]), resource=_resource(given[RESOURCE_VAR]),
            scopes=_scopes(given[SCOPES_VAR]), client_claim=claim,
            by_client_id=parse_clients(given[CLIENTS_VAR], server_key),
        )

    def client(self, client_id: str) -> McpClient | None:
        return self.by_client_id.get(client_id)


def _issuer(url: str) -> str:
    """RFC 8414: https, no query nor fragment; http only on a loopback address."""
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname or parts.query \
            or parts.fragment:
        raise ConfigurationError(f"{ISSUER_VAR}: {url!r} is not an issuer identifier (an "
                                 "https URL without query or fragment)")
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        raise ConfigurationError(f"{ISSUER_VAR}: {url} is http: an issuer off this machine "
                                 "must be https")
    return url


def _resource(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname or parts.fragment:
        raise ConfigurationError(f"{RESOURCE_VAR}: {url!r} is not this server's URL (an "
                                 "http(s) URL without fragment, such as https://mcp.example/mcp)")
    return url


def _scopes(raw: str) -> tuple[str, ...]:
    scopes = tuple(dict.fromkeys(s for s in re.split(r"[\s,]+", raw) if s))
    for s in scopes:
        if not _SCOPE.match(s):
            raise ConfigurationError(f"{SCOPES_VAR}: {s!r} is not a scope (RFC 6749 3.3)")
    return scopes


def parse_clients(raw: str, server_key: SigningKey | None) -> dict[str, McpClient]:
    """Client id -> client, from ``PLANGATE_MCP_OAUTH_CLIENTS``."""
    found = named_clients(raw, CLIENTS_VAR, server_key, form="NAME:CLIENT_ID[:SUBMITTER_KEY]",
                          noun="client id")
    if not found:
        raise ConfigurationError(f"{CLIENTS_VAR} names no client")
    return found
