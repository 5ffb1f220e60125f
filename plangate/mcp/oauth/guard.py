"""``plangate mcp --http`` as an OAuth 2.1 resource server (the MCP specification's
authorization, 2025-06-18): every request to ``/mcp`` carries a bearer token of the configured
issuer for this server, answered as RFC 6750 and RFC 9728 say where it does not:

- no token: 401, ``WWW-Authenticate: Bearer resource_metadata="..."`` (where to find the
  issuer), and the scopes it needs;
- a token refused (``plangate.mcp.oauth.verify``): 401, ``error="invalid_token"`` and why;
- a token without every scope ``PLANGATE_MCP_OAUTH_SCOPES`` names: 403,
  ``error="insufficient_scope"`` and the scopes needed;
- a token of a client the deployment does not list: 403, naming the client;
- the issuer's keys cannot be read: 503, nothing served.

A request that passes acts as the listed client (``scope[CLIENT_SCOPE]``) and carries the SDK's
``AuthenticatedUser`` (a session is bound to the client, issuer and subject that opened it).
The protected resource metadata (RFC 9728) is served to anyone at the path RFC 9728 derives
from the resource and at ``/.well-known/oauth-protected-resource``: it names no secret. The log
says why each token was refused, never the token."""

from __future__ import annotations

import json
import logging
import re
from urllib.parse import urlsplit

from mcp.server.auth.handlers.metadata import ProtectedResourceMetadataHandler
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.routes import cors_middleware
from mcp.shared.auth import ProtectedResourceMetadata
from starlette.authentication import AuthCredentials
from starlette.routing import Route, Router
from starlette.types import ASGIApp, Receive, Scope, Send

from plangate.mcp.clients import CLIENT_SCOPE
from plangate.mcp.oauth.keys import IssuerUnreachable
from plangate.mcp.oauth.settings import OAuthSettings
from plangate.mcp.oauth.verify import JwtVerifier, TokenRefused

log = logging.getLogger(__name__)
WELL_KNOWN = "/.well-known/oauth-protected-resource"
_UNSAFE = re.compile(r'[^\x20\x21\x23-\x5b\x5d-\x7e]')  # RFC 6750's error_description


def metadata_paths(resource: str) -> list[str]:
    """RFC 9728 3.1: the well-known path, the resource's path after it; and the bare one."""
    path = urlsplit(resource).path.rstrip("/")
    return list(dict.fromkeys([WELL_KNOWN + path, WELL_KNOWN]))


def metadata_url(resource: str) -> str:
    p = urlsplit(resource)
    return f"{p.scheme}://{p.netloc}{metadata_paths(resource)[0]}"


def _quoted(text: str) -> str:
    return _UNSAFE.sub("?", text)[:300]


class OAuthGuard:
    """Serves ``app`` to the requests a token of ``oauth`` admits (see the module)."""

    def __init__(self, app: ASGIApp, oauth: OAuthSettings,
                 verifier: JwtVerifier | None = None) -> None:
        self.app = app
        self.oauth = oauth
        self.verifier = verifier or JwtVerifier(oauth)
        self.metadata_url = metadata_url(oauth.resource)
        doc = ProtectedResourceMetadata.model_validate({
            "resource": oauth.resource, "authorization_servers": [oauth.issuer],
            "scopes_supported": list(oauth.scopes) or None, "resource_name": "plangate",
        })
        serve = cors_middleware(ProtectedResourceMetadataHandler(doc).handle, ["GET", "OPTIONS"])
        paths = metadata_paths(oauth.resource)
        self.metadata = Router([Route(p, endpoint=serve, methods=["GET", "OPTIONS"])
                                for p in paths])
        self.paths = frozenset(paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] in self.paths:
            await self.metadata(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        scheme, _, token = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            await self._refuse(send, 401, None, "a bearer token is required")
            return
        try:
            access = await self.verifier.check(token)
        except TokenRefused as e:
            log.warning("401 invalid_token: %s", e)
            await self._refuse(send, 401, "invalid_token", str(e))
            return
        except IssuerUnreachable as e:
            log.warning("503: cannot verify tokens: %s", e)
            await self._answer(send, 503, {"error": "temporarily_unavailable",
                                           "error_description": "the issuer's keys cannot be "
                                           "read now"}, [])
            return
        missing = [s for s in self.oauth.scopes if s not in access.scopes]
        if missing:
            why = f"the token lacks the scope {' '.join(missing)}"
            log.warning("403 insufficient_scope: %s (client %r)", why,
                        access.client_id)
            await self._refuse(send, 403, "insufficient_scope", why)
            return
        who = self.oauth.client(access.client_id) if access.client_id else None
        if who is None:
            await self._unlisted(send, access)
            return
        scope["user"] = AuthenticatedUser(access)
        scope["auth"] = AuthCredentials(access.scopes)
        scope[CLIENT_SCOPE] = who
        await self.app(scope, receive, send)

    async def _unlisted(self, send: Send, access: AccessToken) -> None:
        claim = self.oauth.client_claim
        why = (f"client {access.client_id!r} is not a client of this server" if access.client_id
               else f"the token names no client (no {claim} claim)")
        log.warning("403 access_denied: %s", why)
        await self._answer(send, 403, {"error": "access_denied", "error_description": why}, [])

    async def _refuse(self, send: Send, status: int, error: str | None, why: str) -> None:
        """RFC 6750 3: no error code where no token was given; the scopes needed where any."""
        parts = [] if error is None else [f'error="{error}"',
                                          f'error_description="{_quoted(why)}"']
        if self.oauth.scopes and error != "invalid_token":
            parts.append(f'scope="{" ".join(self.oauth.scopes)}"')
        parts.append(f'resource_metadata="{self.metadata_url}"')
        body = {"error": error or "invalid_request", "error_description": why}
        await self._answer(send, status, body,
                           [(b"www-authenticate", ("Bearer " + ", ".join(parts)).encode())])

    @staticmethod
    async def _answer(send: Send, status: int, body: dict[str, str],
                      headers: list[tuple[bytes, bytes]]) -> None:
        raw = json.dumps(body).encode()
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode()),
            (b"cache-control", b"no-store"), *headers]})
        await send({"type": "http.response.body", "body": raw})
