"""Which tools a deployment has and which tables they need: one answer for its worker (its
activities and the tables it creates at start), ``plangate check`` and the re-planner's
catalogue, since all of them ask :func:`registry_for` with the deployment's settings.

The core tools (``s3.*``, ``warehouse.*``) are always registered. An extension is a module with
a ``register(registry: Registry) -> None`` that adds the tools it declares
(:meth:`Registry.add_tools`) and the schema they need (:meth:`Registry.add_schema`). The one
extension today is the demo systems (``activities.demo_systems``: billing, CRM and e-mail on
schema ``demo``), registered when ``PLANGATE_DEMO_SYSTEMS`` is on (``Settings.demo_systems``;
``plangate dev`` and ``plangate demo`` turn it on). User extensions (``PLANGATE_EXTENSIONS``,
DESIGN.md section 7) are meant to come through the same ``register``.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType, ModuleType
from typing import Any

from activities.tools import s3, warehouse
from activities.tools.registry import ToolSpec, declared_in
from world.clients import World
from world.settings import Settings, demo_systems_enabled

EnsureSchema = Callable[[World], Awaitable[None]]


class Registry:
    """The tools and schemas of one deployment, filled by ``register`` functions, then sealed."""

    def __init__(self) -> None:
        self._tools: dict[str, ToolSpec[Any]] = {}
        self._schemas: dict[str, EnsureSchema] = {}
        self._sealed = False

    @property
    def tools(self) -> Mapping[str, ToolSpec[Any]]:
        return MappingProxyType(self._tools)

    @property
    def schemas(self) -> Mapping[str, EnsureSchema]:
        """What a worker creates at start, after plangate's own tables: schema name ->
        ``ensure(world)`` (idempotent, safe when several workers start at once)."""
        return MappingProxyType(self._schemas)

    def add_tools(self, *modules: ModuleType) -> None:
        """Every tool each of ``modules`` declares."""
        self._check_open()
        for module in modules:
            declared = declared_in(module)
            if not declared:
                raise ValueError(f"{module.__name__} declares no tool")
            for name, spec in declared.items():
                if name in self._tools:
                    raise ValueError(f"tool {name!r} registered twice")
                self._tools[name] = spec

    def add_schema(self, name: str, ensure: EnsureSchema) -> None:
        self._check_open()
        if name in self._schemas:
            raise ValueError(f"schema {name!r} registered twice")
        self._schemas[name] = ensure

    def seal(self) -> Registry:
        self._sealed = True
        return self

    def _check_open(self) -> None:
        if self._sealed:
            raise RuntimeError("this registry is complete; register before it is used")


def register_core(registry: Registry) -> None:
    registry.add_tools(s3, warehouse)


def registry_for(settings: Settings | None = None) -> Registry:
    """The tools and schemas of a deployment with ``settings``. None: those this process's
    environment turns on (``PLANGATE_DEMO_SYSTEMS``), for callers with no settings at hand."""
    demo = settings.demo_systems if settings is not None else demo_systems_enabled()
    return _registry(demo)


@functools.cache
def _registry(demo_systems: bool) -> Registry:
    registry = Registry()
    register_core(registry)
    if demo_systems:
        from activities import demo_systems as demo

        demo.register(registry)
    return registry.seal()
