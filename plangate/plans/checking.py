"""Validation of a plan against a catalogue of tools and probes, before any workflow starts.

The one checking function: ``plangate check`` and ``plangate run``, the review of a re-planned
plan, tests and benchmarks all call ``problems`` (or ``check``). Every problem names the step
and the field. Arguments that hold a ``${name}`` are type-checked when the reference is
resolved, just before dispatch; here we check that an earlier step the step depends on binds
the name. Local paths are judged by ``paths`` (the world's confinement, handed in), where tools
may read and write by ``scope``. Which arguments are local paths is the catalogue's word
(``local_paths``), never the plan's: an MCP server's tool has none.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping
from itertools import pairwise
from typing import Any

from pydantic import BaseModel, ValidationError

from plangate.plans import bindings, jsonpath
from plangate.plans.catalogue import Catalogue, ToolInfo
from plangate.plans.guards import conditions_for, contract_conditions, guard
from plangate.plans.load import PlanError, field_name, limit_problems, shown
from plangate.plans.model import Condition, Plan, Step
from plangate.plans.problem import Problem
from plangate.plans.scope import Scope, refusals

# A local path's problem (outside the work directory, a directory), or None.
PathCheck = Callable[[str], str | None]

# where a tool or probe does not say (``local_paths``): plangate's own naming
_PATH_ARGS = ("dest", "source", "path")
_LOCAL_ARGS = ("dest", "source")  # local files in any condition (object_content_equals)


def _model_problems(
    model: type[BaseModel], args: Mapping[str, Any], n: int, where: str
) -> Iterator[Problem]:
    """The problems of ``args`` against ``model``, in step ``n``, their fields under ``where``
    (``args``, ``pre[0]``)."""
    deferred = {k for k, v in args.items() if any(bindings.references(v))}
    try:
        model.model_validate(dict(args))
    except ValidationError as e:
        for err in e.errors():
            loc = tuple(err["loc"])
            if loc and loc[0] in deferred:
                continue
            name = field_name(loc)
            field = f"{where}{'.' if name and not name.startswith('[') else ''}{name}"
            yield Problem.at(n, field, err["msg"])


def _cycle(deps: Mapping[int, set[int]], left: set[int]) -> list[int]:
    """A cycle among ``left`` (steps Kahn's algorithm could not order), found without
    recursion: follow dependencies inside ``left`` until a step repeats."""
    n = min(left)
    seen: dict[int, int] = {}
    trail: list[int] = []
    while n not in seen:
        seen[n] = len(trail)
        trail.append(n)
        # every step left over depends on at least one other step left over
        n = min(d for d in deps[n] if d in left)
    return [*trail[seen[n] :], n]


def _order(deps: Mapping[int, set[int]]) -> list[int]:
    """The steps in an order that puts each after everything it waits for (Kahn's algorithm, no
    recursion: a long chain of steps is as easy as a short one); a step on a cycle, or waiting
    for one, is left out."""
    waiting = {n: len(d) for n, d in deps.items()}
    dependents: dict[int, list[int]] = {n: [] for n in deps}
    for n, ds in deps.items():
        for d in ds:
            dependents[d].append(n)
    ready = [n for n, count in waiting.items() if count == 0]
    order: list[int] = []
    while ready:
        n = ready.pop()
        order.append(n)
        for m in dependents[n]:
            waiting[m] -= 1
            if waiting[m] == 0:
                ready.append(m)
    return order


def _ancestors(plan: Plan) -> dict[int, set[int]]:
    """Each step's transitive dependencies, in topological order. A cycle is a PlanError that
    names the steps on it."""
    deps = {s.n: set(s.depends_on) for s in plan.steps}
    out: dict[int, set[int]] = {}
    for n in _order(deps):
        out[n] = set(deps[n]).union(*(out[d] for d in deps[n]))
    if len(out) < len(deps):
        cycle = _cycle(deps, set(deps) - set(out))
        shown = cycle if len(cycle) <= 12 else [*cycle[:5], "...", *cycle[-5:]]
        raise PlanError(
            [
                Problem.at(
                    cycle[0], "depends_on", f"cycle {' -> '.join(map(str, shown))}"
                    + (f" ({len(cycle) - 1} steps)" if len(cycle) > 12 else "")
                )
            ]
        )
    return out


def _circular_waits(
    plan: Plan, catalogue: Catalogue, ancestors: Mapping[int, set[int]]
) -> list[Problem]:
    """Steps that would wait for each other. A step whose pre condition is violated and that a
    step not after it promises as a post condition waits for that step to end before it reads
    again (up to an hour; ``workflows.context.VersionContext.unfinished_owner``); around a
    circle of such waits and dependencies, no step ever ends. Claims holding a ``${name}`` are
    left out (bound only at run time), and so are field probes (they read the step's own
    record)."""
    guarded = guard(plan, catalogue)
    systems = {name: p.system for name, p in catalogue.probes.items()}

    def shared(conds: list[Condition]) -> list[Condition]:
        return [
            c for c in conds
            if systems.get(c.probe, "record") != "record" and not any(bindings.references(c.args))
        ]

    promised: dict[str, list[int]] = {}
    for s in plan.steps:
        for c in shared(conditions_for(guarded.guard(s.n), "post", s.args, s.post)):
            promised.setdefault(c.key(), []).append(s.n)
    waits: dict[int, set[int]] = {s.n: set(s.depends_on) for s in plan.steps}
    why = {(s.n, d): "depends_on" for s in plan.steps for d in s.depends_on}
    for s in plan.steps:
        written = {c.key(): f"pre[{i}]" for i, c in enumerate(s.pre)}
        for c in shared(conditions_for(guarded.guard(s.n), "pre", s.args, s.pre)):
            for owner in promised.get(c.key(), []):
                if owner != s.n and s.n not in ancestors[owner]:
                    waits[s.n].add(owner)
                    why.setdefault((s.n, owner), f"{written.get(c.key(), 'args')}: {c.key()}")
    left = set(waits) - set(_order(waits))
    if not left:
        return []
    cycle = _cycle(waits, left)
    links = "; ".join(f"step {a} waits for step {b} ({why[(a, b)]})" for a, b in pairwise(cycle))
    first = why[(cycle[0], cycle[1])].split(":", 1)[0]
    return [
        Problem.at(
            cycle[0], first, f"steps {' -> '.join(map(str, cycle))} would wait for each other "
            f"and none could start: {links}"
        )
    ]


def _conditions(
    step: Step, phase: str, conds: list[Condition], cat: Catalogue, scope: Scope
) -> Iterator[Problem]:
    """Each condition names a known probe, with arguments that fit it and name what it reads
    inside the deployment's scope (checked again by the probe activity)."""
    probes = cat.probes
    tool = cat.tools.get(step.tool)
    for i, c in enumerate(conds):
        where = f"{phase}[{i}]"
        spec = probes.get(c.probe)
        if spec is None:
            known = ", ".join(sorted(probes))
            yield Problem.at(
                step.n, f"{where}.probe", f"unknown probe {c.probe!r} (known: {known})"
            )
            continue
        if spec.system == "record" and (tool is None or not tool.reader):
            why = f"{c.probe} needs a tool with a reader; {shown(step.tool)} has none"
            yield Problem.at(step.n, f"{where}.probe", why)
        found = list(_model_problems(spec.args, c.args, step.n, where))
        yield from found or (
            Problem.at(step.n, f"{where}.{n.arg or 'probe'}", why)
            for n, why in refusals(scope, c.args, spec.reads)
        )


def _paths(
    step: Step, paths: PathCheck, cat: Catalogue, unfit: Collection[str] = ()
) -> Iterator[Problem]:
    """Local paths (of the step, and of its conditions) name files inside the work directory;
    the same rule the tools and probes apply at run time after binding. Which arguments are
    local paths is the catalogue's (``local_paths``): an MCP server's tool or probe has none. A
    condition's ``path`` is a local path only for a file probe (for field probes it is a JSON
    path). ``unfit``: the fields of arguments that do not fit the tool (their problems are
    named already); the other arguments' paths are judged, every problem in one answer."""
    tool = cat.tools.get(step.tool)
    local = _PATH_ARGS if tool is None or tool.local_paths is None else tool.local_paths
    found = [(f"args.{name}", step.args.get(name)) for name in local
             if f"args.{name}" not in unfit]
    for phase, conds in (("pre", step.pre), ("post", step.post)):
        for i, c in enumerate(conds):
            spec = cat.probes.get(c.probe)
            if spec is not None and spec.local_paths is not None:
                names = spec.local_paths
            else:
                names = _PATH_ARGS if spec is not None and spec.system == "file" else _LOCAL_ARGS
            found += [(f"{phase}[{i}].{name}", c.args.get(name)) for name in names]
    for field, value in found:
        if isinstance(value, str) and not any(bindings.references(value)):
            why = paths(value)
            if why is not None:
                yield Problem.at(step.n, field, why)


def _scope(step: Step, spec: ToolInfo, scope: Scope) -> Iterator[Problem]:
    """What the step reads and writes is inside the deployment's scope (checked again by the
    tool)."""
    for n, why in refusals(scope, step.args, spec.reads, spec.writes):
        yield Problem.at(step.n, n.where("args"), why)


def problems(
    plan: Plan,
    catalogue: Catalogue,
    *,
    paths: PathCheck | None = None,
    bound: Collection[str] = (),
    scope: Scope | None = None,
) -> list[Problem]:
    """Every problem of ``plan``. ``paths``: judges local paths (none: not judged here).
    ``bound``: names earlier plan versions of the run bound, which a new version may reference
    without binding them again. ``scope``: what tools and probes may read and write (default:
    anything but plangate's own schema and the system catalogues)."""
    scope = scope or Scope()
    out: list[Problem] = limit_problems(plan)
    if out:
        return out
    ns = [s.n for s in plan.steps]
    dupes = sorted(n for n, count in Counter(ns).items() if count > 1)
    out += [Problem.at(n, "n", "used by more than one step") for n in dupes]
    known = set(ns)
    for s in plan.steps:
        out += [
            Problem.at(s.n, "depends_on", f"no step {d}") for d in s.depends_on if d not in known
        ]
        out += [Problem.at(s.n, "depends_on", "a step cannot depend on itself")] * (
            s.n in s.depends_on
        )
    # A broken graph (no order) stops only what needs the order: which step a binding comes
    # before. Each step's tool, arguments and conditions are still checked, in one answer.
    ancestors: dict[int, set[int]] | None = None
    if not out:
        try:
            ancestors = _ancestors(plan)
        except PlanError as e:
            out += e.problems

    binder = {name: s.n for s in plan.steps for name in s.binds}
    for s in plan.steps:
        spec = catalogue.tools.get(s.tool)
        arg_problems: list[Problem] = []
        if spec is None:
            out.append(Problem.at(s.n, "tool", f"unknown tool {s.tool!r}"))
        else:
            arg_problems = list(_model_problems(spec.args, s.args, s.n, "args"))
            # what a step reads and writes, and its paths, are judged on arguments that fit it
            out += arg_problems or list(_scope(s, spec, scope))
        for name, path in s.binds.items():
            try:
                jsonpath.parse(path)
            except jsonpath.PathError as e:
                out.append(Problem.at(s.n, field_name(("binds", name)), str(e)))
        out += _conditions(s, "pre", s.pre, catalogue, scope)
        out += _conditions(s, "post", s.post, catalogue, scope)
        refs = [
            (field_name(("args", k)), r) for k, v in s.args.items() for r in bindings.references(v)
        ] + [
            (f"{phase}[{i}]", r)
            for phase, conds in (("pre", s.pre), ("post", s.post))
            for i, c in enumerate(conds)
            for r in bindings.references(c.args)
        ]
        for field, name in refs:
            if name in bound and name not in binder:
                continue
            if name not in binder:
                out.append(Problem.at(s.n, field, f"${{{name}}} is bound by no step"))
            elif ancestors is not None and binder[name] not in ancestors[s.n]:
                out.append(Problem.at(
                    s.n, field, f"${{{name}}} is bound by step {binder[name]}, "
                    f"which step {s.n} does not depend on"
                ))
        if paths is not None:
            out += _paths(s, paths, catalogue, {p.field for p in arg_problems if p.field})
    if out or ancestors is None:
        return out
    return _circular_waits(plan, catalogue, ancestors)


def check(
    plan: Plan, catalogue: Catalogue, *, paths: PathCheck | None = None, scope: Scope | None = None
) -> Plan:
    found = problems(plan, catalogue, paths=paths, scope=scope)
    if found:
        raise PlanError(found)
    return plan


def lint(plan: Plan, catalogue: Catalogue) -> list[Problem]:
    """Warnings: legal plans that guard less than they appear to, or more than they need to
    (``Problem.strict`` makes one a problem)."""
    guarded = guard(plan, catalogue)
    out: list[Problem] = []
    for s in plan.steps:
        g = guarded.guard(s.n)
        effect = g.effect
        if "effect" in s.model_fields_set and effect is not s.effect:
            out.append(Problem.at(
                s.n, "effect", f"declares {s.effect}, weaker than what {s.tool} does "
                f"({effect}); it runs as {effect}"
            ))
        post = [*contract_conditions(g, "post", s.args), *s.post]
        pre = [*contract_conditions(g, "pre", s.args), *s.pre]
        if effect.rank > 0 and not post:
            out.append(Problem.at(
                s.n, None, f"a {effect} step with no post condition (from the plan or the "
                f"{s.tool} contract) passes VERIFYING unexamined"
            ))
        if effect.outcome_must_be_known and not (pre or post) and s.approval != "required":
            out.append(Problem.at(
                s.n, None, f"an {effect} step with neither a probe nor approval: required "
                "guards nothing"
            ))
        for phase, conds in (("pre", s.pre), ("post", s.post)):
            for i, c in enumerate(conds):
                if (
                    c.probe == "table_rowcount"
                    and c.args.get("max") is not None
                    and c.args.get("max") == c.args.get("min", 1)
                ):
                    out.append(Problem.at(
                        s.n, f"{phase}[{i}]", "an exact row count stops healthy runs; "
                        "a minimum rules out the same failure"
                    ))
    return out
