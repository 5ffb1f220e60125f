"""Validation of a plan against the tool and probe registries, before any workflow starts.

Every problem names the step and the field. Arguments that hold a ``${name}`` are type-checked
when the reference is resolved, just before dispatch; here we check that an earlier step the
step depends on binds the name.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from activities.tools import TOOLS
from activities.world import PathOutsideWorkdir, confine
from plans import bindings, jsonpath
from plans.load import PlanError
from plans.model import Condition, Plan, Step
from probes import PROBES

_PATH_ARGS = ("dest", "source", "path")


def _model_problems(model: type[BaseModel], args: Mapping[str, Any], where: str) -> Iterator[str]:
    deferred = {k for k, v in args.items() if any(bindings.references(v))}
    try:
        model.model_validate(dict(args))
    except ValidationError as e:
        for err in e.errors():
            loc = [str(p) for p in err["loc"]]
            if loc and loc[0] in deferred:
                continue
            field = ".".join(loc) or "(arguments)"
            yield f"{where}.{field}: {err['msg']}"


def _ancestors(plan: Plan) -> dict[int, set[int]]:
    deps = {s.n: set(s.depends_on) for s in plan.steps}
    out: dict[int, set[int]] = {}

    def walk(n: int, trail: tuple[int, ...]) -> set[int]:
        if n in out:
            return out[n]
        if n in trail:
            raise PlanError([f"step {n}, field depends_on: cycle {' -> '.join(map(str, trail))}"])
        acc: set[int] = set()
        for d in deps.get(n, ()):
            acc |= {d} | walk(d, (*trail, n))
        out[n] = acc
        return acc

    for n in deps:
        walk(n, ())
    return out


def _conditions(step: Step, phase: str, conds: list[Condition]) -> Iterator[str]:
    for i, c in enumerate(conds):
        where = f"step {step.n}, field {phase}[{i}]"
        spec = PROBES.get(c.probe)
        if spec is None:
            yield f"{where}.probe: unknown probe {c.probe!r} (known: {', '.join(sorted(PROBES))})"
            continue
        if spec.system == "record" and (
            TOOLS.get(step.tool) is None or not TOOLS[step.tool].reader
        ):
            yield f"{where}.probe: {c.probe} needs a tool with a reader; {step.tool} has none"
        yield from _model_problems(spec.args, c.args, where)


def _paths(step: Step, workdir: Any) -> Iterator[str]:
    for name in _PATH_ARGS:
        value = step.args.get(name)
        if isinstance(value, str) and not any(bindings.references(value)):
            try:
                confine(workdir, value)
            except PathOutsideWorkdir as e:
                yield f"step {step.n}, field args.{name}: {e}"


def problems(plan: Plan, workdir: Any = None, bound: Collection[str] = ()) -> list[str]:
    """Every problem of ``plan``. ``bound``: names earlier plan versions of the run bound,
    which a new version may reference without binding them again."""
    out: list[str] = []
    ns = [s.n for s in plan.steps]
    dupes = sorted({n for n in ns if ns.count(n) > 1})
    out += [f"step {n}, field n: used by more than one step" for n in dupes]
    known = set(ns)
    for s in plan.steps:
        out += [
            f"step {s.n}, field depends_on: no step {d}" for d in s.depends_on if d not in known
        ]
        out += [f"step {s.n}, field depends_on: a step cannot depend on itself"] * (
            s.n in s.depends_on
        )
    if out:
        return out
    try:
        ancestors = _ancestors(plan)
    except PlanError as e:
        return e.problems

    binder = {name: s.n for s in plan.steps for name in s.binds}
    for s in plan.steps:
        spec = TOOLS.get(s.tool)
        if spec is None:
            out.append(f"step {s.n}, field tool: unknown tool {s.tool!r}")
        else:
            out += _model_problems(spec.args, s.args, f"step {s.n}, field args")
        for name, path in s.binds.items():
            try:
                jsonpath.parse(path)
            except jsonpath.PathError as e:
                out.append(f"step {s.n}, field binds.{name}: {e}")
        out += _conditions(s, "pre", s.pre)
        out += _conditions(s, "post", s.post)
        refs = [(f"args.{k}", r) for k, v in s.args.items() for r in bindings.references(v)] + [
            (f"{phase}[{i}]", r)
            for phase, conds in (("pre", s.pre), ("post", s.post))
            for i, c in enumerate(conds)
            for r in bindings.references(c.args)
        ]
        for field, name in refs:
            if name in bound and name not in binder:
                continue
            if name not in binder:
                out.append(f"step {s.n}, field {field}: ${{{name}}} is bound by no step")
            elif binder[name] not in ancestors[s.n]:
                out.append(
                    f"step {s.n}, field {field}: ${{{name}}} is bound by step {binder[name]}, "
                    f"which step {s.n} does not depend on"
                )
        if s.approval is not None:
            # Until approval cards exist, accepting this would run the step with no person.
            out.append(
                f"step {s.n}, field approval: approvals are not available in this version; "
                "the step would run without a person"
            )
        if workdir is not None:
            out += _paths(s, workdir)
    return out


def check(plan: Plan, workdir: Any = None) -> Plan:
    found = problems(plan, workdir)
    if found:
        raise PlanError(found)
    return plan


def lint(plan: Plan) -> list[str]:
    """Warnings: legal plans that guard less than they appear to, or more than they need to."""
    from activities.tools.registry import contract_conditions, effective_effect

    out: list[str] = []
    for s in plan.steps:
        effect = effective_effect(s)
        if "effect" in s.model_fields_set and effect is not s.effect:
            out.append(
                f"step {s.n}, field effect: declares {s.effect}, weaker than what {s.tool} does "
                f"({effect}); it runs as {effect}"
            )
        post = [*contract_conditions(s.tool, "post", s.args), *s.post]
        pre = [*contract_conditions(s.tool, "pre", s.args), *s.pre]
        if effect.rank > 0 and not post:
            out.append(
                f"step {s.n}: a {effect} step with no post condition (from the plan or the "
                f"{s.tool} contract) passes VERIFYING unexamined"
            )
        if effect.outcome_must_be_known and not (pre or post) and s.approval != "required":
            out.append(
                f"step {s.n}: an {effect} step with neither a probe nor approval: required "
                "guards nothing"
            )
        for phase, conds in (("pre", s.pre), ("post", s.post)):
            for i, c in enumerate(conds):
                if (
                    c.probe == "table_rowcount"
                    and c.args.get("max") is not None
                    and c.args.get("max") == c.args.get("min", 1)
                ):
                    out.append(
                        f"step {s.n}, field {phase}[{i}]: an exact row count stops healthy runs; "
                        "a minimum rules out the same failure"
                    )
    return out
