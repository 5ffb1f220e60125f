"""A model re-planner on any OpenAI-compatible endpoint, with structured output.

One HTTP request per call: the client never retries (``max_retries=0``); Temporal owns retries.
What it does with each kind of answer:

- a plan: returned (not yet validated against the tools; the caller does that);
- output that is not a plan (not JSON, wrong shape) or an explicit "no route": ``plan=None`` with
  the reason, which the caller counts against the budget rather than retrying;
- the endpoint refusing the request (4xx other than 408/409/429): ``plan=None`` with the status,
  since repeating the same request cannot change the answer;
- no answer (connection, timeout, 408/409/429, 5xx): ``ModelUnavailable`` is raised, which the
  activity turns into a retryable failure.

The API key never appears in a reason, an exception or a log line.
"""

from __future__ import annotations

import copy
import json
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import openai
from openai.types.chat import ChatCompletionMessageParam
from openai.types.shared_params import ResponseFormatJSONSchema
from pydantic import ValidationError

from plangate.activities.catalogue import catalogue as deployment_catalogue
from plangate.plans.catalogue import Catalogue
from plangate.plans.model import Budget, Plan
from plangate.plans.words import many
from plangate.records.replan import ReplanProposal, ReplanRequest
from plangate.replanner.prompt import build_messages, compact_schema

if TYPE_CHECKING:
    from plangate.world.settings import CatalogueSettings, ModelSettings

NAME = "openai"
DEFAULT_TIMEOUT_S = 120.0
_RETRYABLE_STATUS = frozenset({408, 409, 429})
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)
_REASON_MAX = 600


class ModelUnavailable(Exception):
    """The endpoint gave no answer this time (network, timeout, 5xx, rate limit). Retryable."""


def plan_schema() -> dict[str, Any]:
    """The schema the model answers in: the plan's steps (goal and budget belong to the run and
    are not the model's to change) and an optional one-sentence reason."""
    full = Plan.model_json_schema()
    defs = {k: v for k, v in full["$defs"].items() if k != "Budget"}
    steps: dict[str, Any] = copy.deepcopy(full["properties"]["steps"])
    steps.pop("minItems", None)  # an empty list says "no route"
    schema = {
        "type": "object",
        "properties": {"steps": steps, "reason": {"type": "string"}},
        "required": ["steps"],
        "additionalProperties": False,
        "$defs": defs,
    }
    result = compact_schema(schema)
    assert isinstance(result, dict)
    return result


