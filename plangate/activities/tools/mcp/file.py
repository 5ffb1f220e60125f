"""The MCP servers file (``PLANGATE_MCP_SERVERS``, docs/mcp-servers.md): the servers a
deployment guards, and per server the tools plangate calls on it (name, the server's tool,
effect, arguments, contract) and the probes that read it back through its read tools.

This module is the file's format and nothing else: it is read, checked field by field and
against itself (every probe a contract names exists, every ``{arg}`` a template names is
declared, every JSON path parses), and what is wrong is refused with the file's line and the
field (``McpFileError``). Nothing in it is executed; plan values are compared, never matched
as patterns.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
    field_validator,
    model_validator,
)

from plangate.activities.tools.mcp.templates import names_in
from plangate.errors import ConfigurationError
from plangate.plans import jsonpath

ARG_TYPES = ("string", "integer", "number", "boolean", "array", "object")
EFFECTS = ("read", "write", "external", "money")
PREDICATES = ("equals", "contains", "not_contains", "present")
Loc = tuple[str | int, ...]


class McpFileError(ConfigurationError):
    """An MCP servers file that cannot be used: each problem with its line and field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _one_of(value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(f"must be one of {', '.join(allowed)}")
    return value


class ArgDecl(_Strict):
    """One argument: its JSON type, and whether a step may leave it out."""

    type: str
    optional: bool = False
    description: str = ""

    @field_validator("type")
    @classmethod
    def _known(cls, v: str) -> str:
        return _one_of(v, ARG_TYPES)


def _args(v: Any) -> Any:
    """``name: string`` is short for ``name: {type: string}``."""
    if isinstance(v, dict):
        return {k: {"type": t} if isinstance(t, str) else t for k, t in v.items()}
    return v


class TermDecl(_Strict):
    """A contract condition: ``probe`` with its arguments taken from the step's
    (``from_args``: probe argument -> step argument) plus ``fixed`` ones."""

    probe: str
    from_args: dict[str, str] = {}
    fixed: dict[str, JsonValue] = {}
    identifies: bool = False
    when: dict[str, JsonValue] = {}


class ContractDecl(_Strict):
    pre: list[TermDecl] = []
    post: list[TermDecl] = []


class ReaderDecl(_Strict):
    """A read tool of the same file that re-reads the record a step touched (field probes)."""

    tool: str
    args: dict[str, str]


class ToolDecl(_Strict):
    tool: str = Field(min_length=1)  # the server's own name for it
    effect: str
    args: dict[str, ArgDecl] = {}
    # the server tool's arguments from the step's ({arg} templates); unset: the step's own
    call: dict[str, JsonValue] | None = None
    contract: ContractDecl = ContractDecl()
    reader: ReaderDecl | None = None
    approval: bool = False
    description: str = ""
    # an error answer whose text holds this says the record is absent (``not_found``: a field
    # probe reading through this tool as a reader is then violated, not unknown), e.g. ENOENT
    not_found: str | None = Field(default=None, min_length=1)

    _normal = field_validator("args", mode="before")(_args)

    @field_validator("effect")
    @classmethod
    def _effect(cls, v: str) -> str:
        return _one_of(v, EFFECTS)


class CheckDecl(_Strict):
    """The judgement over the read tool's answer: the value at ``path`` and one predicate."""

    path: str = "$"
    source: str = "auto"  # structured | text | auto (structured when the server sends it)
    equals: JsonValue = None
    contains: JsonValue = None
    not_contains: JsonValue = None
    present: bool | None = None

    @field_validator("path")
    @classmethod
    def _parses(cls, v: str) -> str:
        jsonpath.parse(v)
        return v

    @field_validator("source")
    @classmethod
    def _source(cls, v: str) -> str:
        return _one_of(v, ("auto", "structured", "text"))

    @model_validator(mode="after")
    def _one_predicate(self) -> CheckDecl:
        given = [p for p in PREDICATES if p in self.model_fields_set]
        if len(given) != 1:
            raise ValueError(f"give exactly one of {', '.join(PREDICATES)}")
        return self

    @property
    def predicate(self) -> str:
        return next(p for p in PREDICATES if p in self.model_fields_set)

    @property
    def expected(self) -> JsonValue:
        value: JsonValue = getattr(self, self.predicate)
        return value


class ProbeDecl(_Strict):
    tool: str = Field(min_length=1)  # the server's read tool
    args: dict[str, ArgDecl] = {}
    call: dict[str, JsonValue] = {}  # the read tool's arguments ({arg} templates)
    check: CheckDecl
    # the read tool answered with an error (isError): the claim is violated, or (``unknown``)
    # the probe could not answer; it never holds
    on_error: str = "violated"
    description: str = ""

    _normal = field_validator("args", mode="before")(_args)

    @field_validator("on_error")
    @classmethod
    def _on_error(cls, v: str) -> str:
        return _one_of(v, ("violated", "unknown"))


class ServerDecl(_Strict):
    command: list[str] | None = None  # stdio: the program and its arguments
    url: str | None = None  # streamable HTTP
    env: dict[str, str] = {}
    timeout_s: float = Field(default=30.0, gt=0, le=600)
    tools: dict[str, ToolDecl] = {}
    probes: dict[str, ProbeDecl] = {}

    @model_validator(mode="after")
    def _one_transport(self) -> ServerDecl:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (stdio) or url (streamable HTTP)")
        if self.command is not None and not self.command:
            raise ValueError("command: the program to run is missing")
        return self


class McpFile(_Strict):
    servers: dict[str, ServerDecl]

    def tools(self) -> Iterator[tuple[str, str, ToolDecl]]:
        """(server, plangate name, declaration) of every tool."""
        for server, s in self.servers.items():
            for name, t in s.tools.items():
                yield server, name, t

    def probes(self) -> Iterator[tuple[str, str, ProbeDecl]]:
        for server, s in self.servers.items():
            for name, p in s.probes.items():
                yield server, name, p


def load(path: str, known_probes: Collection[str] = ()) -> McpFile:
    """The file at ``path``, checked; ``known_probes``: the deployment's other probes, which
    contracts may name too. ``McpFileError`` names the line and field of every problem."""
    where = Path(path)
    try:
        text = where.read_text(encoding="utf-8")
    except OSError as e:
        raise McpFileError(f"PLANGATE_MCP_SERVERS: cannot read {path}: {e.strerror}") from e
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        raise McpFileError(f"{where.name}{line}: not YAML: {getattr(e, 'problem', e)}") from e
    try:
        parsed = McpFile.model_validate(data)
    except ValidationError as e:
        found = [((*err["loc"],), _message(err)) for err in e.errors()]
        raise McpFileError(_report(where.name, root, found)) from None
    problems = list(_cross_check(parsed, set(known_probes)))
    if problems:
        raise McpFileError(_report(where.name, root, problems))
    return parsed


def _message(err: Any) -> str:
    kind, msg = err["type"], str(err["msg"])
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return "is not a field of this entry"
    return msg.removeprefix("Value error, ")


def _report(name: str, root: yaml.Node | None, problems: list[tuple[Loc, str]]) -> str:
    return "; ".join(
        f"{name} line {_line(root, loc)}, {'.'.join(map(str, loc))}: {msg}"
        for loc, msg in problems
    )


def _line(node: yaml.Node | None, loc: Loc) -> int:
    """The line of the deepest node of ``loc`` the file has (a key's own line)."""
    if node is None:
        return 1
    line = node.start_mark.line + 1
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            hit = next(((k, v) for k, v in node.value
                        if isinstance(k, yaml.ScalarNode) and k.value == str(part)), None)
            if hit is None:
                break
            line, node = hit[0].start_mark.line + 1, hit[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) \
                and 0 <= part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line


def _cross_check(f: McpFile, known: set[str]) -> Iterator[tuple[Loc, str]]:
    """What the fields cannot say alone: names unique, contracts and readers that name what
    exists, templates that name declared arguments."""
    probes = {name: p for _, name, p in f.probes()}
    tools = {name: t for _, name, t in f.tools()}
    seen: dict[str, str] = {}
    for server, s in f.servers.items():
        for kind, names in (("tools", s.tools), ("probes", s.probes)):
            for name in names:
                if name in seen:
                    yield ("servers", server, kind, name), f"{name} is declared twice"
                seen[name] = server
        for name, t in s.tools.items():
            at: Loc = ("servers", server, "tools", name)
            if t.call is not None:
                yield from _templates((*at, "call"), t.call, t.args)
            for phase in ("pre", "post"):
                for i, term in enumerate(getattr(t.contract, phase)):
                    yield from _term((*at, "contract", phase, i), term, t.args, probes, known)
            if t.reader is not None:
                r = tools.get(t.reader.tool)
                if r is None or r.effect != "read":
                    yield (*at, "reader", "tool"), (
                        f"{t.reader.tool!r} is not a read tool of this file")
        for name, p in s.probes.items():
            at = ("servers", server, "probes", name)
            yield from _templates((*at, "call"), p.call, p.args)
            yield from _templates((*at, "check", p.check.predicate), p.check.expected, p.args)


def _templates(at: Loc, template: JsonValue, args: dict[str, ArgDecl]) -> Iterator[
        tuple[Loc, str]]:
    for missing in sorted(names_in(template) - set(args)):
        yield at, f"{{{missing}}} is not one of its arguments ({', '.join(args) or 'none'})"


def _term(at: Loc, term: TermDecl, args: dict[str, ArgDecl], probes: dict[str, ProbeDecl],
          known: set[str]) -> Iterator[tuple[Loc, str]]:
    if term.probe not in probes and term.probe not in known:
        yield (*at, "probe"), f"no probe named {term.probe!r} in this file or the deployment"
        return
    for dst, src in term.from_args.items():
        if src.split(".", 1)[0] not in args:
            yield (*at, "from_args", dst), f"{src!r} is not an argument of the tool"
    probe = probes.get(term.probe)
    if probe is None:
        return  # a probe of the deployment: its own model checks the bound arguments
    given = set(term.from_args) | set(term.fixed)
    for extra in sorted(given - set(probe.args)):
        yield at, f"{term.probe} takes no argument {extra!r}"
    for missing in sorted(n for n, a in probe.args.items() if not a.optional and n not in given):
        yield at, f"{term.probe} needs argument {missing!r} (from_args or fixed)"
