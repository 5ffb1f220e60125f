"""A bearer token checked as a resource server must (the MCP specification's authorization,
RFC 9068's JWT access tokens): a JWT signed by a key its issuer publishes, with an asymmetric
algorithm only (``none`` and HMAC are refused before any key is looked up: a public key is
never taken as a shared secret), issued by the configured issuer, for this server (its
audience names the resource), neither expired nor not yet valid (``LEEWAY_S`` of clock skew).
The scopes it carries and the client it names are read from its claims; whether they suffice
is the guard's to decide (``plangate.mcp.oauth.guard``).

``JwtVerifier`` is the SDK's ``TokenVerifier`` (``verify_token``: an ``AccessToken`` or None);
``check`` says why a token is refused. No reason names the token."""

from __future__ import annotations

from typing import Any

import jwt
from mcp.server.auth.provider import AccessToken

from plangate.errors import PlangateError
from plangate.mcp.oauth.keys import IssuerKeys
from plangate.mcp.oauth.settings import OAuthSettings

ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
                        "ES256", "ES384", "ES512", "EdDSA"})
_KEY_TYPE = {"RS": "RSA", "PS": "RSA", "ES": "EC", "Ed": "OKP"}
LEEWAY_S = 30


class TokenRefused(PlangateError):
    """A bearer token this server does not take; the message says why, never the token."""


def scopes_of(claims: dict[str, Any]) -> list[str]:
    """RFC 9068's ``scope`` (space-separated), else ``scp`` (a list, as some issuers put it)."""
    raw = claims.get("scope", claims.get("scp"))
    if isinstance(raw, str):
        return raw.split()
    if isinstance(raw, list):
        return [s for s in raw if isinstance(s, str)]
    return []


def _audiences(resource: str) -> list[str]:
    """The resource as configured, and with or without its trailing slash."""
    bare = resource.rstrip("/")
    return list(dict.fromkeys([resource, bare, bare + "/"]))


class JwtVerifier:
    """Checks tokens of ``oauth.issuer`` for ``oauth.resource`` (``keys``: the issuer's)."""

    def __init__(self, oauth: OAuthSettings, keys: IssuerKeys | None = None) -> None:
        self.oauth = oauth
        self.keys = keys or IssuerKeys(oauth.issuer)

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            return await self.check(token)
        except TokenRefused:
            return None

    async def check(self, token: str) -> AccessToken:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError:
            raise TokenRefused("the token is not a JWT") from None
        alg, kid = header.get("alg"), header.get("kid")
        if alg not in ALGORITHMS:
            raise TokenRefused(f"the token's algorithm {alg!r} is not accepted (asymmetric "
                               "signatures only)")
        if kid is not None and not isinstance(kid, str):
            raise TokenRefused("the token's key id is not a string")
        jwk = await self.keys.key(kid)
        if jwk is None:
            raise TokenRefused(f"the token is signed with a key {self.oauth.issuer} does not "
                               f"publish (kid {kid!r})")
        if jwk.get("kty") != _KEY_TYPE[alg[:2]] or jwk.get("alg", alg) != alg:
            raise TokenRefused(f"the token's algorithm {alg} is not its key's "
                               f"({jwk.get('alg') or jwk.get('kty')})")
        claims = self._claims(token, jwt.PyJWK(jwk, alg), alg)
        client_id = claims.get(self.oauth.client_claim)
        exp = claims.get("exp")
        sub = claims.get("sub")
        return AccessToken(
            token=token, client_id=client_id if isinstance(client_id, str) else "",
            scopes=scopes_of(claims), expires_at=int(exp) if isinstance(exp, int | float) else None,
            resource=self.oauth.resource, subject=sub if isinstance(sub, str) else None,
            claims=claims,
        )

    def _claims(self, token: str, key: jwt.PyJWK, alg: str) -> dict[str, Any]:
        o = self.oauth
        try:
            claims: dict[str, Any] = jwt.decode(
                token, key, algorithms=[alg], audience=_audiences(o.resource), issuer=o.issuer,
                leeway=LEEWAY_S, options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise TokenRefused("the token has expired") from None
        except jwt.ImmatureSignatureError:
            raise TokenRefused("the token is not valid yet (nbf or iat in the future)") from None
        except jwt.InvalidAudienceError:
            raise TokenRefused(f"the token was not issued for this server (its audience is not "
                               f"{o.resource})") from None
        except jwt.InvalidIssuerError:
            raise TokenRefused(f"the token was not issued by {o.issuer}") from None
        except jwt.MissingRequiredClaimError as e:
            raise TokenRefused(f"the token has no {e.claim} claim") from None
        except jwt.InvalidSignatureError:
            raise TokenRefused("the token's signature does not verify") from None
        except jwt.InvalidTokenError as e:
            raise TokenRefused(f"the token cannot be used ({type(e).__name__})") from None
        return claims
