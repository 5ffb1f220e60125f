"""Policy files read and checked: each ``*.cedar`` file of the deployment's directory split into
its policies (each with where it starts), parsed and validated against plangate's schema, and
given its id (its ``@id`` annotation, else ``FILE:N``, the n-th policy of the file from 1).

Cedar (through ``cedarpy``) names what is wrong but not where; the place is found here: a parse
error at the first token after which the policy cannot go on, a validation error at the name it
is about (else at the policy's start). Every problem is ``FILE:LINE:COLUMN: message``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import cedarpy

from plangate.errors import ConfigurationError

# plangate's built-in policies are named ``plangate:...``: no file may take such an id
RESERVED_PREFIX = "plangate:"
MAX_APPROVERS = 10
_EOF = "unexpected end of input"
_NAMED = re.compile(r"`([^`]+)`|: (\w+)$")
_ACTION = re.compile(r' for Plangate::Action::"\w+"')
_POLICY = re.compile(r"^for policy `[^`]*`, ")


@dataclass(frozen=True)
class PolicyProblem:
    file: str
    line: int
    column: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}: {self.message}"


class PoliciesUnusable(ConfigurationError):
    """``PLANGATE_POLICIES`` cannot be used: a worker refuses to start (exit 2)."""

    def lines(self) -> list[str]:
        return [str(self)]


class PolicyFileError(PoliciesUnusable):
    """Policy files that cannot be used: every problem, each ``FILE:LINE:COLUMN: message``."""

    def lines(self) -> list[str]:
        return [str(p) for p in self.problems]

    def __init__(self, problems: Sequence[PolicyProblem]) -> None:
        self.problems = tuple(problems)
        more = len(self.problems) - 1
        super().__init__(
            f"{self.problems[0]}" + (f" (and {more} more problem{'s' * (more > 1)})"
                                     if more else "")
        )

    def under(self, directory: Path) -> PolicyFileError:
        """The same problems, each file named by its path in ``directory``."""
        return PolicyFileError([replace(p, file=str(directory / p.file)) for p in self.problems])


@dataclass(frozen=True)
class Token:
    start: int
    end: int
    text: str


@dataclass
class Chunk:
    """One policy of a file: its tokens (offsets into the file's text)."""

    tokens: list[Token] = field(default_factory=list)

    @property
    def start(self) -> int:
        return self.tokens[0].start

    @property
    def end(self) -> int:
        return self.tokens[-1].end


@dataclass(frozen=True)
class SourcePolicy:
    """A policy as written: its id, file, place and Cedar's JSON form (EST)."""

    id: str
    file: str
    line: int
    column: int
    est: dict[str, Any]

    @property
    def annotations(self) -> dict[str, str | None]:
        found: dict[str, str | None] = self.est.get("annotations") or {}
        return found

    @property
    def approvers(self) -> int:
        return int(self.annotations.get("approvers") or 0)

    @property
    def approval_only(self) -> bool:
        return "approval_only" in self.annotations

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


def tokens(text: str) -> Iterator[Token]:
    """Cedar's tokens, coarsely: strings (with escapes), words, and single other characters;
    blanks and ``//`` comments skipped."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            yield Token(i, j, text[i:j])
            i = j
        elif c.isalnum() or c == "_":
            j = i + 1
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            yield Token(i, j, text[i:j])
            i = j
        else:
            yield Token(i, i + 1, c)
            i += 1


def split(text: str) -> list[Chunk]:
    """The policies of a file: each ends with a ``;`` outside brackets."""
    chunks: list[Chunk] = []
    current, depth = Chunk(), 0
    for t in tokens(text):
        current.tokens.append(t)
        if t.text in "([{":
            depth += 1
        elif t.text in ")]}":
            depth = max(0, depth - 1)
        elif t.text == ";" and depth == 0:
            chunks.append(current)
            current = Chunk()
    if current.tokens:
        chunks.append(current)
    return chunks


def line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _named(chunk: Chunk, message: str) -> int:
    """Where in ``chunk`` the name a message is about first appears; else its start."""
    for m in _NAMED.finditer(message):
        name = m.group(1) or m.group(2)
        if name.startswith("policy"):
            continue
        for t in chunk.tokens:
            if t.text in (name, f'"{name}"'):
                return t.start
    return chunk.start


def _parse_error_at(text: str, chunk: Chunk, message: str) -> int:
    """The first token after which ``chunk`` cannot be a policy any more."""
    for t in chunk.tokens[:-1]:
        try:
            cedarpy.PolicySet.from_str(text[chunk.start:t.end])
        except ValueError as e:
            if str(e) != _EOF:
                return t.start
    return _named(chunk, message) if message != _EOF else chunk.end


def read_file(
    name: str, data: bytes, schema: str, *, builtin: bool = False
) -> tuple[list[SourcePolicy], list[PolicyProblem]]:
    """The policies of one file and what is wrong with them (parse, schema, annotations);
    ``builtin``: plangate's own, which alone may take ``plangate:`` ids."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        before = data[: e.start].decode("utf-8")
        return [], [PolicyProblem(name, *line_col(before, len(before)), "not UTF-8 text")]
    chunks = split(text)

    def at(offset: int, message: str) -> PolicyProblem:
        return PolicyProblem(name, *line_col(text, offset), message)

    problems = []
    for chunk in chunks:
        body = text[chunk.start:chunk.end]
        try:
            cedarpy.PolicySet.from_str(body)
        except ValueError as e:
            problems.append(at(_parse_error_at(text, chunk, str(e)), str(e)))
            continue
        if chunk.tokens[-1].text != ";":
            problems.append(at(chunk.end, "a policy ends with ;"))
    if problems:
        return [], problems
    est = json.loads(cedarpy.policies_to_json_str(text)) if chunks else {"staticPolicies": {}}
    if est.get("templates"):
        start = chunks[0].start if chunks else 0
        return [], [at(start, "templates (?principal, ?resource) are not plangate policies")]
    found = est["staticPolicies"]
    if len(found) != len(chunks):  # our split disagrees with Cedar's: name the file only
        raise ValueError(f"{name}: {len(found)} policies, {len(chunks)} found by plangate")
    policies: list[SourcePolicy] = []
    for i, chunk in enumerate(chunks):
        p = found[f"policy{i}"]
        line, col = line_col(text, chunk.start)
        ann = p.get("annotations") or {}
        pid = ann.get("id")
        if pid is not None and not pid.strip():
            problems.append(at(chunk.start, "@id is empty"))
        elif pid is not None and pid.startswith(RESERVED_PREFIX) and not builtin:
            problems.append(at(chunk.start, f"@id {pid!r}: ids {RESERVED_PREFIX}... are "
                               "plangate's built-in policies"))
        approvers = ann.get("approvers")
        if approvers is not None and not (
            approvers.isdigit() and 0 <= int(approvers) <= MAX_APPROVERS
        ):
            problems.append(at(chunk.start, f"@approvers({json.dumps(approvers)}) is not a "
                               f"number of people from 0 to {MAX_APPROVERS}"))
        if "approval_only" in ann and p.get("effect") != "permit":
            problems.append(at(chunk.start, "@approval_only is for permit policies"))
        policies.append(SourcePolicy(pid or f"{name}:{i + 1}", name, line, col, p))
    result = cedarpy.validate_policies(text, schema)
    seen: set[tuple[int, str]] = set()
    for err in result.errors:
        index = int(err.policy_id.removeprefix("policy")) if err.policy_id else 0
        chunk = chunks[index] if index < len(chunks) else chunks[0]
        message = _ACTION.sub("", _POLICY.sub("", err.error))
        offset = _named(chunk, message)
        if (offset, message) not in seen:
            seen.add((offset, message))
            problems.append(at(offset, message))
    return policies, sorted(problems, key=lambda p: (p.line, p.column))


def read_directory(path: Path, var: str) -> list[tuple[str, bytes]]:
    """The ``*.cedar`` files of ``path`` (not its subdirectories), by name."""
    if not path.is_dir():
        raise PoliciesUnusable(f"{var}: {path} is not a directory")
    files = sorted(p for p in path.glob("*.cedar") if p.is_file())
    if not files:
        raise PoliciesUnusable(
            f"{var}: {path} has no .cedar file: every call would be forbidden (default deny); "
            "start from docs/policy.md's permissive base"
        )
    return [(p.name, p.read_bytes()) for p in files]


def read_all(
    files: Sequence[tuple[str, bytes]], schema: str, builtin: str = ""
) -> list[SourcePolicy]:
    """Every policy of ``files``, with unique ids; ``PolicyFileError`` names every problem.
    The file named ``builtin`` holds plangate's built-in policies."""
    policies: list[SourcePolicy] = []
    problems: list[PolicyProblem] = []
    first: dict[str, SourcePolicy] = {}
    for name, data in files:
        found, wrong = read_file(name, data, schema, builtin=name == builtin)
        problems += wrong
        for p in found:
            if p.id in first:
                problems.append(PolicyProblem(
                    p.file, p.line, p.column, f"@id {p.id!r} is taken by {first[p.id].where}"))
            else:
                first[p.id] = p
        policies += found
    if problems:
        raise PolicyFileError(problems)
    return policies
