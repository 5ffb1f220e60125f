"""``plangate codec-server``: Temporal's remote codec protocol over the deployment's codec
(``plangate.worker.encryption.payload_codec``), so the Temporal Web UI (and ``temporal workflow show
--codec-endpoint``) of an operator who holds the keys shows a run's payloads decrypted, while
Temporal's database keeps them encrypted.

The protocol (Temporal's "Codec Server Protocol"):

- ``POST .../decode`` and ``POST .../encode``: only the last segment of the path counts, so
  ``/decode`` and ``/{namespace}/decode`` are the same endpoint; the body is a
  ``temporal.api.common.v1.Payloads`` message in protobuf JSON (``{"payloads": [{"metadata":
  {"encoding": "<base64>"}, "data": "<base64>"}]}``) and so is the answer. A body that is not
  such JSON, or a payload that does not decode, answers 400 with one line saying why (a key id,
  never a key). ``X-Namespace`` is accepted and not needed: the keys are the deployment's.
- CORS for the Web UI: a preflight (``OPTIONS``) from an allowed origin answers with
  ``Access-Control-Allow-Origin`` (that origin), the methods, and the headers the UI sends
  (``Content-Type``, ``X-Namespace``, ``Authorization``); a request from a browser page of any
  other origin is refused (403).
- With ``PLANGATE_CODEC_TOKEN`` set, every ``POST`` must carry ``Authorization: Bearer
  <token>`` (401 otherwise); a preflight never carries it and is not asked for it.

It fails closed: whoever can reach it decrypts (and encrypts) with the deployment's keys, so it
starts only with a token of real entropy (``plangate.servers.tokens``), or, without one, only on a
loopback address and when told so (``insecure_local``, ``--insecure-local``); anything else is
refused before a socket is bound (``CodecServerRefused``).

A standard-library threading HTTP server: each request is decoded in its own thread, the
codec run to completion there.
"""

from __future__ import annotations

import asyncio
import hmac
import socket
import sys
from collections.abc import Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads
from temporalio.converter import PayloadCodec

from plangate.errors import ConfigurationError
from plangate.plans.visible import visible
from plangate.servers.tokens import access_refusal
from plangate.worker.encryption import DecryptionError, payload_codec
from plangate.world.settings import CODEC_TOKEN_VAR, EncryptionSettings

DEFAULT_PORT = 8081
# The Web UI on this machine, by either name a browser may have been given: temporalio/ui's
# port and the dev server's (``temporal server start-dev``, ``plangate dev``).
DEFAULT_ORIGINS = tuple(
    f"http://{host}:{port}" for port in (8080, 8233) for host in ("localhost", "127.0.0.1")
)
MAX_BODY_BYTES = 16 * 1024 * 1024  # Temporal refuses a payload of 2 MiB; a page holds a few
ALLOW_HEADERS = "Content-Type, X-Namespace, Authorization"


