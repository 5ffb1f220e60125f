"""Configuration by environment (DESIGN.md section 7). Read once, at start."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from plans.scope import Scope

Replanner = Literal["openai", "playbook"]


@dataclass(frozen=True)
class Settings:
    temporal_address: str = "localhost:7233"
    temporal_namespace: str = "default"
    task_queue: str = "plangate"
    database_url: str = "postgresql://postgres@localhost:5432/postgres"
    s3_endpoint_url: str | None = None
    workdir: Path = field(default_factory=lambda: Path(".plangate/work").resolve())
    openai_base_url: str | None = None
    openai_api_key: str | None = field(default=None, repr=False)
    model: str = "gpt-4o-mini"
    replanner: Replanner = "playbook"
    # where tools may write (plans.scope); None: anywhere but plangate's own schema
    allowed_buckets: str | None = None
    allowed_schemas: str | None = None

    @property
    def scope(self) -> Scope:
        return Scope.parse(self.allowed_buckets, self.allowed_schemas)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        e = os.environ if env is None else env
        base_url = e.get("OPENAI_BASE_URL") or None
        api_key = e.get("OPENAI_API_KEY") or None
        replanner = e.get("PLANGATE_REPLANNER") or ("openai" if base_url or api_key else "playbook")
        if replanner not in ("openai", "playbook"):
            raise ValueError(
                f"PLANGATE_REPLANNER must be 'openai' or 'playbook', not {replanner!r}"
            )
        return cls(
            temporal_address=e.get("TEMPORAL_ADDRESS") or cls.temporal_address,
            temporal_namespace=e.get("TEMPORAL_NAMESPACE") or cls.temporal_namespace,
            task_queue=e.get("PLANGATE_TASK_QUEUE") or cls.task_queue,
            database_url=e.get("PLANGATE_DATABASE_URL") or cls.database_url,
            s3_endpoint_url=e.get("PLANGATE_S3_ENDPOINT_URL") or None,
            workdir=Path(e.get("PLANGATE_WORKDIR") or ".plangate/work").resolve(),
            openai_base_url=base_url,
            openai_api_key=api_key,
            model=e.get("PLANGATE_MODEL") or cls.model,
            replanner=replanner,  # type: ignore[arg-type]
            allowed_buckets=e.get("PLANGATE_ALLOWED_BUCKETS") or None,
            allowed_schemas=e.get("PLANGATE_ALLOWED_SCHEMAS") or None,
        )
