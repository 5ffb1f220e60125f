"""The chat messages a model re-planner is handed.

System message: the rules, the output shape and the deployment's catalogue (its tools with their
effects and argument schemas, probes with theirs: ``activities.catalogue``, the same one
``plangate check`` and the worker use). User message: the request itself as JSON (goal, completed
steps with their bindings and results, the failure, the remaining steps, the budget and every
value bound so far).
"""

from __future__ import annotations

import json
from typing import Any

from openai.types.chat import ChatCompletionMessageParam

from plangate.plans.catalogue import Catalogue
from plangate.records.replan import ReplanRequest

RULES = """\
You re-plan an agent run after a step failed for good. You are handed the goal, the steps \
already completed (with what they bound and returned), the failure, the steps the failed plan \
still had, and the re-planning budget. Return a new plan that gets from the world as the \
completed steps left it to the goal.

Rules:
1. Completed steps are done and their effects are real. Never repeat them and never try to undo \
them.
2. Route around the failure: add the steps that clear its cause, or take another way. Calling \
the failed step again unchanged is no progress.
3. The remaining steps are the previous planner's proposal for what is left: keep, amend or \
discard each, but the plan must still reach the whole goal, not only fix the failure.
4. Use only the tools and probes in the catalogue below, with arguments that match their schemas.
5. A value in "bound" may be written literally or as "${name}". A step may bind new names from its \
result ("binds": {"name": "$.json.path"}); a later step that uses them lists it in depends_on.
6. Steps are numbered n = 1, 2, ... in this new plan; depends_on names only steps of this plan.
7. Give steps that change the world a post condition that checks the state they were for (not \
merely that the call returned). on_unmet: "halt" when failing means there is no route to the goal, \
"replan" when another route may exist, "retry" when trying again can help. Field probes \
(field_equals, field_not_equals, field_present) re-read the record a step touched, so they fit \
only tools marked "field_probes": true.
8. If no safe route to the goal exists, return {"steps": [], "reason": "..."} rather than invent \
one.

Answer with one JSON object: {"steps": [...], "reason": "one sentence"}. A step is {"n", "tool", \
"effect"?, "args", "depends_on"?, "binds"?, "pre"?, "post"?, "on_unmet"?, "approval"?}; a \
condition is {"probe": NAME, ...probe args}."""


def compact_schema(schema: Any) -> Any:
    """A JSON schema without titles and descriptions (property names are kept, whatever they are
    called)."""
    if isinstance(schema, list):
        return [compact_schema(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for k, v in schema.items():
        if k in ("title", "description") and isinstance(v, str):
            continue
        if k in ("properties", "$defs") and isinstance(v, dict):
            out[k] = {name: compact_schema(sub) for name, sub in v.items()}
        else:
            out[k] = compact_schema(v)
    return out


def catalogue_view(cat: Catalogue) -> dict[str, Any]:
    """Every tool of ``cat`` (name, effect, argument schema, whether field probes fit it) and
    every probe (name, argument schema)."""
    return {
        "tools": [
            {
                "name": name,
                "effect": spec.effect.value,
                "args": compact_schema(spec.args.model_json_schema()),
                "field_probes": spec.reader is not None,
            }
            for name, spec in sorted(cat.tools.items())
        ],
        "probes": [
            {"name": name, "args": compact_schema(spec.args.model_json_schema())}
            for name, spec in sorted(cat.probes.items())
        ],
    }


def request_payload(req: ReplanRequest) -> dict[str, Any]:
    """The request as the model sees it: defaults left out, conditions written flat."""
    return {
        "goal": req.goal,
        "completed": [c.model_dump(mode="json", exclude_defaults=True) for c in req.completed],
        "failure": req.failure.model_dump(mode="json", exclude_defaults=True),
        "remaining": [s.model_dump(mode="json", exclude_defaults=True) for s in req.remaining],
        "budget": req.budget.model_dump(mode="json"),
        "bound": req.bound,
    }


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=False)


def system_prompt(cat: Catalogue) -> str:
    return f"{RULES}\n\nCatalogue:\n{_dumps(catalogue_view(cat))}"


PLANNER_RULES = """\
You write a first plan for an agent run: the steps that reach the goal you are given, each a \
call of one tool from the catalogue below. Nothing runs until a person has read your plan; every \
step will be checked against the world before and after it acts.

Rules:
1. Use only the tools and probes in the catalogue, with arguments that match their schemas.
2. Steps are numbered n = 1, 2, ...; depends_on names earlier steps a step needs. A step may bind \
names from its result ("binds": {"name": "$.json.path"}) and later steps use them as "${name}" \
(and list the binding step in depends_on).
3. Declare each step's effect: "read", "write", "external" (leaves the organisation: e-mail, a \
vendor request) or "money" (moves money); never weaker than what the tool does.
4. Give every step that changes the world a post condition that checks the state it is for, not \
merely that the call returned; money and external steps need a probe. Prefer the weakest \
condition that still rules out the failure (a minimum row count, not an exact one). Field probes \
(field_equals, field_not_equals, field_present) fit only tools marked "field_probes": true.
5. on_unmet: "halt" when failing means there is no route to the goal, "replan" when another \
route may exist, "retry" when trying again can help.
6. Only what the goal and the context ask for: no extra money or external effects.
7. If the goal cannot be reached with these tools, return {"steps": [], "reason": "..."} rather \
than invent a route.

Answer with one JSON object: {"steps": [...], "reason": "one sentence"}."""


def first_plan_messages(
    goal: str, context: str | None, cat: Catalogue
) -> list[ChatCompletionMessageParam]:
    """The messages that ask for a first plan toward ``goal`` over ``cat`` (with ``context``,
    a person's notes: names of buckets and tables, amounts, addresses)."""
    user: dict[str, Any] = {"goal": goal}
    if context:
        user["context"] = context
    return [
        {"role": "system", "content": f"{PLANNER_RULES}\n\nCatalogue:\n"
         f"{_dumps(catalogue_view(cat))}"},
        {"role": "user", "content": _dumps(user)},
    ]


def build_messages(req: ReplanRequest, cat: Catalogue) -> list[ChatCompletionMessageParam]:
    """The messages of a re-plan over the deployment's catalogue ``cat``."""
    return [
        {"role": "system", "content": system_prompt(cat)},
        {"role": "user", "content": _dumps(request_payload(req))},
    ]
