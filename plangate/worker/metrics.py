"""The worker's Prometheus endpoint: Temporal's own SDK metrics and plangate's, on one address.

A worker whose settings name ``PLANGATE_METRICS_ADDRESS`` connects on a Temporal runtime with a
Prometheus exporter bound there (``temporalio.runtime.PrometheusConfig``), and serves
``http://ADDRESS/metrics``. Temporal's metrics keep their ``temporal_`` prefix; plangate's are
recorded through the same runtime, from activities (``activities.metrics``) and workflows
(``workflows.metrics``). Counters carry no ``_total`` suffix and durations are milliseconds, as
Temporal's runtime exports them by default.

A runtime is made once per address and process (each one is a thread pool and a bound port,
for the life of the process). Only workers serve metrics: ``plangate run``, ``status`` and the
other short commands connect without, so a shell that has the variable set does not try to
bind a port the worker already holds.
"""

from __future__ import annotations

import threading

from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

from plangate.activities import metrics as activity_metrics
from plangate.errors import ConfigurationError
from plangate.workflows import metrics as workflow_metrics
from plangate.world.settings import METRICS_ADDRESS_VAR

# Temporal's default buckets (50 ms .. 10 s) suit neither a window of a few milliseconds nor
# one of hours: plangate's histograms get their own (milliseconds).
_SECOND, _MINUTE, _HOUR, _DAY = 1_000.0, 60_000.0, 3_600_000.0, 86_400_000.0
BUCKETS: dict[str, list[float]] = {
    workflow_metrics.CHECK_TO_USE: [
        5, 10, 25, 50, 100, 250, 500, _SECOND, 2.5 * _SECOND, 5 * _SECOND, 10 * _SECOND,
        30 * _SECOND, _MINUTE, 5 * _MINUTE, 15 * _MINUTE, _HOUR,
    ],
    workflow_metrics.PLAN_TO_USE: [
        _SECOND, 5 * _SECOND, 15 * _SECOND, _MINUTE, 5 * _MINUTE, 15 * _MINUTE, _HOUR,
        4 * _HOUR, 12 * _HOUR, _DAY, 3 * _DAY, 7 * _DAY,
    ],
    workflow_metrics.APPROVAL_WAIT: [
        _SECOND, 10 * _SECOND, _MINUTE, 5 * _MINUTE, 15 * _MINUTE, _HOUR, 4 * _HOUR, 8 * _HOUR,
        _DAY, 3 * _DAY, 7 * _DAY,
    ],
}

#: what plangate records itself (besides Temporal's ``temporal_*``)
NAMES = (
    activity_metrics.PROBES,
    activity_metrics.TOOL_CALLS,
    workflow_metrics.ANSWERS,
    workflow_metrics.CHECK_TO_USE,
    workflow_metrics.PLAN_TO_USE,
    workflow_metrics.TOOL_REFUSALS,
    workflow_metrics.APPROVALS_REQUESTED,
    workflow_metrics.APPROVALS_ANSWERED,
    workflow_metrics.APPROVAL_WAIT,
)


class MetricsError(ConfigurationError):
    """The endpoint could not be served (its port is taken, the address is not this host's)."""


_runtimes: dict[str, Runtime] = {}
_lock = threading.Lock()


def runtime(address: str) -> Runtime:
    """The process's Temporal runtime serving Prometheus on ``address`` (made on first use)."""
    with _lock:
        made = _runtimes.get(address)
        if made is None:
            config = PrometheusConfig(bind_address=address, histogram_bucket_overrides=BUCKETS)
            try:
                made = Runtime(telemetry=TelemetryConfig(metrics=config))
            except ValueError as e:  # the core's own words: "Address already in use (os error 98)"
                raise MetricsError(
                    f"{METRICS_ADDRESS_VAR}: cannot serve metrics on {address}: {e}"
                ) from None
            _runtimes[address] = made
        return made


def url(address: str) -> str:
    """Where Prometheus scrapes a worker serving on ``address``."""
    return f"http://{address}/metrics"
