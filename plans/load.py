"""Reading a plan from JSON or YAML, within the limits of ``plans.limits``.

Whatever goes wrong, the answer is a :class:`PlanError` whose problems each fit on one line:
a file too big (refused by its size, before it is read), a binary file, NaN or infinity, a YAML
alias or anchor, nesting too deep for the parsers, a plan over a size limit.
"""

from __future__ import annotations

import contextlib
import json
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from plans import limits
from plans.model import Condition, Plan

_NOT_FINITE = "NaN and infinity are not numbers a plan may hold"


class PlanError(ValueError):
    """A plan that cannot run. ``problems`` name the step and the field of each one."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def field_name(loc: Sequence[int | str]) -> str:
    """``('pre', 0, 'wait', 'timeout_s')`` as the plan spells it: ``pre[0].wait.timeout_s``."""
    out = ""
    for p in loc:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


# Parts of a pydantic location the plan's text does not have: a flat condition's ``args`` and
# the member of JsonValue's union that refused a value.
_SYNTHETIC = frozenset({"args", "dict", "list", "str", "int", "float", "bool"})


def _as_written(loc: tuple[int | str, ...], raw: Any) -> tuple[int | str, ...]:
    out: list[int | str] = []
    at = raw
    for p in loc:
        written = (isinstance(at, dict) and p in at) or (
            isinstance(at, list) and isinstance(p, int) and -len(at) <= p < len(at)
        )
        if written:
            at = at[p]
        elif p in _SYNTHETIC:
            continue
        else:
            at = None  # past what was written (a missing field): the rest as pydantic says
        out.append(p)
    return tuple(out)


def _where(loc: tuple[int | str, ...], raw: Any) -> str:
    # Turn pydantic's ('steps', 2, 'args') into "step 3, field args" using the step's own n.
    loc = _as_written(loc, raw)
    if len(loc) >= 2 and loc[0] == "steps" and isinstance(loc[1], int):
        n: Any = loc[1] + 1
        with contextlib.suppress(KeyError, IndexError, TypeError):
            n = raw["steps"][loc[1]]["n"]
        return f"step {n}, field {field_name(loc[2:]) or '(step)'}"
    return "plan, field " + (field_name(loc) or "(root)")


def _problem(err: ErrorDetails, raw: Any) -> str:
    msg = _NOT_FINITE if err["type"] == "finite_number" else err["msg"]
    return f"{_where(tuple(err['loc']), raw)}: {msg}"


def _size(n: int) -> str:
    return f"{n:,} bytes"


def _too_big(value: Any) -> str | None:
    """Why an argument value is over its limits (size as canonical JSON, nesting), or None."""
    most = limits.MAX_ARG_JSON_BYTES
    depth = limits.nesting(value)
    if depth > limits.MAX_NESTING:
        return f"nested {depth} levels deep; a value nests at most {limits.MAX_NESTING}"
    try:
        size = len(limits.canonical_json(value))
    except ValueError:
        return _NOT_FINITE
    if size > most:
        return f"{_size(size)} as JSON; an argument value is at most {_size(most)}"
    return None


def _condition_problems(n: int, phase: str, conds: list[Condition]) -> list[str]:
    return [
        f"step {n}, field {phase}[{i}].{name}: {why}"
        for i, c in enumerate(conds)
        for name, value in c.args.items()
        if (why := _too_big(value))
    ]


def limit_problems(plan: Plan) -> list[str]:
    """The plan's sizes against ``plans.limits`` (the step count is the model's own check)."""
    out: list[str] = []
    for s in plan.steps:
        out += [
            f"step {s.n}, field args.{name}: {why}"
            for name, value in s.args.items()
            if (why := _too_big(value))
        ]
        out += _condition_problems(s.n, "pre", s.pre)
        out += _condition_problems(s.n, "post", s.post)
    if out:
        return out
    size = len(limits.canonical_json(plan.model_dump(mode="json")))
    if size > limits.MAX_PLAN_JSON_BYTES:
        out.append(
            f"plan: {_size(size)} as JSON; a plan is at most {_size(limits.MAX_PLAN_JSON_BYTES)}"
            " (256 KiB)"
        )
    return out


def parse_plan(raw: Any) -> Plan:
    try:
        plan = Plan.model_validate(raw)
    except ValidationError as e:
        raise PlanError([_problem(err, raw) for err in e.errors()]) from None
    except RecursionError:
        raise PlanError([_TOO_DEEP]) from None
    found = limit_problems(plan)
    if found:
        raise PlanError(found)
    return plan


# The plan's own structure above an argument value: plan, steps, step, a condition list, a
# condition (or plan, steps, step, args).
_STRUCTURE_DEPTH = 5
_TOO_DEEP = (
    "plan: nested too deeply (a value in a plan nests at most "
    f"{limits.MAX_NESTING} levels of objects and lists)"
)


class _Refused(ValueError):
    """Text that parses, but holds what a plan may not (a YAML alias): not a syntax error."""


def _at(mark: Any) -> str:
    return "" if mark is None else f" (line {mark.line + 1}, column {mark.column + 1})"


class _NoAliasLoader(yaml.SafeLoader):
    """YAML without anchors and aliases: a plan has no use for them, and an alias bomb (a few
    lines that expand to millions of nodes) is refused at its first anchor, before it grows."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise _Refused(
                f"YAML anchors and aliases are not accepted in a plan{_at(event.start_mark)}"
            )
        return super().compose_node(parent, index)


