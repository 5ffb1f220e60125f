"""The model plangate asks for plans, and whether the re-planner asks it (``ModelSettings``):
for the re-planner's backend (``replanner.backends.backend_for``) and ``plangate plan``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, cast

from plangate.errors import ConfigurationError
from plangate.world.settings.parse import text

Replanner = Literal["openai", "playbook"]
REPLANNER_VAR = "PLANGATE_REPLANNER"


@dataclass(frozen=True)
class ModelSettings:
    # ``playbook``: recipes alone; ``openai``: the playbook first, then the model
    replanner: Replanner = "playbook"
    # the model's name at an OpenAI-compatible endpoint (``PLANGATE_MODEL``)
    name: str = "gpt-4o-mini"
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)

    @property
    def configured(self) -> bool:
        """Whether a model endpoint is named at all (a base URL or an API key)."""
        return bool(self.base_url or self.api_key)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ModelSettings:
        base_url, api_key = text(env, "OPENAI_BASE_URL"), text(env, "OPENAI_API_KEY")
        replanner = text(env, REPLANNER_VAR) or ("openai" if base_url or api_key else "playbook")
        if replanner not in ("openai", "playbook"):
            raise ConfigurationError(
                f"{REPLANNER_VAR} must be 'openai' or 'playbook', not {replanner!r}"
            )
        return cls(
            replanner=cast(Replanner, replanner),
            name=text(env, "PLANGATE_MODEL") or cls.name,
            base_url=base_url,
            api_key=api_key,
        )
