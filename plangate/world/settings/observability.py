"""Where traces and metrics go (``ObservabilitySettings``): for ``plangate.worker.tracing``
and a worker's Prometheus endpoint (``plangate.worker.metrics``)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass

from plangate.errors import ConfigurationError
from plangate.world.settings.parse import optional

METRICS_ADDRESS_VAR = "PLANGATE_METRICS_ADDRESS"


@dataclass(frozen=True)
class ObservabilitySettings:
    # where traces go over OTLP/HTTP (plangate.worker.tracing); None: no traces
    otlp_traces_endpoint: str | None = None
    # where a worker serves its Prometheus endpoint (plangate.worker.metrics); None: nowhere
    metrics_address: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ObservabilitySettings:
        return cls(
            otlp_traces_endpoint=_otlp(env),
            metrics_address=optional(env, METRICS_ADDRESS_VAR, metrics_address),
        )


def metrics_address(raw: str) -> str:
    """``PLANGATE_METRICS_ADDRESS``: where a worker serves its Prometheus endpoint, an IP
    address and a port (``127.0.0.1:9464``, ``0.0.0.0:9464``, ``[::]:9464``). Temporal's core
    binds it as a socket address: a host name is not resolved, and port 0 would hide the port
    it got, so both are refused here, in one line naming the variable."""
    text = raw.strip()
    host, sep, port = text.rpartition(":")
    try:
        if not sep or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise ValueError(port)
        if host.startswith("[") and host.endswith("]"):
            ipaddress.IPv6Address(host[1:-1])
        else:
            ipaddress.IPv4Address(host)
    except ValueError:
        raise ConfigurationError(
            f"{METRICS_ADDRESS_VAR} must be an IP address and a port from 1 to 65535 "
            f"(127.0.0.1:9464, 0.0.0.0:9464, [::]:9464), not {raw!r}"
        ) from None
    return text


def _otlp(env: Mapping[str, str]) -> str | None:
    """OpenTelemetry's own variables: the traces endpoint, else the base endpoint's."""
    name, url = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    suffix = ""
    if not url and env.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        name, url = "OTEL_EXPORTER_OTLP_ENDPOINT", env["OTEL_EXPORTER_OTLP_ENDPOINT"]
        suffix = "/v1/traces"
    if not url:
        return None
    if not re.match(r"^https?://[^/\s]+", url):
        raise ConfigurationError(f"{name} must be an http:// or https:// URL, not {url!r}")
    return url.rstrip("/") + suffix if suffix else url