class CodecServer(ThreadingHTTPServer):
    """The server: the codec, the allowed origins and the token its handlers read."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        codec: PayloadCodec,
        origins: Sequence[str],
        token: str | None,
    ) -> None:
        self.codec = codec
        self.origins = frozenset(o.rstrip("/") for o in origins)
        self.token = token
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)

    @property
    def url(self) -> str:
        host, port = str(self.server_address[0]), self.server_address[1]
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class CodecServerRefused(ConfigurationError):
    """The codec server will not start as asked (no token off loopback, a weak token): one line
    saying why and what to do."""


def refusal(settings: EncryptionSettings, host: str, insecure_local: bool) -> str | None:
    """Why a codec server on ``host`` with these settings must not start, or None."""
    return access_refusal("codec-server", CODEC_TOKEN_VAR, settings.codec_token, host,
                          insecure_local, "decrypt the deployment's payloads")


def codec_server(
    settings: EncryptionSettings,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    origins: Sequence[str] = DEFAULT_ORIGINS,
    insecure_local: bool = False,
) -> CodecServer:
    """A codec server on ``host:port`` (0: any free port) for the deployment's keys and
    ``PLANGATE_CODEC_TOKEN``, bound and not yet serving (``serve_forever``).

    ``CodecServerRefused`` before anything is bound: without a token unless ``host`` is a
    loopback address and ``insecure_local`` says a token-less server is meant; with a weak
    token."""
    why = refusal(settings, host, insecure_local)
    if why is not None:
        raise CodecServerRefused(why)
    return CodecServer((host, port), payload_codec(settings), origins, settings.codec_token)


class _Handler(BaseHTTPRequestHandler):
    server: CodecServer
    server_version = "plangate-codec"
    error_content_type = "text/plain; charset=utf-8"
    error_message_format = "%(message)s\n"
    _ENDPOINTS: ClassVar[tuple[str, ...]] = ("encode", "decode")

    def do_OPTIONS(self) -> None:
        origin = self.headers.get("Origin")
        if origin is None or origin.rstrip("/") not in self.server.origins:
            self._plain(HTTPStatus.FORBIDDEN, f"origin {origin!r} is not allowed")
            return
        self.send_response(HTTPStatus.NO_CONTENT)
        self._cors(origin)
        self.send_header("Access-Control-Allow-Methods", "POST, OPTIONS")
        self.send_header("Access-Control-Allow-Headers", ALLOW_HEADERS)
        self.send_header("Access-Control-Max-Age", "600")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        origin = self.headers.get("Origin")
        if origin is not None and origin.rstrip("/") not in self.server.origins:
            self._plain(HTTPStatus.FORBIDDEN, f"origin {origin!r} is not allowed")
            return
        endpoint = self.path.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
        if endpoint not in self._ENDPOINTS:
            self._plain(HTTPStatus.NOT_FOUND, "POST to .../encode or .../decode", origin)
            return
        if not self._authorized():
            self._plain(HTTPStatus.UNAUTHORIZED, "a bearer token is required", origin,
                        {"WWW-Authenticate": "Bearer"})
            return
        body = self._body(origin)
        if body is None:
            return
        try:
            payloads = json_format.Parse(body, Payloads())
        except (json_format.ParseError, UnicodeDecodeError) as e:
            self._plain(HTTPStatus.BAD_REQUEST, f"not Payloads in protobuf JSON: {e}", origin)
            return
        codec = self.server.codec
        try:
            if endpoint == "decode":
                out = asyncio.run(codec.decode(payloads.payloads))
            else:
                out = asyncio.run(codec.encode(payloads.payloads))
        except DecryptionError as e:
            self._plain(HTTPStatus.BAD_REQUEST, str(e), origin)
            return
        except Exception as e:  # a payload the codec cannot read: say what, and go on serving
            self._plain(HTTPStatus.BAD_REQUEST, f"cannot {endpoint}: {type(e).__name__}", origin)
            return
        answer = json_format.MessageToJson(Payloads(payloads=out), indent=None).encode()
        self.send_response(HTTPStatus.OK)
        self._cors(origin)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def do_GET(self) -> None:
        self._plain(HTTPStatus.METHOD_NOT_ALLOWED, "POST .../encode or .../decode",
                    self.headers.get("Origin"), {"Allow": "POST, OPTIONS"})

    def _authorized(self) -> bool:
        token = self.server.token
        if token is None:
            return True
        given = self.headers.get("Authorization") or ""
        return hmac.compare_digest(given.encode(), f"Bearer {token}".encode())

    def _body(self, origin: str | None) -> bytes | None:
        raw = self.headers.get("Content-Length")
        if raw is None or not raw.strip().isdigit():
            self._plain(HTTPStatus.LENGTH_REQUIRED, "a Content-Length is required", origin)
            return None
        length = int(raw)
        if length > MAX_BODY_BYTES:
            self._plain(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                        f"a body of at most {MAX_BODY_BYTES} bytes", origin)
            return None
        return self.rfile.read(length)

    def _cors(self, origin: str | None) -> None:
        if origin is not None and origin.rstrip("/") in self.server.origins:
            self.send_header("Access-Control-Allow-Origin", origin)
            self.send_header("Access-Control-Allow-Credentials", "true")
        self.send_header("Vary", "Origin")

    def _plain(
        self,
        status: HTTPStatus,
        text: str,
        origin: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        data = (text + "\n").encode()
        self.send_response(status)
        self._cors(origin)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        # the request line and status only: never a body, never a header (the token); a
        # path is a client's text, shown escaped (plans.visible)
        print(visible(f"plangate codec-server: {self.address_string()} {format % args}"),
              file=sys.stderr)


def describe(server: CodecServer, settings: EncryptionSettings) -> str:
    """One line for the operator: where it listens, for which keys and origins."""
    keys = ", ".join(settings.key_ids)
    what = f"keys {keys}" if keys else "no PLANGATE_ENCRYPTION_KEYS: decompression only"
    token = (
        "; bearer token required" if settings.codec_token
        else "; no token: any process on this machine may use it (--insecure-local)"
    )
    origins = ", ".join(sorted(server.origins)) or "none"
    return f"plangate: codec server on {server.url} ({what}; Web UI origins: {origins}{token})"

