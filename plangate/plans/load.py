"""Reading a plan from JSON or YAML, within the limits of ``plans.limits``: a ``.json`` file as
strict JSON, a ``.yaml``/``.yml`` file as YAML, other text by its first character (``{``: JSON).

Whatever goes wrong, the answer is a :class:`PlanError` whose problems each fit on one line:
a file too big (refused by its size, before it is read), a binary file, NaN or infinity, a YAML
alias or anchor, nesting too deep for the parsers, a plan over a size limit.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from plangate.errors import PlangateError
from plangate.plans import limits
from plangate.plans.model import Condition, Plan, Step
from plangate.plans.problem import Problem

_NOT_FINITE = "NaN and infinity are not numbers a plan may hold"


class PlanError(PlangateError, ValueError):
    """A plan that cannot run. ``problems`` name the step and the field of each one (a plain
    string, from outside the plan language, is taken as a problem of the whole plan)."""

    def __init__(self, problems: Sequence[str], partial: Partial | None = None) -> None:
        super().__init__("; ".join(problems))
        self.problems: list[Problem] = [Problem.of(p) for p in problems]
        # the steps that did parse, for the checks that come after parsing (``Partial``)
        self.partial = partial

    def __reduce__(self) -> tuple[Any, ...]:
        # an exception is rebuilt from its args (the joined line): rebuild it from its problems
        return (type(self), (self.problems,))


@dataclass(frozen=True)
class Partial:
    """What of a plan that failed to parse can still be checked: the plan with each step that
    did not parse as a stand-in, and the fields each stand-in (by its ``n``) left out. A
    stand-in is the step without the fields the parser refused, so its tool, arguments and
    conditions are still checked (``plangate check`` lists every problem of a step, not the
    parser's alone); where its tool or its shape is unusable, only its ``n``, ``depends_on``
    and ``binds``, and ``"tool"`` among what it left out."""

    plan: Plan
    stand_ins: Mapping[int, frozenset[str]]

    def checked(self, p: Problem) -> bool:
        """Whether a problem found in ``plan`` is one of the plan as written: not of a field
        a stand-in left out (the parser named that one)."""
        left_out = self.stand_ins.get(p.step) if isinstance(p.step, int) else None
        if left_out is None:
            return True
        if "tool" in left_out:
            return False
        head = re.split(r"[.\[]", p.field or "", maxsplit=1)[0]
        return head not in left_out


_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*\Z")


def shown(text: str, most: int = 40) -> str:
    """``text`` quoted on one line (``repr`` escapes line breaks and every other character that
    is not printable), cut after ``most`` characters."""
    cut = text if len(text) <= most else text[:most]
    return repr(cut) + ("..." if len(text) > most else "")


def field_name(loc: Sequence[int | str]) -> str:
    """``('pre', 0, 'wait', 'timeout_s')`` as the plan spells it: ``pre[0].wait.timeout_s``. A
    name that is not a plain word (a plan's own keys may be anything) is quoted in brackets,
    ``args['a b']``, so a problem stays one line whatever the plan holds."""
    out = ""
    for p in loc:
        if isinstance(p, int):
            out += f"[{p}]"
        elif p == "[key]":  # pydantic's mark of a name (a key) that is refused, not its value
            out += " (the name)"
        elif isinstance(p, str) and _PLAIN.match(p):
            out += f".{p}" if out else p
        else:
            out += f"[{shown(str(p))}]"
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


def _fits(n: Any) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and limits.is_integer_in_range(n)


def step_label(raw: Any, i: int) -> int | str:
    """How a problem names the ``i``-th step as written: by its ``n`` when that is a number a
    plan may hold, else by its place in the list (``"#3"``: the third step)."""
    n: Any = None
    with contextlib.suppress(KeyError, IndexError, TypeError):
        n = raw["steps"][i]["n"]
    if isinstance(n, float) and n.is_integer() and abs(n) < 2**63:
        n = int(n)  # 1.0 is the step 1 validation accepts
    return int(n) if _fits(n) else f"#{i + 1}"


def _located(loc: tuple[int | str, ...], raw: Any, why: str) -> Problem:
    # pydantic's ('steps', 2, 'args') as "step 3, field args", by the step's own n. Where the
    # location is the step or the plan itself, the line says "(step)" or "(root)" and the field
    # is None.
    loc = _as_written(loc, raw)
    step: int | str | None = None
    if len(loc) >= 2 and loc[0] == "steps" and isinstance(loc[1], int):
        step, loc = step_label(raw, loc[1]), loc[2:]
    field = field_name(loc) or None
    if field is not None:
        return Problem.at(step, field, why)
    where = "plan, field (root)" if step is None else f"step {step}, field (step)"
    return Problem(f"{where}: {why}", step, None, why)


_TOO_LARGE = (
    "an integer beyond 64 bits; integers in a plan are between "
    f"{limits.MIN_INTEGER:,} and {limits.MAX_INTEGER:,}"
)


def _unfit(value: Any) -> str | None:
    """Why a scalar is no value a plan may hold, or None: an integer past 64 bits; text with a
    lone surrogate (no UTF-8 file, no JSON payload can carry it) or a NUL character (no file
    name, no PostgreSQL text can hold it: refused here rather than by a system mid-run)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return None if limits.is_integer_in_range(value) else _TOO_LARGE
    if isinstance(value, str):
        bad = _SURROGATE.search(value)
        if bad is not None:
            return (
                f"not Unicode text: a lone surrogate U+{ord(bad.group()):04X} at character "
                f"{bad.start()}"
            )
        if "\0" in value:
            return f"{shown(value)} holds a NUL byte, which no text in a plan may hold"
    return None


_SURROGATE = re.compile("[\ud800-\udfff]")


# What an unfit value leaves in JSON text: a lone surrogate as it is, a NUL escaped, an integer
# past 64 bits as 19 digits or more (2**63 has 19). No match: no value is unfit.
_SUSPECT = re.compile("[\ud800-\udfff]|\\\\u0000|[0-9]{19}")


def _maybe_unfit(raw: Any) -> bool:
    """False only where no value or key of ``raw`` can be unfit: a plan's values are walked
    (``_unfit_values``) three or four times from a client's submit to the worker's guards, and
    its JSON text, searched once, is five times cheaper than a walk. Anything JSON cannot write
    (a key of another type, a circle, an integer past Python's 4,300 digits) is walked."""
    try:
        text = json.dumps(raw, ensure_ascii=False, default=repr)
    except (TypeError, ValueError, RecursionError):
        return True
    return _SUSPECT.search(text) is not None


def _unfit_values(raw: Any, most: int = 20) -> list[Problem]:
    """The values (and keys) anywhere in ``raw`` no plan may hold, each with where it is, in
    the order written; without recursion, and once per object even if it repeats."""
    if not _maybe_unfit(raw):
        return []
    out: list[Problem] = []
    seen: set[int] = set()
    stack: list[tuple[Any, tuple[int | str, ...]]] = [(raw, ())]
    while stack and len(out) < most:
        value, loc = stack.pop()
        if isinstance(value, dict | list):
            if id(value) in seen:
                continue
            seen.add(id(value))
            items = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
            for key, child in reversed(items):
                if isinstance(value, dict) and (why := _unfit(key)) is not None:
                    out.append(_located((*loc, key), raw, f"{why} (in a name)"))
                else:
                    stack.append((child, (*loc, key)))
        elif (why := _unfit(value)) is not None:
            out.append(_located(loc, raw, why))
    return out


def _problem(err: ErrorDetails, raw: Any) -> Problem:
    msg = _NOT_FINITE if err["type"] == "finite_number" else err["msg"]
    return _located(tuple(err["loc"]), raw, msg)


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


def _condition_problems(n: int, phase: str, conds: list[Condition]) -> list[Problem]:
    return [
        Problem.at(n, field_name((phase, i, name)), why)
        for i, c in enumerate(conds)
        for name, value in c.args.items()
        if (why := _too_big(value))
    ]


def limit_problems(plan: Plan) -> list[Problem]:
    """The plan's sizes against ``plans.limits`` (the step count is the model's own check), and
    its values (a plan built in code, not read by ``parse_plan``, is held to them here)."""
    out: list[Problem] = _unfit_values(plan.model_dump())
    if out:
        return out
    for s in plan.steps:
        out += [
            Problem.at(s.n, field_name(("args", name)), why)
            for name, value in s.args.items()
            if (why := _too_big(value))
        ]
        out += _condition_problems(s.n, "pre", s.pre)
        out += _condition_problems(s.n, "post", s.post)
    if out:
        return out
    size = len(limits.canonical_json(plan.model_dump(mode="json")))
    if size > limits.MAX_PLAN_JSON_BYTES:
        out.append(Problem.plan(
            f"{_size(size)} as JSON; a plan is at most {_size(limits.MAX_PLAN_JSON_BYTES)}"
            " (256 KiB)"
        ))
    return out


def parse_plan(raw: Any) -> Plan:
    unfit = _unfit_values(raw)
    if unfit:
        raise PlanError(unfit)
    try:
        plan = Plan.model_validate(raw)
    except ValidationError as e:
        errors = e.errors()
        raise PlanError([_problem(err, raw) for err in errors], _partial(raw, errors)) from None
    except RecursionError:
        raise PlanError([Problem.plan(_TOO_DEEP)]) from None
    found = limit_problems(plan)
    if found:
        raise PlanError(found)
    return plan


def _stand_in(raw: Any, i: int, n: int, refused: set[str]) -> tuple[dict[str, Any], set[str]]:
    """A step that did not parse, as the checks after parsing see it, and the fields it left
    out: the step without the fields the parser ``refused``; where that does not parse (or
    names no tool), its ``n``, and its ``depends_on`` and ``binds`` where they parse."""
    step = raw["steps"][i]
    if isinstance(step, dict) and refused and "tool" not in refused:
        kept = {k: v for k, v in step.items() if k not in refused | {"n"}}
        with contextlib.suppress(ValidationError, RecursionError):
            Step.model_validate({**kept, "n": n})
            return {**kept, "n": n}, refused
    out: dict[str, Any] = {"n": n, "tool": ""}
    if isinstance(step, dict):
        for name in ("depends_on", "binds"):
            candidate = {**out, name: step.get(name)}
            with contextlib.suppress(ValidationError):
                Step.model_validate(candidate)
                out = candidate
    return out, {"tool", *(set(step) if isinstance(step, dict) else set())} - set(out)


def _partial(raw: Any, errors: Sequence[ErrorDetails]) -> Partial | None:
    """The plan ``raw`` with stand-ins for its steps that failed to parse (``Partial``), when
    what failed is within steps or plan-level fields that can be left out; else None."""
    steps = raw.get("steps") if isinstance(raw, dict) else None
    if not isinstance(steps, list) or not steps or len(steps) > limits.MAX_STEPS:
        return None
    bad_steps: dict[int, set[str]] = {}
    bad_fields: set[str] = set()
    for err in errors:
        loc = tuple(err["loc"])
        if len(loc) >= 2 and loc[0] == "steps" and isinstance(loc[1], int):
            fields = bad_steps.setdefault(loc[1], set())
            # a field of the step; the step as a whole (not an object): every field
            fields.add(str(loc[2]) if len(loc) > 2 else "tool")
        elif len(loc) == 1 and isinstance(loc[0], str) and loc[0] != "steps":
            bad_fields.add(loc[0])
        else:
            return None
    fixed = {k: v for k, v in raw.items() if k not in bad_fields}
    fixed.setdefault("goal", "(a goal that did not parse)")
    labels = [step_label(raw, i) for i in range(len(steps))]
    spare = max((n for n in labels if isinstance(n, int)), default=0) + 1
    stand_ins: dict[int, frozenset[str]] = {}
    fixed["steps"] = list(steps)
    for i, refused in sorted(bad_steps.items()):
        label = labels[i]
        n = label if isinstance(label, int) and label > 0 else spare + i
        fixed["steps"][i], left_out = _stand_in(raw, i, n, refused)
        stand_ins[n] = frozenset(left_out)
    try:
        return Partial(Plan.model_validate(fixed), stand_ins)
    except (ValidationError, RecursionError):
        return None


# The plan's own structure above an argument value: plan, steps, step, a condition list, a
# condition (or plan, steps, step, args).
_STRUCTURE_DEPTH = 5
_TOO_DEEP = (
    "nested too deeply (a value in a plan nests at most "
    f"{limits.MAX_NESTING} levels of objects and lists)"
)


class _Refused(ValueError):
    """Text that parses, but holds what a plan may not (a YAML alias): not a syntax error."""


# Python converts at most this many digits between int and str (sys.get_int_max_str_digits)
_MAX_INT_DIGITS = 4300


def _int(text: str) -> int:
    """An integer of a plan's JSON or YAML, refused (not failed on) past Python's limit."""
    if len(text.lstrip("+-").replace("_", "")) > _MAX_INT_DIGITS:
        raise _Refused(f"a number of more than 4,300 digits; {_TOO_LARGE}")
    return int(text)


def _at(mark: Any) -> str:
    return "" if mark is None else f" (line {mark.line + 1}, column {mark.column + 1})"


@functools.cache
def _no_alias_loader() -> type[Any]:
    """A YAML loader without anchors and aliases: a plan has no use for them, and an alias bomb
    (a few lines that expand to millions of nodes) is refused at its first anchor, before it
    grows. Made on the first YAML plan: a JSON plan never loads the YAML library."""
    import yaml

    class NoAliasLoader(yaml.SafeLoader):
        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.peek_event()  # type: ignore[no-untyped-call]
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
                raise _Refused(
                    f"YAML anchors and aliases are not accepted in a plan{_at(event.start_mark)}"
                )
            return super().compose_node(parent, index)

        def construct_yaml_int(self, node: Any) -> Any:
            _int(str(self.construct_scalar(node)))
            return super().construct_yaml_int(node)

    NoAliasLoader.add_constructor("tag:yaml.org,2002:int", NoAliasLoader.construct_yaml_int)
    return NoAliasLoader


def _one_line(e: Exception) -> str:
    problem = getattr(e, "problem", None)
    if problem:
        context = getattr(e, "context", None)
        said = f"{context}, {problem}" if context else problem
        return f"{said}{_at(getattr(e, 'problem_mark', None))}"
    return " ".join(str(e).split())


def _unreadable(e: ValueError) -> str:
    return f"a value that cannot be read: {' '.join(str(e).split())[:200]}"


def _refused(name: str, why: str) -> PlanError:
    """What was read from ``name`` (a file, or "plan") is no plan at all."""
    return PlanError([Problem.plan(why, name)])


Syntax = Literal["json", "yaml", "sniff"]


def syntax_of(path: str | Path) -> Syntax:
    """How a file is read, by its name: ``.json`` as strict JSON, ``.yaml``/``.yml`` as YAML,
    anything else by its content (``sniff``)."""
    suffix = Path(path).suffix.lower()
    return "json" if suffix == ".json" else "yaml" if suffix in (".yaml", ".yml") else "sniff"


def load_text(text: str, name: str = "plan", syntax: Syntax = "sniff") -> Plan:
    """A plan from text: strict JSON (``json``), YAML (``yaml``), or by its content (``sniff``:
    text whose first character is ``{`` is JSON, anything else YAML). JSON is never read by
    the YAML fallback: a trailing comma or a single quote is a mistake named by line and
    column, not a plan that YAML happens to read."""
    if syntax == "sniff":
        syntax = "json" if text.lstrip().startswith("{") else "yaml"
    # json.loads accepts NaN, Infinity and -Infinity, which JSON itself does not. They are read
    # as floats so that validation names the step and the field holding one (no number in a
    # plan may be NaN or infinite), and noted so that none can slip through unnamed.
    constants: list[str] = []

    def constant(word: str) -> float:
        constants.append(word)
        return float(word)

    try:
        if syntax == "json":
            try:
                raw = json.loads(text, parse_constant=constant, parse_int=_int)
            except json.JSONDecodeError as e:
                raise _refused(
                    name, f"not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})"
                ) from None
        else:
            import yaml

            try:
                raw = yaml.load(text, Loader=_no_alias_loader())  # a SafeLoader
            except yaml.YAMLError as e:
                raise _refused(name, f"not valid YAML: {_one_line(e)}") from None
    except PlanError:
        raise
    except _Refused as e:
        raise _refused(name, str(e)) from None
    except ValueError as e:
        # what a parser's constructors refuse: a YAML date that is none (2026-02-30)
        raise _refused(name, _unreadable(e)) from None
    except RecursionError:
        raise _refused(name, _TOO_DEEP) from None
    if not isinstance(raw, dict):
        raise _refused(name, "a plan is an object with goal and steps")
    if limits.nesting(raw) > limits.MAX_NESTING + _STRUCTURE_DEPTH:
        raise _refused(name, _TOO_DEEP)
    plan = parse_plan(raw)
    if constants:
        raise _refused(name, f"{constants[0]} is not a number a plan may hold")
    return plan


def load_bytes(data: bytes, name: str = "plan", syntax: Syntax = "sniff") -> Plan:
    """A plan from the bytes of a file: UTF-8 text, never binary."""
    nul = data.find(b"\0")
    if nul >= 0:
        raise _refused(name, f"a binary file, not a plan (a NUL byte at offset {nul})")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _refused(name, f"not UTF-8 text, not a plan (at byte {e.start})") from None
    return load_text(text.removeprefix("\ufeff"), name, syntax)


def load_file(path: str | Path) -> Plan:
    """A plan from a file, refused by its size before it is read (and never read whole)."""
    p = Path(path)
    # the file as problems name it: quoted when its name holds what a line cannot show
    name = str(p) if str(p).isprintable() else shown(str(p), 200)
    most = limits.MAX_PLAN_FILE_BYTES
    try:
        st = p.stat()
        if stat.S_ISDIR(st.st_mode):
            raise _refused(name, "a directory, not a plan file")
        if st.st_size > most:
            raise _refused(name, f"{_size(st.st_size)}; a plan file is at most {_size(most)}")
        with p.open("rb") as f:
            data = f.read(most + 1)  # a size stat did not tell (a pipe, a device) stops here
    except PlanError:
        raise
    except OSError as e:
        raise _refused(name, f"cannot read: {e.strerror}") from None
    except ValueError:  # a NUL byte in the name
        raise _refused(name, "cannot read: no file name holds a NUL byte") from None
    if len(data) > most:
        raise _refused(name, f"more than {_size(most)}; a plan file is at most {_size(most)}")
    return load_bytes(data, name, syntax_of(p))
