"""Who is calling: one identity per MCP client, never a name the client sends.

- Over stdio the server has one client, the process that launched it, submitting with the
  server's own key (``PLANGATE_SUBMITTER_KEY``).
- Over HTTP every request carries a bearer token. ``PLANGATE_MCP_TOKENS`` maps each token to
  a client name and the submitter key that client's runs are signed with, so principals are
  per client: ``CLIENT:TOKEN[:KEY]`` entries separated by commas, or the path of a file with
  one entry a line (``#`` starts a comment). ``KEY`` is a key file's path or an inline
  ``NAME:BASE64`` key; without one the client submits with the server's key.
  ``PLANGATE_MCP_TOKEN`` (one token) is one client named ``token``.

A run started over MCP records who started it in its memo (``MEMO``: the client, its
submitter and the plan's digest), written by this server and nobody an MCP client controls.
A report, a cancel or a task answers only a run whose memo names the asking client and its
submitter, on one of the deployment's queues. Runs started per client are limited
(``PLANGATE_MCP_RUNS_PER_MINUTE``, default 60; 0 lifts the limit), each refusal counted.
"""

from __future__ import annotations

import collections
import hmac
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from plangate.errors import ConfigurationError, PlangateError
from plangate.plans.words import many
from plangate.records.signing import SigningKey
from plangate.servers.tokens import weakness
from plangate.world.settings.keys import signing_keys
from plangate.world.settings.parse import at_least

if TYPE_CHECKING:
    from plangate.mcp.oauth.settings import OAuthSettings

TOKENS_VAR = "PLANGATE_MCP_TOKENS"
TOKEN_VAR = "PLANGATE_MCP_TOKEN"
RATE_VAR = "PLANGATE_MCP_RUNS_PER_MINUTE"
DEFAULT_RUNS_PER_MINUTE = 60
MEMO = "plangate.mcp"
STDIO = "stdio"
CLIENT_SCOPE = "plangate.mcp.client"  # the ASGI scope key plangate.mcp.http sets
SINGLE = "token"


@dataclass(frozen=True)
class McpClient:
    """One MCP client: its name and the key its runs are submitted with."""

    name: str
    submitter_key: SigningKey | None = field(default=None, repr=False, compare=False)

    @property
    def submitter(self) -> str | None:
        return None if self.submitter_key is None else self.submitter_key.name

    @property
    def requester(self) -> str:
        """Who a cancel is recorded as requested by."""
        return f"MCP client {self.name}"

    def memo(self, plan_sha256: str) -> dict[str, Any]:
        return {"client": self.name, "submitter": self.submitter, "plan": plan_sha256}

    def owns(self, memo: Mapping[str, Any] | None) -> bool:
        """Whether a run whose memo is ``memo`` was started by this client."""
        return (isinstance(memo, Mapping) and memo.get("client") == self.name
                and memo.get("submitter") == self.submitter)


class NotYourRun(PlangateError):
    """A run this client did not start (or that is not of this deployment): answered as if
    there were no such run, so a client learns nothing of other clients' runs."""


class RunsLimited(PlangateError):
    """This client started as many runs as the server allows a minute."""


def entries(raw: str, var: str = TOKENS_VAR) -> Iterable[tuple[str, str]]:
    """``(where, entry)``: the variable's comma-separated entries, or a file's lines."""
    path = Path(raw.strip()).expanduser()
    if "," not in raw and ":" not in raw.strip() and path.is_file():
        for i, line in enumerate(path.read_text().splitlines(), 1):
            line = line.split("#", 1)[0].strip()
            if line:
                yield f"{var} file {path} line {i}", line
        return
    for i, entry in enumerate(raw.split(","), 1):
        if entry.strip():
            yield f"{var} entry {i}", entry.strip()


def parse_tokens(raw: str, server_key: SigningKey | None) -> dict[str, McpClient]:
    """Bearer token -> client, from ``PLANGATE_MCP_TOKENS``. Errors name the entry, never a
    token or a key."""

    def strong(where: str, name: str, token: str) -> None:
        weak = weakness(f"{where} (the token of {name})", token)
        if weak is not None:
            raise ConfigurationError(weak)

    return named_clients(raw, TOKENS_VAR, server_key, form="CLIENT:TOKEN[:SUBMITTER_KEY]",
                         noun="token", check=strong)


def named_clients(raw: str, var: str, server_key: SigningKey | None, *, form: str, noun: str,
                  check: Callable[[str, str, str], None] | None = None
                  ) -> dict[str, McpClient]:
    """``NAME:IDENT[:SUBMITTER_KEY]`` entries of ``var`` (IDENT a bearer token, or an OAuth
    client id): IDENT -> client, each name and IDENT once, each given key one client's
    (``one_key_each``); a client given no key submits with ``server_key``. ``check`` may
    refuse an IDENT (a weak token)."""
    found: dict[str, McpClient] = {}
    names: set[str] = set()
    given: list[McpClient] = []
    for where, entry in entries(raw, var):
        name, _, rest = entry.partition(":")
        ident, _, key_text = rest.partition(":")
        name, ident = name.strip(), ident.strip()
        if not name or not ident:
            raise ConfigurationError(f"{where}: not {form}")
        if name in names:
            raise ConfigurationError(f"{where}: a second client named {name}")
        if ident in found:
            raise ConfigurationError(f"{where}: {name} has the {noun} of {found[ident].name}")
        if check is not None:
            check(where, name, ident)
        keys = signing_keys(key_text.strip(), where) if key_text.strip() else ()
        names.add(name)
        found[ident] = McpClient(name, keys[0] if keys else server_key)
        if keys:
            given.append(found[ident])
    one_key_each(given, var)
    return found