def _one_line(e: yaml.YAMLError) -> str:
    problem = getattr(e, "problem", None)
    if problem:
        context = getattr(e, "context", None)
        said = f"{context}, {problem}" if context else problem
        return f"{said}{_at(getattr(e, 'problem_mark', None))}"
    return " ".join(str(e).split())


def load_text(text: str, name: str = "plan") -> Plan:
    # json.loads accepts NaN, Infinity and -Infinity, which JSON itself does not. They are read
    # as floats so that validation names the step and the field holding one (no number in a
    # plan may be NaN or infinite), and noted so that none can slip through unnamed.
    constants: list[str] = []

    def constant(word: str) -> float:
        constants.append(word)
        return float(word)

    try:
        try:
            raw = json.loads(text, parse_constant=constant)
        except json.JSONDecodeError:
            try:
                raw = yaml.load(text, Loader=_NoAliasLoader)  # a SafeLoader
            except yaml.YAMLError as e:
                raise PlanError([f"{name}: neither JSON nor YAML: {_one_line(e)}"]) from None
    except _Refused as e:
        raise PlanError([f"{name}: {e}"]) from None
    except RecursionError:
        raise PlanError([f"{name}: {_TOO_DEEP.removeprefix('plan: ')}"]) from None
    if not isinstance(raw, dict):
        raise PlanError([f"{name}: a plan is an object with goal and steps"])
    if limits.nesting(raw) > limits.MAX_NESTING + _STRUCTURE_DEPTH:
        raise PlanError([f"{name}: {_TOO_DEEP.removeprefix('plan: ')}"])
    plan = parse_plan(raw)
    if constants:
        raise PlanError([f"{name}: {constants[0]} is not a number a plan may hold"])
    return plan


def load_bytes(data: bytes, name: str = "plan") -> Plan:
    """A plan from the bytes of a file: UTF-8 text, never binary."""
    nul = data.find(b"\0")
    if nul >= 0:
        raise PlanError([f"{name}: a binary file, not a plan (a NUL byte at offset {nul})"])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PlanError([f"{name}: not UTF-8 text, not a plan (at byte {e.start})"]) from None
    return load_text(text.removeprefix("\ufeff"), name)


def load_file(path: str | Path) -> Plan:
    """A plan from a file, refused by its size before it is read (and never read whole)."""
    p = Path(path)
    most = limits.MAX_PLAN_FILE_BYTES
    try:
        st = p.stat()
        if stat.S_ISDIR(st.st_mode):
            raise PlanError([f"{p}: a directory, not a plan file"])
        if st.st_size > most:
            raise PlanError([f"{p}: {_size(st.st_size)}; a plan file is at most {_size(most)}"])
        with p.open("rb") as f:
            data = f.read(most + 1)  # a size stat did not tell (a pipe, a device) stops here
    except OSError as e:
        raise PlanError([f"{p}: cannot read: {e.strerror}"]) from None
    if len(data) > most:
        raise PlanError([f"{p}: more than {_size(most)}; a plan file is at most {_size(most)}"])
    return load_bytes(data, str(p))
