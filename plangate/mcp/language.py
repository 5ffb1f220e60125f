"""The plan language as a model reads it over MCP: the JSON schema of a plan as users write it
(the ``plan`` argument of ``check_plan`` and ``run_plan``), and a page explaining the language
with an example (the resource ``plangate://plan-language`` and the prompt ``plan_language``).

The schema is derived from the plan model (``plans.model.Plan``), so its fields, enums and
bounds follow the model; two places differ from the model's own schema because plans are
written otherwise than the model holds them: a condition is flat (``{"probe": NAME, ...probe
args}``, not ``probe`` + ``args``), and ``pre``/``post`` take one condition or a list. Every
reference is inlined: the schema sits under a tool's ``properties.plan``, where a ``$ref`` to
the document's root would point at nothing. It accepts every plan the model accepts written as
JSON; what it cannot say (a tool's arguments, a probe's, dependencies) ``check_plan`` names.
"""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

from plangate.plans.model import Plan

LANGUAGE_URI = "plangate://plan-language"

_STEP_WORDS = {
    "n": "the step's number, unique in the plan; depends_on and reports name steps by it",
    "tool": "a tool of the deployment's catalogue, by its catalogue name (e.g. s3.put; "
            "plangate://catalogue lists them), not the name it is served under over MCP",
    "effect": "what the step does to the world; never weaker than its tool's own effect",
    "args": "the tool's arguments (its schema is in plangate://catalogue); a string "
            "\"${name}\" is the value a step bound earlier",
    "depends_on": "the n of earlier steps that must be done first",
    "binds": "names for values of the step's result, by JSON path (\"$.etag\"), for later "
             "arguments (\"${name}\")",
    "pre": "conditions probed before the call: {\"probe\": NAME, ...probe args}",
    "post": "conditions probed after the call, on a fresh read: {\"probe\": NAME, ...probe "
            "args, \"wait\": {\"timeout_s\": 3600, \"interval_s\": 60}}",
    "on_unmet": "what a failed check leads to where its failure class leaves a choice",
    "approval": "\"required\": the step waits for a credentialed person",
}
_PLAN_WORDS = {
    "goal": "what the plan is for, in words",
    "budget": "replans_max: how many times a failed step may be planned around (0 to 10)",
    "steps": "the steps; those whose dependencies are done may run concurrently",
    "made_at": "when the plan was written (ISO 8601 with a zone): the staleness window's start",
    "on_behalf_of": "whose authority the run acts under",
    "policy_bundle": "the policy version the plan was decided under",
    "approval_ttl_s": "how long an approval card stays valid, in seconds",
}


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            rest = {k: v for k, v in node.items() if k != "$ref"}
            return {**_inline(defs[ref.removeprefix("#/$defs/")], defs), **_inline(rest, defs)}
        return {k: _inline(v, defs) for k, v in node.items()
                if not (k == "title" and isinstance(v, str))}
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


@functools.cache
def _schema_text() -> str:
    raw = Plan.model_json_schema()
    defs: dict[str, Any] = raw.pop("$defs")
    condition = {
        "type": "object",
        "description": "a condition: the probe's name and, beside it, the probe's arguments",
        "properties": {"probe": {"type": "string"},
                       "wait": {"anyOf": [{"$ref": "#/$defs/WaitSpec"}, {"type": "null"}]}},
        "required": ["probe"],
        "additionalProperties": True,
    }
    defs["Condition"] = condition
    step = defs["Step"]
    for phase in ("pre", "post"):
        step["properties"][phase] = {"anyOf": [
            {"type": "array", "items": {"$ref": "#/$defs/Condition"}},
            {"$ref": "#/$defs/Condition"},
        ]}
    schema: dict[str, Any] = _inline(raw, defs)
    steps = schema["properties"]["steps"]["items"]
    steps.pop("description", None)
    for name, words in _STEP_WORDS.items():
        steps["properties"][name]["description"] = words
    for name, words in _PLAN_WORDS.items():
        schema["properties"][name]["description"] = words
    schema["description"] = (
        f"a plangate plan (the plan language: {LANGUAGE_URI}); check_plan names what the "
        "schema cannot say: unknown tools and probes, their arguments, dependencies"
    )
    return json.dumps(schema, sort_keys=True)


def plan_schema() -> dict[str, Any]:
    """The JSON schema of a plan as written (a fresh copy each time: callers may keep it)."""
    out: dict[str, Any] = copy.deepcopy(json.loads(_schema_text()))
    return out


EXAMPLE_PLAN: dict[str, Any] = {
    "goal": "publish the daily status note and keep a local copy",
    "budget": {"replans_max": 1},
    "steps": [
        {"n": 1, "tool": "s3.put", "effect": "write",
         "args": {"bucket": "status-notes", "key": "daily/2026-03-02.txt",
                  "body": "all systems normal", "if_none_match": "*"},
         "binds": {"note_etag": "$.etag"}},
        {"n": 2, "tool": "s3.get", "effect": "read", "depends_on": [1],
         "args": {"bucket": "status-notes", "key": "daily/2026-03-02.txt",
                  "dest": "notes/2026-03-02.txt", "if_match": "${note_etag}"},
         "pre": [{"probe": "object_exists", "bucket": "status-notes",
                  "key": "daily/2026-03-02.txt"}],
         "on_unmet": "halt"},
    ],
}


def language_text() -> str:
    """The plan language in a page a model (or a person) reads before writing a plan."""
    return f"""# The plangate plan language

A plan is one JSON object: a `goal`, optionally a `budget` (`replans_max`, 0 to 10, default 2)
and a list of `steps`. Each step calls one tool of this deployment's catalogue (the resource
`plangate://catalogue`: every tool's effect, argument schema and contract) by its catalogue
name (`s3.put`), never by the name it is served under over MCP (`s3_put`).

Step fields:
- `n`: a positive integer, unique; `depends_on`: the `n` of earlier steps that must be done
  first (steps whose dependencies are done may run concurrently; no cycles).
- `tool` and `args`: the tool and its arguments, exactly as its schema says (no extra ones).
- `effect`: `read` | `write` | `external` (leaves the organisation) | `money` (moves money);
  default `write`, and never weaker than the tool's own effect.
- `binds`: names for values of the step's result by JSON path (`{{"etag": "$.etag"}}`); a later
  argument `"${{etag}}"` is that value (inside a longer string it is interpolated). A name that
  cannot be resolved fails before the call, never as an empty value.
- `pre` / `post`: conditions `{{"probe": NAME, ...probe args}}`, read-only probes of the real
  systems, checked before and after the call (after: on a fresh read). A post condition may
  carry `"wait": {{"timeout_s": 3600, "interval_s": 60}}` to poll for a state the call brings
  about. A tool's own contract is checked too; the plan's conditions add to it.
- `on_unmet`: `replan` (default) | `halt` | `retry`: what a failed check leads to.
- `approval`: `"required"` holds the step for a credentialed person.

Run-level, optional: `made_at` (ISO 8601 with a zone), `on_behalf_of`, `policy_bundle`,
`approval_ttl_s`. Limits: at most 1,000 steps, 256 KiB of plan, 64 KiB per argument value;
waits at most 7 days, polling at most once a second.

Use `check_plan` first: it starts nothing and names the step and field of every problem. Then
`run_plan` starts the run and answers its run id; `run_report` reads it; `cancel_run` stops it.
A step that needs approval waits for a credentialed person: no MCP client can approve it.

An example (an S3 note written only if absent, then downloaded while it is still the version
this plan wrote):

```json
{json.dumps(EXAMPLE_PLAN, indent=2)}
```
"""
