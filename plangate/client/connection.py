"""The one way plangate makes a Temporal client (``connect``): the deployment's connection and
data converter, and nothing a worker needs, so a client (the Python API, the CLI's ``check``,
``run`` and ``status``) imports no tool, no probe and no model client."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.plugin import SimplePlugin

from plangate.worker import metrics, tracing
from plangate.worker.encryption import data_converter
from plangate.world.settings import EncryptionSettings, Settings


class PlangateClientPlugin(SimplePlugin):
    """What a client needs: the deployment's data converter (``plangate.worker.encryption``: the
    pydantic converter, large payloads compressed, payloads encrypted when keys are set). A
    worker built on the client takes its workflows and activities from ``PlangatePlugin``."""

    def __init__(self, encryption: EncryptionSettings) -> None:
        super().__init__("plangate-client", data_converter=data_converter(encryption))


async def connect(settings: Settings, *, serve_metrics: bool = False) -> Client:
    """The one way plangate makes a Temporal client: the deployment's connection
    (``settings.temporal``: address, namespace, TLS, API key, gRPC metadata from
    ``temporalio.envconfig``) with the deployment's data converter (``settings.encryption``,
    ``plangate.worker.encryption``) and tracing (``settings.observability``).

    ``serve_metrics`` (a worker's client): on the runtime that serves Prometheus on
    ``settings.observability.metrics_address`` when it names one (``plangate.worker.metrics``);
    a worker built on the client records its metrics there. Otherwise the SDK's default
    runtime."""
    obs = settings.observability
    rt = None
    if serve_metrics and obs.metrics_address:
        rt = metrics.runtime(obs.metrics_address)  # MetricsError before any connection
    return await Client.connect(
        **settings.temporal.connect_config(), plugins=[PlangateClientPlugin(settings.encryption)],
        runtime=rt, interceptors=tracing.interceptors(obs),
    )
