"""Spans of plangate's own around a tool call or a probe, when tracing is on
(``plangate.worker.tracing`` hands the world a tracer); nothing at all when it is off."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

from opentelemetry.trace import Span, Status, StatusCode, Tracer


@contextlib.contextmanager
def span(
    tracer: Tracer | None, name: str, attributes: Mapping[str, str | int]
) -> Iterator[Span | None]:
    """A span named ``name``, a child of the activity's own (the Temporal interceptor's); an
    exception marks it failed and goes on."""
    if tracer is None:
        yield None
        return
    with tracer.start_as_current_span(name, attributes=dict(attributes)) as s:
        try:
            yield s
        except Exception as e:
            s.set_status(Status(StatusCode.ERROR, type(e).__name__))
            raise
