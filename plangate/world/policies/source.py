"""Policy files read and checked: each ``*.cedar`` file of the deployment's directory split into
its policies (each with where it starts), parsed and validated against plangate's schema, and
given its id (its ``@id`` annotation, else ``FILE:N``, the n-th policy of the file from 1).

Cedar (through ``cedarpy``) names what is wrong but not where: ``places`` finds where, by
asking Cedar again about less (prefixes of the policy at the tokens of ``lexer``, its parts
alone, from ``shape``), never from the words of its message. A policy that cannot be parsed
does not hide the others: each is parsed on its own (a ``;`` ends it), and those that parse are
validated. Every problem is ``FILE:LINE:COLUMN: message``.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import cedarpy

from plangate.errors import ConfigurationError
from plangate.world.policies.lexer import Chunk, line_col, split, tokens
from plangate.world.policies.places import parse_error, places, syntax_error

# plangate's built-in policies are named ``plangate:...``: no file may take such an id
RESERVED_PREFIX = "plangate:"
MAX_APPROVERS = 10
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


@functools.lru_cache(maxsize=4)
def _schema(text: str) -> cedarpy.Schema:
    return cedarpy.Schema.from_str(text)


def _validation_errors(policies: str, schema: str) -> list[tuple[int, str]]:
    """Cedar's validation errors: (the policy's index, the message without the policy's id
    nor the action it was checked for), each once."""
    found: list[tuple[int, str]] = []
    for err in cedarpy.validate_policies(policies, _schema(schema)).errors:
        index = int(err.policy_id.removeprefix("policy")) if err.policy_id else 0
        e = (index, _ACTION.sub("", _POLICY.sub("", err.error)))
        if e not in found:
            found.append(e)
    return found


def _only(text: str, chunks: Sequence[Chunk]) -> str:
    """``text`` with nothing but ``chunks`` (the rest blank, its lines kept): Cedar numbers
    them from 0 and reads each at its place."""
    chars = [c if c == "\n" else " " for c in text]
    for c in chunks:
        chars[c.start:c.end] = text[c.start:c.end]
    return "".join(chars)


def _parsed(text: str) -> tuple[list[Chunk], list[tuple[int, str]]]:
    """The policies of ``text`` Cedar parses, and where and why each other does not."""
    chunks: list[Chunk] = []
    wrong: list[tuple[int, str]] = []
    todo = split(tokens(text))
    while todo:
        chunk = todo.pop(0)
        message = parse_error(text[chunk.start:chunk.end])
        if message is None:
            chunks.append(chunk)
            continue
        offset, said, next_policy = syntax_error(text, chunk, message)
        wrong.append((offset, said))
        if next_policy is not None:  # the rest is read as the policies it is
            todo.insert(0, Chunk(chunk.tokens[next_policy:]))
    return chunks, wrong


def _invalid(text: str, chunks: list[Chunk], schema: str) -> list[tuple[int, str]]:
    """Where and why Cedar's validator refuses ``chunks``: each error at each narrowest part
    of its policy that alone has it (else at the policy's start)."""
    wrong = []
    for index, message in _validation_errors(_only(text, chunks), schema) if chunks else []:
        chunk = chunks[index] if index < len(chunks) else chunks[0]

        def has(policy: str, message: str = message) -> bool:
            return (0, message) in _validation_errors(policy, schema)

        wrong += [(offset, message) for offset in places(text, chunk, has) or [chunk.start]]
    return wrong


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

    def at(offset: int, message: str) -> PolicyProblem:
        return PolicyProblem(name, *line_col(text, offset), message)

    chunks, wrong = _parsed(text)
    problems = [at(offset, message) for offset, message in wrong]
    est: dict[str, Any] = {"staticPolicies": {}}
    if chunks:
        est = json.loads(cedarpy.policies_to_json_str(_only(text, chunks)))
    if est.get("templates"):
        for key in est["templates"]:
            slots = [t for t in chunks[int(key.removeprefix("policy"))].tokens
                     if t.text.startswith("?")]
            problems.append(at(slots[0].start if slots else chunks[0].start,
                               "templates (?principal, ?resource) are not plangate policies"))
        return [], sorted(problems, key=lambda p: (p.line, p.column))
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
    problems += [at(offset, message) for offset, message in _invalid(text, chunks, schema)]
    problems = sorted(set(problems), key=lambda p: (p.line, p.column, p.message))
    return ([] if wrong else policies), problems


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
