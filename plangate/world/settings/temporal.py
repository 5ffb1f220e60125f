"""The Temporal connection and the task queue (``TemporalSettings``), for the connection
(``plangate.client.connection``), the Python API and the worker's queue.

The connection comes from ``temporalio.envconfig``, as every Temporal SDK and the Temporal CLI
read it: a profile from a TOML file (``TEMPORAL_CONFIG_FILE``, else the default
``~/.config/temporalio/temporal.toml``; ``TEMPORAL_PROFILE`` names the profile, else
``default``), overridden by the environment (``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``,
``TEMPORAL_API_KEY``, ``TEMPORAL_TLS``, ``TEMPORAL_TLS_*``, ``TEMPORAL_GRPC_META_*``). With
neither, plangate's defaults: ``localhost:7233``, namespace ``default``, no TLS. An API key turns
TLS on unless TLS is disabled. The API key, the TLS material and the gRPC metadata (which may
carry credentials) never appear in a repr nor in an error message.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from plangate.errors import ConfigurationError
from plangate.world.settings.parse import at_least, text

if TYPE_CHECKING:  # loaded where a profile is read: importing the API needs no Temporal client
    from temporalio.envconfig import ClientConfigProfile, ClientConfigTLS, ClientConnectConfig

TASK_QUEUE_VAR = "PLANGATE_TASK_QUEUE"
# the Temporal Web UI the approval page links runs to (`plangate dev` exports its own)
TEMPORAL_UI_VAR = "PLANGATE_TEMPORAL_UI"
MAX_CACHED_RUNS_VAR = "PLANGATE_MAX_CACHED_RUNS"


@dataclass(frozen=True)
class TemporalSettings:
    address: str = "localhost:7233"
    namespace: str = "default"
    # the profile the connection was read from (None: "default", when the file has one); the
    # API key, TLS (None: off, unless an API key turns it on) and gRPC metadata are secrets
    profile: str | None = None
    # where ``address`` came from, in words (``TEMPORAL_ADDRESS``, a profile); "": nowhere, it
    # is plangate's default (said where it connects: a shell without exports is told so)
    address_from: str = ""
    api_key: str | None = field(default=None, repr=False)
    tls: ClientConfigTLS | None = field(default=None, repr=False)
    rpc_metadata: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    # the deployment's queue: workers poll QUEUE@DIGEST, the queue of their catalogue, and
    # announce it here (records.placement)
    task_queue: str = "plangate"
    # the runs a worker keeps in memory between their workflow tasks (Temporal's sticky cache,
    # max_cached_workflows). A run past it is evicted and replayed from its history when it
    # wakes: a run waiting for a card then costs the worker nothing. A cached run holds about
    # 330 KiB of the worker (bench.scale): Temporal's default of 1,000 made 10,000 runs waiting
    # for a card cost 37 KiB each, 100 made it 7 KiB; 200 is twice the workflow tasks a worker
    # runs at once (the SDK's max_concurrent_workflow_tasks), so a run between its tasks stays
    max_cached_runs: int = 200

    @property
    def tls_enabled(self) -> bool:
        """Whether the client will speak TLS to Temporal (an API key turns it on by default)."""
        if self.tls is not None:
            return self.tls.disabled is not True
        return self.api_key is not None

    def connect_config(self) -> ClientConnectConfig:
        """The keyword arguments of ``temporalio.client.Client.connect`` for this deployment
        (``plangate.client.connection.connect`` is the one place that connects with them). TLS
        certificates and keys given as paths are read here."""
        from temporalio.envconfig import ClientConfigProfile

        profile = ClientConfigProfile(
            address=self.address,
            namespace=self.namespace,
            api_key=self.api_key,
            tls=self.tls,
            grpc_meta=dict(self.rpc_metadata),
        )
        try:
            return profile.to_client_connect_config()
        except OSError as e:
            raise ConfigurationError(
                f"Temporal TLS: cannot read {e.filename}: {e.strerror or type(e).__name__}"
            ) from None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> TemporalSettings:
        queue = text(env, TASK_QUEUE_VAR) or cls.task_queue
        if "@" in queue:  # a worker polls QUEUE@DIGEST, the queue of its catalogue
            raise ConfigurationError(
                f"{TASK_QUEUE_VAR}: {queue!r} has an '@', which names a catalogue's queue "
                "(docs/deployment.md)"
            )
        profile = _profile(env)
        return cls(
            address=profile.address or cls.address,
            address_from=_address_from(env, profile),
            namespace=profile.namespace or cls.namespace,
            profile=text(env, "TEMPORAL_PROFILE"),
            api_key=profile.api_key or None,
            tls=profile.tls,
            rpc_metadata=tuple(sorted(profile.grpc_meta.items())),
            task_queue=queue,
            max_cached_runs=at_least(env, MAX_CACHED_RUNS_VAR, cls.max_cached_runs, 1),
        )


def _address_from(env: Mapping[str, str], profile: ClientConfigProfile) -> str:
    """Where the profile's address came from: the variable, a profile's file, or "" (none)."""
    if env.get("TEMPORAL_ADDRESS"):
        return "TEMPORAL_ADDRESS"
    if not profile.address:
        return ""
    name = env.get("TEMPORAL_PROFILE") or "default"
    return f"profile {name} of {env.get('TEMPORAL_CONFIG_FILE') or _DEFAULT_CONFIG}"


_DEFAULT_CONFIG = "~/.config/temporalio/temporal.toml"  # where the SDK looks without a file named

_TLS_FILES = (
    ("server_root_ca_cert", "TEMPORAL_TLS_SERVER_CA_CERT_PATH", "tls.server_ca_cert_path"),
    ("client_cert", "TEMPORAL_TLS_CLIENT_CERT_PATH", "tls.client_cert_path"),
    ("client_private_key", "TEMPORAL_TLS_CLIENT_KEY_PATH", "tls.client_key_path"),
)


def _profile(env: Mapping[str, str]) -> ClientConfigProfile:
    """The Temporal client profile of ``env`` through ``temporalio.envconfig``; a configuration
    that cannot be used is an error of one line that names what to fix (never a secret: a TOML
    error's quoted line is left out)."""
    from temporalio.envconfig import ClientConfigProfile

    # empty means unset, as for every plangate variable
    given = {k: v for k, v in env.items() if v}
    config_file = given.get("TEMPORAL_CONFIG_FILE")
    if config_file and not os.path.exists(config_file):
        # the SDK would silently use no file at all, and connect somewhere else
        raise ConfigurationError(
            f"TEMPORAL_CONFIG_FILE names {config_file}, which does not exist"
        )
    try:
        profile = ClientConfigProfile.load(override_env_vars=given)
    except RuntimeError as e:  # the SDK's ConfigError: an unknown profile, a file not TOML
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        where = f" ({config_file})" if config_file else ""
        raise ConfigurationError(f"Temporal client configuration{where}: {first}") from None
    tls = profile.tls
    if tls is not None and tls.disabled is not True:
        for attr, var, key in _TLS_FILES:
            source = getattr(tls, attr)
            if isinstance(source, Path) and not source.is_file():
                raise ConfigurationError(
                    f"Temporal TLS: {source} ({var} or the profile's {key}) is not a file"
                )
    return profile
