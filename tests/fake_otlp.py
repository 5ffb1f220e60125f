"""A local OTLP/HTTP trace collector for tests: ``POST /v1/traces`` bodies (protobuf
``ExportTraceServiceRequest``, gzip or not) decoded into the spans they carry. Stdlib HTTP on
127.0.0.1 with a free port, served from a daemon thread.

    with FakeCollector() as otlp:
        ... OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=otlp.endpoint ...
        otlp.spans   # every span received, in order
"""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


@dataclass(frozen=True)
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any] = field(default_factory=dict)


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


class FakeCollector:
    def __init__(self) -> None:
        self.spans: list[Span] = []
        self._lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                collector._receive(body)
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}/v1/traces"

    def _receive(self, body: bytes) -> None:
        req = ExportTraceServiceRequest.FromString(body)
        got = [
            Span(s.name, s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(),
                 {a.key: _value(a.value) for a in s.attributes})
            for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans
        ]
        with self._lock:
            self.spans.extend(got)

    def __enter__(self) -> FakeCollector:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()
