"""Configuration by environment (DESIGN.md section 7), read once, at start, by the top of the
house (the CLI, the Python API's ``Plangate.connect``, the worker's assembly, the dev stack),
which hands each part only where it is needed:

    Settings.from_env(env)          the whole, every part parsed once from ``env``
    ├── temporal       TemporalSettings       connection, task queue   client.connection
    ├── world          WorldSettings          Postgres, S3, work dir,  World, tools, probes,
    │                                         scope, artifacts         the plan check
    ├── catalogue      CatalogueSettings      demo systems, extensions the registry, check,
    │                                                                  the re-planner's prompt
    ├── model          ModelSettings          re-planner, model        replanner, plangate plan
    ├── policy         PolicySettings         approvals, policy        guard.resolve, the tools'
    │                                         bundle, approvers,       checks at the call, the
    │                                         submitters, Cedar        review of a re-plan,
    │                                         policies and their mode  world.policies
    ├── runs           RunSettings            history bound, outage    guard.resolve (the run's
    │                                         patience                 limits), each run's input
    ├── observability  ObservabilitySettings  traces, metrics          tracing, metrics
    ├── encryption     EncryptionSettings     payload keys, codec      worker.encryption,
    │                                         token                    servers.codec
    └── identity       Identity               this process's approver  the API, the approval
                                              and submitter keys       page

``env`` is always an argument (the top passes ``os.environ``): nothing below the CLI and the
assembly reads the process's environment (``tests/test_settings.py`` scans for it). As for every
plangate variable, an empty value counts as unset; a value that cannot be used is a
``ConfigurationError`` of one line naming the variable. Secrets (the Temporal API key, TLS
material and gRPC metadata, the model's API key, the encryption keys, the codec token, the
signing keys) never appear in a repr nor in an error message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from plangate.world.settings.catalogue import DEMO_SYSTEMS_VAR, EXTENSIONS_VAR, CatalogueSettings
from plangate.world.settings.encryption import (
    CODEC_TOKEN_VAR,
    ENCRYPTION_KEY_BYTES,
    ENCRYPTION_KEYS_VAR,
    EncryptionSettings,
    parse_encryption_keys,
)
from plangate.world.settings.keys import (
    APPROVER_KEY_VAR,
    RECEIPT_KEY_VAR,
    SUBMITTER_KEY_VAR,
    Identity,
    signing_keys,
)
from plangate.world.settings.model import ModelSettings, Replanner
from plangate.world.settings.observability import (
    METRICS_ADDRESS_VAR,
    ObservabilitySettings,
    metrics_address,
)
from plangate.world.settings.parse import flag, parse_duration
from plangate.world.settings.policy import (
    APPROVE_EFFECTS_VAR,
    APPROVERS_VAR,
    POLICIES_VAR,
    POLICY_BUNDLE_VAR,
    POLICY_MODE_VAR,
    SUBMITTERS_VAR,
    PolicySettings,
    parse_submitters,
)
from plangate.world.settings.runs import RunSettings
from plangate.world.settings.temporal import TEMPORAL_UI_VAR, TemporalSettings
from plangate.world.settings.world import ARTIFACTS_VAR, WorldSettings


@dataclass(frozen=True)
class Settings:
    """A deployment's settings, whole: what the top of the house reads once and takes apart."""

    temporal: TemporalSettings = field(default_factory=TemporalSettings)
    world: WorldSettings = field(default_factory=WorldSettings)
    catalogue: CatalogueSettings = field(default_factory=CatalogueSettings)
    model: ModelSettings = field(default_factory=ModelSettings)
    policy: PolicySettings = field(default_factory=PolicySettings)
    runs: RunSettings = field(default_factory=RunSettings)
    observability: ObservabilitySettings = field(default_factory=ObservabilitySettings)
    encryption: EncryptionSettings = field(default_factory=EncryptionSettings)
    identity: Identity = field(default_factory=Identity)

    @classmethod
    def from_env(cls, env: Mapping[str, str], *, connects: bool = True) -> Settings:
        """Every part of ``env``; the first variable that cannot be used is named in a
        ``ConfigurationError``. ``connects=False``: for what never connects to Temporal (a plan
        check), the Temporal part is left at its defaults and no profile is read."""
        return cls(
            model=ModelSettings.from_env(env),
            temporal=TemporalSettings.from_env(env) if connects else TemporalSettings(),
            world=WorldSettings.from_env(env),
            catalogue=CatalogueSettings.from_env(env),
            policy=PolicySettings.from_env(env),
            runs=RunSettings.from_env(env),
            observability=ObservabilitySettings.from_env(env),
            encryption=EncryptionSettings.from_env(env),
            identity=Identity.from_env(env),
        )


__all__ = [
    "APPROVERS_VAR", "APPROVER_KEY_VAR", "APPROVE_EFFECTS_VAR", "ARTIFACTS_VAR", "CODEC_TOKEN_VAR",
    "DEMO_SYSTEMS_VAR", "ENCRYPTION_KEYS_VAR", "ENCRYPTION_KEY_BYTES", "EXTENSIONS_VAR",
    "METRICS_ADDRESS_VAR", "POLICIES_VAR", "POLICY_BUNDLE_VAR", "POLICY_MODE_VAR",
    "RECEIPT_KEY_VAR", "SUBMITTERS_VAR", "SUBMITTER_KEY_VAR", "TEMPORAL_UI_VAR",
    "CatalogueSettings", "EncryptionSettings", "Identity", "ModelSettings",
    "ObservabilitySettings", "PolicySettings", "Replanner", "RunSettings", "Settings",
    "TemporalSettings", "WorldSettings", "flag", "metrics_address", "parse_duration",
    "parse_encryption_keys", "parse_submitters", "signing_keys",
]
