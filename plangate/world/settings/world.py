"""The systems tools and probes touch and where they may write (``WorldSettings``): what a
``World`` is made from, and what a plan's paths and targets are checked against."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from plangate.errors import ConfigurationError
from plangate.plans.scope import Scope
from plangate.world.settings.parse import text

ARTIFACTS_VAR = "PLANGATE_ARTIFACTS"
DEFAULT_ARTIFACTS_PREFIX = "runs"


@dataclass(frozen=True)
class WorldSettings:
    database_url: str = "postgresql://postgres@localhost:5432/postgres"
    # None: boto3's own endpoint (AWS)
    s3_endpoint_url: str | None = None
    workdir: Path = field(default_factory=lambda: Path(".plangate/work").resolve())
    # where tools may write (plans.scope); None: anywhere but plangate's own schema
    allowed_buckets: str | None = None
    allowed_schemas: str | None = None
    # where files passed between steps live when workers share no disk (world.files); None:
    # the work directory (one machine)
    artifacts_bucket: str | None = None
    artifacts_prefix: str = DEFAULT_ARTIFACTS_PREFIX

    @property
    def scope(self) -> Scope:
        scope = Scope.parse(self.allowed_buckets, self.allowed_schemas)
        if self.artifacts_bucket is None:
            return scope
        return replace(scope, protected_buckets=(self.artifacts_bucket,))

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> WorldSettings:
        bucket, prefix = _artifacts(env.get(ARTIFACTS_VAR) or "")
        return cls(
            database_url=text(env, "PLANGATE_DATABASE_URL") or cls.database_url,
            s3_endpoint_url=text(env, "PLANGATE_S3_ENDPOINT_URL"),
            workdir=Path(env.get("PLANGATE_WORKDIR") or ".plangate/work").resolve(),
            allowed_buckets=text(env, "PLANGATE_ALLOWED_BUCKETS"),
            allowed_schemas=text(env, "PLANGATE_ALLOWED_SCHEMAS"),
            artifacts_bucket=bucket,
            artifacts_prefix=prefix,
        )


_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")


def _artifacts(raw: str) -> tuple[str | None, str]:
    """``PLANGATE_ARTIFACTS``: ``s3://bucket`` or ``s3://bucket/prefix``."""
    raw = raw.strip()
    if not raw:
        return None, DEFAULT_ARTIFACTS_PREFIX
    if not raw.startswith("s3://"):
        raise ConfigurationError(f"{ARTIFACTS_VAR} must be s3://bucket[/prefix], not {raw!r}")
    bucket, _, prefix = raw.removeprefix("s3://").partition("/")
    if not _BUCKET.match(bucket):
        raise ConfigurationError(f"{ARTIFACTS_VAR}: {bucket!r} is not an S3 bucket name")
    prefix = prefix.strip("/")
    if any(part in ("", ".", "..") for part in prefix.split("/")) and prefix:
        raise ConfigurationError(
            f"{ARTIFACTS_VAR}: prefix {prefix!r} has an empty, . or .. segment"
        )
    return bucket, prefix or DEFAULT_ARTIFACTS_PREFIX
