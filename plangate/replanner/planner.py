"""From a goal to a first plan: the configured model is asked for a plan over the catalogue,
the answer is checked like any plan (an answer is untrusted input: registry-only tools and
probes, bounded sizes) and linted strictly; the plan is handed back with its lint findings for
a person to read. Nothing runs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import yaml

from plangate.activities.catalogue import catalogue, plan_problems
from plangate.errors import ConfigurationError, PlangateError
from plangate.plans.checking import lint
from plangate.plans.limits import MAX_ARG_JSON_BYTES
from plangate.plans.model import Budget, Plan
from plangate.plans.problem import Problem
from plangate.plans.visible import visible, visible_json
from plangate.replanner.backends.openai import OpenAIBackend
from plangate.replanner.prompt import first_plan_messages
from plangate.world.settings import CatalogueSettings, ModelSettings, WorldSettings

MAX_CONTEXT_BYTES = MAX_ARG_JSON_BYTES  # a person's notes, handed to the model as they are


class PlanningUnavailable(PlangateError):
    """No model is configured (``NoModel``), or it gave no answer."""


class NoModel(PlanningUnavailable, ConfigurationError):
    """Planning needs a model and the settings name none."""


@dataclass(frozen=True)
class Draft:
    """A first plan for a person to read, or why there is none."""

    plan: Plan | None
    reason: str = ""
    problems: list[Problem] = field(default_factory=list)  # the answer was refused for these
    findings: Sequence[str] = field(default_factory=list)  # lint under --strict, for the reader

    def as_yaml(self) -> str:
        """The plan as YAML, its findings as comments at the top (``plangate check`` reads
        it as it is)."""
        if self.plan is None:
            raise ValueError("no plan to write")
        # the model's words: a line feed in them would end the comment and write YAML
        head = [f"# plangate plan: {visible(self.reason)}"] if self.reason else []
        if self.findings:
            head.append(f"# {len(self.findings)} findings of `plangate check --strict`:")
            head += [f"#   - {visible(f)}" for f in self.findings]
        else:
            head.append("# `plangate check --strict` finds nothing to warn about")
        plan = self.plan.model_dump(mode="json", exclude_defaults=True)
        body = yaml.safe_dump(plan, sort_keys=False, allow_unicode=True)
        if visible(body, lines=True) != body:
            # a control or direction-changing character PyYAML would write as it is: every
            # character outside ASCII as a YAML escape instead, the same plan, seen as it is
            body = yaml.safe_dump(plan, sort_keys=False, allow_unicode=False)
        return "\n".join(head) + "\n" + body

    def as_json(self) -> str:
        """The plan as JSON (no comments: the findings are for the caller to show); every
        hidden character escaped, the same plan."""
        if self.plan is None:
            raise ValueError("no plan to write")
        plan = self.plan.model_dump(mode="json", exclude_defaults=True)
        return visible_json(json.dumps(plan, indent=2, ensure_ascii=False)) + "\n"


def backend_for(model: ModelSettings, cat: CatalogueSettings) -> OpenAIBackend:
    if not model.configured:
        raise NoModel(
            "planning needs a model: set OPENAI_BASE_URL (any OpenAI-compatible endpoint) "
            "or OPENAI_API_KEY, and PLANGATE_MODEL"
        )
    return OpenAIBackend.from_settings(model, cat)


async def draft_plan(
    goal: str,
    model: ModelSettings,
    cat: CatalogueSettings,
    world: WorldSettings,
    context: str | None = None,
    backend: OpenAIBackend | None = None,
) -> Draft:
    """Ask the model for a first plan toward ``goal`` over the deployment's catalogue; check it
    (``cat``, and ``world``'s paths and scope); lint it strictly."""
    from plangate.replanner.backends.openai import ModelUnavailable

    if context is not None and len(context.encode()) > MAX_CONTEXT_BYTES:
        raise ValueError(f"the context is over {MAX_CONTEXT_BYTES:,} bytes")
    asked = backend or backend_for(model, cat)
    known = catalogue(cat)
    try:
        answer = await asked.ask(
            first_plan_messages(goal, context, known), goal, Budget().replans_max
        )
    except ModelUnavailable as e:
        raise PlanningUnavailable(f"the model gave no answer: {e}") from None
    finally:
        if backend is None:
            await asked.close()
    if answer.plan is None:
        return Draft(None, reason=answer.reason)
    found = plan_problems(answer.plan, cat, world)
    if found:
        return Draft(None, reason="the model's plan was refused", problems=found)
    findings = lint(answer.plan, known)
    return Draft(answer.plan, reason=answer.reason, findings=findings)
