"""The one way plangate makes a Temporal client (``connect``): the deployment's connection and
data converter, and nothing a worker needs, so a client (the Python API, the CLI's ``check``,
``run`` and ``status``) imports no tool, no probe and no model client."""

from __future__ import annotations

from temporalio.client import Client

from plangate.worker import metrics, tracing
from plangate.worker.encryption import data_converter
from plangate.world.settings import Settings


async def connect(settings: Settings, *, serve_metrics: bool = False) -> Client:
    """The one way plangate makes a Temporal client: the deployment's connection
    (``settings.temporal``: address, namespace, TLS, API key, gRPC metadata from
    ``temporalio.envconfig``) with the deployment's data converter (``settings.encryption``,
    ``plangate.worker.encryption``) and tracing (``settings.observability``).

    ``serve_metrics`` (a worker's client): on the runtime that serves Prometheus on
    ``settings.observability.metrics_address`` when it names one (``plangate.worker.metrics``);
    a worker built on the client records its metrics there. Otherwise the SDK's default
    runtime.

    The converter is given as such, not through a plugin: ``temporalio.plugin`` loads the SDK's
    worker (0.18 s), which a client (``plangate report``, ``status``) does not need. A worker
    built on the client takes its workflows and activities from ``PlangateWorkerPlugin``."""
    obs = settings.observability
    rt = None
    if serve_metrics and obs.metrics_address:
        rt = metrics.runtime(obs.metrics_address)  # MetricsError before any connection
    return await Client.connect(
        **settings.temporal.connect_config(), data_converter=data_converter(settings.encryption),
        runtime=rt, interceptors=tracing.interceptors(obs),
    )
