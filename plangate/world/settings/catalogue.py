"""Which tools and probes a deployment has beyond the core ones (``CatalogueSettings``): the
one key of its registry (``activities.extensions.registry_for``), so its worker, ``plangate
check`` and the re-planner's catalogue see the same set."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from plangate.errors import ConfigurationError
from plangate.world.settings.parse import flag

DEMO_SYSTEMS_VAR = "PLANGATE_DEMO_SYSTEMS"
EXTENSIONS_VAR = "PLANGATE_EXTENSIONS"
MCP_SERVERS_VAR = "PLANGATE_MCP_SERVERS"
_MODULE_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


@dataclass(frozen=True)
class CatalogueSettings:
    # the demo systems (billing, CRM, e-mail tools and their schema ``demo``): registered by
    # the worker, known to ``check`` and the re-planner only when on (activities.extensions)
    demo_systems: bool = False
    # modules of the user's own tools and probes (activities.extensions), besides those of the
    # ``plangate.extensions`` entry-point group
    extensions: tuple[str, ...] = ()
    # the MCP servers file (docs/mcp-servers.md): the tools and probes it declares on the
    # servers it names (activities.tools.mcp); unset: none
    mcp_servers: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> CatalogueSettings:
        return cls(
            demo_systems=flag(env, DEMO_SYSTEMS_VAR),
            extensions=module_paths(env.get(EXTENSIONS_VAR) or ""),
            mcp_servers=(env.get(MCP_SERVERS_VAR) or "").strip() or None,
        )


def module_paths(raw: str) -> tuple[str, ...]:
    """``PLANGATE_EXTENSIONS``: module paths, separated by commas."""
    paths = tuple(p.strip() for p in raw.split(",") if p.strip())
    bad = [p for p in paths if not _MODULE_PATH.match(p)]
    if bad:
        raise ConfigurationError(
            f"{EXTENSIONS_VAR}: not a module path: {', '.join(map(repr, bad))}"
        )
    return paths