def one_key_each(clients: Iterable[McpClient], var: str = TOKENS_VAR) -> None:
    """A key given to two clients would make them one principal to the worker: refused.
    (Clients given none share the server's, as its own clients.)"""
    by_key: dict[str, str] = {}
    for c in clients:
        if c.submitter in by_key:
            raise ConfigurationError(
                f"{var}: clients {by_key[c.submitter]} and {c.name} submit with one key "
                f"({c.submitter}), so one principal; give each client a submitter key of its own"
            )
        by_key[str(c.submitter)] = c.name


@dataclass(frozen=True)
class Clients:
    """The clients a server knows: by bearer token (or by OAuth token, ``oauth``) over HTTP,
    the one client over stdio."""

    scheme: str  # one line for the start-up message, naming no secret
    _by_token: Mapping[str, McpClient] = field(default_factory=dict, repr=False)
    stdio: McpClient | None = None
    oauth: OAuthSettings | None = None

    @classmethod
    def over_stdio(cls, server_key: SigningKey | None) -> Clients:
        return cls("stdio: one client, the server's own submitter key",
                   stdio=McpClient(STDIO, server_key))

    @classmethod
    def over_http(cls, env: Mapping[str, str], server_key: SigningKey | None) -> Clients:
        from plangate.mcp.oauth.settings import ISSUER_VAR, OAuthSettings

        listed, one = env.get(TOKENS_VAR, "").strip(), env.get(TOKEN_VAR, "").strip()
        if listed and one:
            raise ConfigurationError(f"set {TOKENS_VAR} or {TOKEN_VAR}, not both")
        oauth = OAuthSettings.from_env(env, server_key)
        if oauth is not None:
            if listed or one:
                raise ConfigurationError(f"set {ISSUER_VAR} (OAuth) or {TOKENS_VAR} / "
                                         f"{TOKEN_VAR} (static tokens), not both")
            return cls(f"OAuth 2.1 tokens of {oauth.issuer} for {oauth.resource}: "
                       f"{many(len(oauth.by_client_id), 'client')}, each its own identity",
                       oauth=oauth)
        if listed:
            by_token = parse_tokens(listed, server_key)
            if not by_token:
                raise ConfigurationError(f"{TOKENS_VAR} names no client")
            return cls(f"bearer tokens ({TOKENS_VAR}): {len(by_token)} clients, each its own "
                       "identity", by_token)
        if one:
            weak = weakness(TOKEN_VAR, one)
            if weak is not None:
                raise ConfigurationError(weak)
            return cls(f"one bearer token ({TOKEN_VAR}): one client, the server's submitter "
                       "key", {one: McpClient(SINGLE, server_key)})
        return cls("no token (--insecure-local): every local process is one client",
                   stdio=McpClient("local", server_key))

    @property
    def tokens(self) -> bool:
        return bool(self._by_token)

    @property
    def guarded(self) -> bool:
        """Whether every HTTP request must carry a credential (a token, or an OAuth token)."""
        return self.tokens or self.oauth is not None

    def of_token(self, token: str) -> McpClient | None:
        """The client holding ``token``: every token compared in constant time, whichever
        matches, so the time taken says nothing of which one was near."""
        found = None
        for known, client in self._by_token.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                found = client
        return found


def runs_per_minute(env: Mapping[str, str] | None = None) -> int:
    return at_least(os.environ if env is None else env, RATE_VAR,
                    DEFAULT_RUNS_PER_MINUTE, 0)


class StartLimit:
    """At most ``per_minute`` runs started by one client in any 60 s (0: no limit); every
    refusal counted by client (``refused``)."""

    def __init__(self, per_minute: int, clock: Any = time.monotonic) -> None:
        self.per_minute = per_minute
        self._clock = clock
        self._starts: dict[str, collections.deque[float]] = collections.defaultdict(
            collections.deque)
        self.refused: collections.Counter[str] = collections.Counter()

    def admit(self, client: McpClient) -> None:
        if self.per_minute <= 0:
            return
        now = self._clock()
        starts = self._starts[client.name]
        while starts and starts[0] <= now - 60.0:
            starts.popleft()
        if len(starts) >= self.per_minute:
            self.refused[client.name] += 1
            raise RunsLimited(
                f"MCP client {client.name} started {many(len(starts), 'run')} in the last "
                "minute, the "
                f"most this server allows ({RATE_VAR}={self.per_minute}); try again in "
                f"{max(1, int(starts[0] + 60.0 - now) + 1)} s (refused so far: "
                f"{self.refused[client.name]})"
            )
        starts.append(now)
