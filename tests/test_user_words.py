"""Words a user knows: the design's jargon ("seed 001", "the seeds' incidents", the notes the
project grew from) stays in comments and docstrings, never in a string plangate prints, serves or
writes."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JARGON = re.compile(r"\bseeds?\b", re.I)


def _strings(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module, its docstrings left out."""
    tree = ast.parse(path.read_text())
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
    ]


def test_no_seed_jargon_in_what_plangate_says():
    found = [
        f"{path.relative_to(ROOT).as_posix()}:{line}: {text[:80]!r}"
        for path in sorted((ROOT / "plangate").rglob("*.py"))
        for line, text in _strings(path)
        if JARGON.search(text)
    ]
    assert not found, "\n".join(found)
