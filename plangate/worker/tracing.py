"""Traces: when an OTLP endpoint is configured (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, or
``OTEL_EXPORTER_OTLP_ENDPOINT`` + ``/v1/traces``), every plangate client and the workers built
on it carry the Temporal SDK's OpenTelemetry interceptor (spans for starting and running the
run's workflow and each activity, propagated through Temporal headers), and the tool and probe
activities add spans of their own: ``step N TOOL`` and ``probe NAME``.

The tracer provider is plangate's own (not the process's global one), made once per endpoint
and handed to the interceptor and, through the world, to the activities. Spans are exported in
batches over OTLP/HTTP; ``flush`` exports what is pending (the CLI calls it before it exits).
Needs ``pip install 'plangate[otel]'``.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.trace import Tracer

from plangate.errors import ConfigurationError
from plangate.world.settings import ObservabilitySettings

SERVICE = "plangate"
_providers: dict[str, Any] = {}  # endpoint -> TracerProvider


class TracingUnavailable(ConfigurationError):
    """An OTLP endpoint is configured but the OpenTelemetry SDK is not installed."""


def tracer(settings: ObservabilitySettings) -> Tracer | None:
    """plangate's tracer for the configured endpoint; None when none is configured."""
    endpoint = settings.otlp_traces_endpoint
    if endpoint is None:
        return None
    if endpoint not in _providers:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError as e:
            raise TracingUnavailable(
                f"an OTLP endpoint is configured ({endpoint}) but the OpenTelemetry SDK is "
                "not installed: pip install 'plangate[otel]'"
            ) from e
        provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
        _providers[endpoint] = provider
    t: Tracer = _providers[endpoint].get_tracer(SERVICE)
    return t


def interceptors(settings: ObservabilitySettings) -> list[Any]:
    """The Temporal OpenTelemetry interceptor on plangate's tracer, or none."""
    t = tracer(settings)
    if t is None:
        return []
    from temporalio.contrib.opentelemetry import TracingInterceptor

    return [TracingInterceptor(t)]


def flush(timeout_ms: int = 5000) -> None:
    """Export the spans still pending, of every provider made here."""
    for provider in _providers.values():
        provider.force_flush(timeout_ms)


def shutdown() -> None:
    for provider in _providers.values():
        provider.shutdown()
    _providers.clear()
