"""Which tools and probes a deployment has and which tables they need: one answer for its worker
(its activities, and the tables it creates at start), ``plangate check``, ``plangate plan`` and
the re-planner's catalogue, since all of them ask :func:`registry_for` with the deployment's
``CatalogueSettings``.

The core tools (``s3.*``, ``warehouse.*``) and probes are always registered. Then, in order:

- the demo systems (the extension ``plangate.demo.systems``: billing, CRM and e-mail on schema
  ``demo``) when ``PLANGATE_DEMO_SYSTEMS`` is on (``plangate dev`` and ``plangate demo`` turn it
  on), loaded as any extension is: the core knows the module's name, nothing it holds;
- the modules of the ``plangate.extensions`` entry-point group (installed packages);
- the modules ``PLANGATE_EXTENSIONS`` names (comma separated);
- the tools and probes of the MCP servers file ``PLANGATE_MCP_SERVERS`` names
  (``activities.tools.mcp``; docs/mcp-servers.md), checked against the server at worker start.

An extension is a module. With a ``register(registry)`` function it says what it adds
(:meth:`Registry.add_module`, :meth:`Registry.add_tools`, :meth:`Registry.add_probes`,
:meth:`Registry.add_schema`); without one, every tool and probe it (or, for a package, its
submodules) declares with ``plangate.tool`` / ``plangate.probe`` is added. A name that clashes
with another is refused at start, naming both (:class:`ExtensionError`).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from importlib.metadata import entry_points
from types import MappingProxyType, ModuleType
from typing import TYPE_CHECKING, Any

from plangate import probes
from plangate.activities.tools import registry as tool_registry
from plangate.activities.tools import s3, warehouse
from plangate.activities.tools.registry import ToolSpec
from plangate.errors import ConfigurationError, PlangateError
from plangate.probes import registry as probe_registry
from plangate.probes.registry import ProbeSpec
from plangate.world.settings import CatalogueSettings

if TYPE_CHECKING:
    from plangate.world.clients import World

EnsureSchema = Callable[["World"], Awaitable[None]]
# raises when the world does not offer what was registered; else what it found, to be said
StartCheck = Callable[["World"], Awaitable[Sequence[str] | None]]
ENTRY_POINT_GROUP = "plangate.extensions"
DEMO_SYSTEMS = "plangate.demo.systems"


class ExtensionError(PlangateError):
    """An extension that cannot be loaded, or that clashes with another: the deployment does
    not start (the message names the extension and what is wrong)."""


class Registry:
    """The tools, probes and schemas of one deployment, filled by ``register`` functions, then
    sealed."""

    def __init__(self) -> None:
        self._tools: dict[str, ToolSpec[Any]] = {}
        self._probes: dict[str, ProbeSpec[Any]] = {}
        self._schemas: dict[str, EnsureSchema] = {}
        self._checks: dict[str, StartCheck] = {}
        self._sealed = False

    @property
    def tools(self) -> Mapping[str, ToolSpec[Any]]:
        return MappingProxyType(self._tools)

    @property
    def probes(self) -> Mapping[str, ProbeSpec[Any]]:
        return MappingProxyType(self._probes)

    @property
    def schemas(self) -> Mapping[str, EnsureSchema]:
        """What a worker creates at start, after plangate's own tables: schema name ->
        ``ensure(world)`` (idempotent, safe when several workers start at once)."""
        return MappingProxyType(self._schemas)

    @property
    def checks(self) -> Mapping[str, StartCheck]:
        """What a worker checks at start, connected, before it takes work: name ->
        ``check(world)``, which raises when the world does not offer what was registered."""
        return MappingProxyType(self._checks)

    def add_module(self, module: ModuleType) -> None:
        """Every tool and probe ``module`` (or its submodules) declares."""
        tools, found = tool_registry.declared_in(module), probe_registry.declared_in(module)
        if not tools and not found:
            raise ValueError(f"{module.__name__} declares no tool and no probe")
        self._add(self._tools, tools, "tool")
        self._add(self._probes, found, "probe")

    def add_tools(self, *modules: ModuleType) -> None:
        """Every tool each of ``modules`` declares."""
        for module in modules:
            declared = tool_registry.declared_in(module)
            if not declared:
                raise ValueError(f"{module.__name__} declares no tool")
            self._add(self._tools, declared, "tool")

    def add_probes(self, *modules: ModuleType) -> None:
        """Every probe each of ``modules`` declares."""
        for module in modules:
            self._add(self._probes, probe_registry.declared_in(module), "probe")

    def add_specs(
        self, tools: Mapping[str, ToolSpec[Any]], probes: Mapping[str, ProbeSpec[Any]]
    ) -> None:
        """Tools and probes made at start rather than declared by a module (the MCP servers
        file's)."""
        self._add(self._tools, tools, "tool")
        self._add(self._probes, probes, "probe")

    def add_check(self, name: str, check: StartCheck) -> None:
        self._check_open()
        self._checks[name] = check

    def add_schema(self, name: str, ensure: EnsureSchema) -> None:
        self._check_open()
        if name in self._schemas:
            raise ValueError(f"schema {name!r} is registered twice")
        self._schemas[name] = ensure

    def seal(self) -> Registry:
        self._sealed = True
        return self

    def _add(self, into: dict[str, Any], specs: Mapping[str, Any], kind: str) -> None:
        self._check_open()
        for name, spec in specs.items():
            if name in into and into[name] is not spec:
                raise ValueError(
                    f"{kind} {name!r} is registered twice: by {into[name].fn.__module__} and "
                    f"by {spec.fn.__module__}"
                )
            into[name] = spec

    def _check_open(self) -> None:
        if self._sealed:
            raise RuntimeError("this registry is complete; register before it is used")


def register_core(registry: Registry) -> None:
    registry.add_tools(s3, warehouse)
    registry.add_probes(probes)


def registry_for(catalogue: CatalogueSettings) -> Registry:
    """The tools, probes and schemas of a deployment with ``catalogue`` (made once per
    ``catalogue``: every caller asking with the same settings gets the same registry)."""
    return _registry(catalogue.demo_systems, catalogue.extensions, catalogue.mcp_servers)


def installed_extensions() -> list[tuple[str, str]]:
    """The ``plangate.extensions`` entry points installed here: (name, module or callable)."""
    return sorted((ep.name, ep.value) for ep in entry_points(group=ENTRY_POINT_GROUP))


@functools.cache
def _registry(demo_systems: bool, modules: tuple[str, ...], mcp_servers: str | None) -> Registry:
    registry = Registry()
    register_core(registry)
    loaded = [("the demo systems (PLANGATE_DEMO_SYSTEMS)", DEMO_SYSTEMS)] if demo_systems else []
    loaded += [(f"entry point {name} ({value})", value) for name, value in installed_extensions()]
    # the demo systems named again in PLANGATE_EXTENSIONS are the same extension, loaded once
    loaded += [(f"PLANGATE_EXTENSIONS module {m}", m) for m in modules
               if not (demo_systems and m == DEMO_SYSTEMS)]
    for where, target in loaded:
        _load(registry, where, target)
    if mcp_servers is not None:
        _add_mcp_servers(registry, mcp_servers)
    return registry.seal()


def _add_mcp_servers(registry: Registry, path: str) -> None:
    """The tools and probes of the MCP servers file at ``path``, and its start check; what is
    wrong with the file, or a name another tool or probe has, is an ``ExtensionError``."""
    # loaded only when a file is named: a deployment without one loads none of it
    from plangate.activities.tools.mcp import source

    try:
        servers = source.read(path, registry.probes)
        registry.add_specs(servers.tools, servers.probes)
    except ConfigurationError as e:  # the file's own problems, each with its line and field
        raise ExtensionError(str(e)) from e
    except ValueError as e:  # a name another tool or probe has
        raise ExtensionError(f"PLANGATE_MCP_SERVERS {path}: {e}") from e
    registry.add_check(f"MCP servers of {path}", servers.check)


def _load(registry: Registry, where: str, target: str) -> None:
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
        obj: Any = module
        for part in filter(None, attr.split(".")):
            obj = getattr(obj, part)
        register = obj if callable(obj) and not isinstance(obj, ModuleType) else None
        register = register or getattr(module, "register", None)
        if register is not None:
            register(registry)
        else:
            registry.add_module(module)
    except ExtensionError:
        raise
    except Exception as e:  # an extension that cannot load: the deployment does not start
        raise ExtensionError(f"extension {where}: {_why(e, module_name)}") from e


def _why(e: Exception, module_name: str) -> str:
    missing = e.name if isinstance(e, ModuleNotFoundError) else None
    if missing is not None and f"{module_name}.".startswith(f"{missing}."):
        # the module itself, not one it imports, is not there: say where Python looks
        return (f"no module {module_name!r} here: it must be importable by the plangate "
                "process (installed, or its directory on PYTHONPATH)")
    return f"{type(e).__name__}: {e}"
