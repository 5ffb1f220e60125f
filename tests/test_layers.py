"""Every import of plangate goes down the layers pyproject.toml's layers contract lists (issue 49):
none up, and none sideways to another package of its own layer, which import-linter lets pass
between the siblings of a ``:`` layer. Read from the code itself: every import, those made
inside a function (loaded late) and those made for type checking too. plangate/__init__.py,
__main__.py and errors.py stand outside the layers."""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).parent.parent
OUTSIDE = {"plangate", "plangate.__main__", "plangate.errors"}

Place = tuple[int, str]  # the layer's index from the top, and the package of it


def layers() -> list[list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"]
                   if c["type"] == "layers"]
    assert contract["containers"] == ["plangate"]
    return [[n.strip() for n in re.split(r"[:|]", layer)] for layer in contract["layers"]]


def place(module: str, order: list[list[str]]) -> Place | None:
    """The layer ``module`` is in (the longest package of a layer holding it); None: outside."""
    found = [(i, p) for i, layer in enumerate(order) for p in layer
             if module == f"plangate.{p}" or module.startswith(f"plangate.{p}.")]
    return max(found, key=lambda f: len(f[1])) if found else None


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    where = ROOT.joinpath(*name.split("."))
    return where.with_suffix(".py").is_file() or (where / "__init__.py").is_file()


def imports(source: str, name: str, package: bool) -> Iterator[tuple[int, str]]:
    """(line, module) of every plangate module ``source`` (module ``name``) imports, anywhere
    in it; ``from a import b`` is ``a.b`` where that is a module."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package holding ``name``
                parts = name.split(".")[: len(name.split(".")) - node.level + package]
                base = ".".join([*parts, *([base] if base else [])])
            targets = [f"{base}.{a.name}" if is_module(f"{base}.{a.name}") else base
                       for a in node.names]
        else:
            continue
        yield from ((node.lineno, t) for t in dict.fromkeys(targets)
                    if t.split(".")[0] == "plangate")


def against(importer: str, target: str, order: list[list[str]]) -> str | None:
    """What is wrong with ``importer`` importing ``target``: up, sideways, or None."""
    here, there = place(importer, order), place(target, order)
    if here is None or there is None:
        return None
    if there[0] < here[0]:
        return f"up ({here[1]} -> {there[1]})"
    if there[0] == here[0] and there[1] != here[1]:
        return f"sideways ({here[1]} -> {there[1]}, one layer)"
    return None


def walk() -> Iterator[tuple[str, int, str, str]]:
    """(file, line, importer, imported) for every plangate import of every plangate module."""
    for path in sorted((ROOT / "plangate").rglob("*.py")):
        name = module_name(path)
        for line, target in imports(path.read_text(), name, path.name == "__init__.py"):
            yield str(path.relative_to(ROOT)), line, name, target


def test_the_walk_finds_what_it_looks_for():
    order = [["cli"], ["mcp"], ["activities", "sources"], ["plans"]]
    source = (
        "from typing import TYPE_CHECKING\n"
        "from . import extensions\n"
        "from .registry import ToolSpec\n"
        "if TYPE_CHECKING:\n"
        "    from plangate.plans import model\n"
        "def late():\n"
        "    import plangate.errors\n"
        "    from plangate.cli import serve\n"
    )
    found = list(imports(source, "plangate.activities.tools.x", package=False))
    assert found == [(2, "plangate.activities.tools"), (3, "plangate.activities.tools.registry"),
                     (5, "plangate.plans.model"), (7, "plangate.errors"),
                     (8, "plangate.cli.serve")]
    assert list(imports("from .. import extensions", "plangate.activities.tools", True)) == [
        (1, "plangate.activities.extensions")]
    assert against("plangate.activities.x", "plangate.mcp.y", order) == "up (activities -> mcp)"
    assert against("plangate.activities.x", "plangate.sources.y", order) == (
        "sideways (activities -> sources, one layer)")
    assert against("plangate.mcp.server", "plangate.plans.model", order) is None
    assert against("plangate.plans.model", "plangate.errors", order) is None
    assert against("plangate.activities.x", "plangate.activities.y", order) is None


def test_every_package_is_in_a_layer():
    tops = {f"plangate.{p.stem}" for p in (ROOT / "plangate").iterdir()
            if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").is_file()}
    unplaced = sorted(m for m in tops - OUTSIDE if place(m, layers()) is None)
    assert len(tops) > 15
    assert unplaced == [], f"in no layer of pyproject.toml: {unplaced}"


def test_every_import_goes_down_the_layers():
    order = layers()
    edges = list(walk())
    assert len(edges) > 1000
    wrong = [f"{file}:{line} {importer} -> {target}: {why}"
             for file, line, importer, target in edges
             if (why := against(importer, target, order))]
    assert wrong == [], "imports that do not go down the layers:\n" + "\n".join(wrong)
    # the back door is loaded late, by the registry, from below it
    assert ("plangate.activities.extensions", "plangate.activities.tools.mcp.source") in {
        (i, t) for _, _, i, t in edges}