class OpenAIBackend:
    name = NAME

    def __init__(
        self,
        *,
        model: str,
        catalogue: Catalogue,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        client: openai.AsyncOpenAI | None = None,
    ) -> None:
        """``catalogue``: the tools and probes the model may use (``from_settings`` gives the
        deployment's)."""
        if client is None and base_url is None and api_key is None:
            raise ValueError("the openai re-planner needs OPENAI_BASE_URL or OPENAI_API_KEY")
        self.model = model
        self._catalogue = catalogue
        self._secret = api_key or ""
        self._endpoint = _endpoint(base_url)
        self._client = client or openai.AsyncOpenAI(
            base_url=base_url,
            # A local OpenAI-compatible server usually takes no key; the client insists on one.
            api_key=api_key or "unused",
            max_retries=0,
            timeout=timeout,
        )
        self._response_format: ResponseFormatJSONSchema = {
            "type": "json_schema",
            "json_schema": {"name": "plan", "schema": plan_schema(), "strict": False},
        }

    @classmethod
    def from_settings(
        cls, model: ModelSettings, catalogue: CatalogueSettings,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> OpenAIBackend:
        return cls(
            model=model.name,
            catalogue=deployment_catalogue(catalogue),
            base_url=model.base_url,
            api_key=model.api_key,
            timeout=timeout,
        )

    def __repr__(self) -> str:
        return f"OpenAIBackend(model={self.model!r}, endpoint={self._endpoint!r})"

    async def close(self) -> None:
        await self._client.close()

    async def propose(self, req: ReplanRequest) -> ReplanProposal:
        return await self.ask(
            build_messages(req, self._catalogue), req.goal, req.budget.replans_max
        )

    async def ask(
        self, messages: list[ChatCompletionMessageParam], goal: str, replans_max: int
    ) -> ReplanProposal:
        """One request for a plan toward ``goal``: the plan (not yet validated against the
        tools) or none with the reason. Raises ``ModelUnavailable`` when there is no answer."""
        try:
            completion = await self._client.chat.completions.create(
                model=self.model,
                messages=messages,
                response_format=self._response_format,
            )
        except openai.APIStatusError as e:
            what = f"{self._endpoint}: HTTP {e.status_code} ({type(e).__name__})"
            if e.status_code >= 500 or e.status_code in _RETRYABLE_STATUS:
                raise ModelUnavailable(self._scrub(what)) from None
            return self._none(f"model endpoint refused the request: {what}: {e.message}")
        except openai.APIConnectionError as e:  # timeouts included
            raise ModelUnavailable(self._scrub(f"{self._endpoint}: {type(e).__name__}")) from None
        except openai.APIError as e:  # a 200 whose body is not a chat completion
            return self._none(f"model endpoint answered with no completion: {e.message}")
        except json.JSONDecodeError:  # a 200 whose body is not JSON (a proxy's page, say)
            return self._none(f"model endpoint {self._endpoint} answered with a body not JSON")

        if not completion.choices:
            return self._none("model answered with no choices")
        choice = completion.choices[0]
        content = choice.message.content
        if not content:
            refusal = getattr(choice.message, "refusal", None)
            why = f"refused: {refusal}" if refusal else f"finish_reason {choice.finish_reason}"
            return self._none(f"model returned no content ({why})")
        usage = ""
        if completion.usage is not None:
            u = completion.usage
            usage = f"; tokens in {u.prompt_tokens}, out {u.completion_tokens}"
        truncated = choice.finish_reason == "length"
        return self._parse(content, goal, replans_max, usage, truncated=truncated)

    def _parse(
        self, content: str, goal: str, replans_max: int, usage: str, truncated: bool
    ) -> ReplanProposal:
        fenced = _FENCE.match(content)
        text = fenced.group(1) if fenced else content
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as e:
            cut = " (output cut at the token limit)" if truncated else ""
            return self._none(f"model output is not a plan: not JSON{cut}: {e}: {text[:120]!r}")
        if not isinstance(raw, dict):
            return self._none(f"model output is not a plan: a JSON {type(raw).__name__}")
        said = raw.get("reason")
        said = said.strip() if isinstance(said, str) else ""
        if raw.get("steps") == []:
            return self._none(f"model found no route: {said or 'no reason given'}")
        # The goal and the budget are the run's: whatever the model wrote there is replaced.
        body = {k: v for k, v in raw.items() if k not in ("goal", "budget", "reason")}
        body["goal"] = goal
        body["budget"] = Budget(replans_max=replans_max).model_dump()
        try:
            plan = Plan.model_validate(body)
        except ValidationError as e:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors()[:5]
            )
            return self._none(f"model output is not a plan: {problems}")
        n = len(plan.steps)
        reason = f"model {self.model}: {many(n, 'step')}{usage}"
        if said:
            reason += f": {said}"
        return ReplanProposal(plan=plan, reason=self._clean(reason), backend=NAME)

    def _none(self, reason: str) -> ReplanProposal:
        return ReplanProposal(plan=None, reason=self._clean(reason), backend=NAME)

    def _clean(self, text: str) -> str:
        text = self._scrub(text)
        return text if len(text) <= _REASON_MAX else text[: _REASON_MAX - 1] + "…"

    def _scrub(self, text: str) -> str:
        """Whatever an endpoint echoes back, the key does not travel on."""
        return text.replace(self._secret, "***") if len(self._secret) >= 4 else text


def _endpoint(base_url: str | None) -> str:
    """Scheme, host and port only: a URL may carry credentials."""
    if not base_url:
        return "api.openai.com"
    parts = urlsplit(base_url)
    host = parts.hostname or "?"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}"
