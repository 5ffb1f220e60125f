"""An agent hands its plan over to plangate and reads the run report.

The agent is a chat loop on the ``openai`` client. It offers the model one tool, ``run_plan``,
whose parameters are a plangate plan. When the model calls it, the agent does not act itself:
it submits the plan (``Plangate.start``), waits for the run to end (``Plangate.result``) and
hands the run report back to the model as the tool's result, for its next answer. A plan
plangate refuses comes back the same way, as the problems it names, for the model to fix.

    python examples/agent_handover.py "take ticket T-1 in hand"

with the model's endpoint in ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` (``PLANGATE_MODEL``) and
the plangate deployment's environment (``plangate dev`` prints it).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from openai import AsyncOpenAI
from openai.types.chat import (
    ChatCompletionAssistantMessageParam,
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionMessageParam,
    ChatCompletionToolParam,
)

from plangate import PlanError, Plangate

MAX_TURNS = 8

_CONDITION = {
    "type": "object",
    "description": 'a probe and its arguments, flat: {"probe": "object_exists", "bucket": ...}',
    "properties": {"probe": {"type": "string"}},
    "required": ["probe"],
}
PLAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "goal": {"type": "string"},
        "budget": {"type": "object", "properties": {"replans_max": {"type": "integer"}}},
        "steps": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "n": {"type": "integer", "minimum": 1},
                    "tool": {"type": "string"},
                    "effect": {"enum": ["read", "write", "external", "money"]},
                    "args": {"type": "object"},
                    "depends_on": {"type": "array", "items": {"type": "integer"}},
                    "binds": {"type": "object", "additionalProperties": {"type": "string"},
                              "description": 'names for values of the result: {"etag": "$.etag"}'},
                    "pre": {"type": "array", "items": _CONDITION},
                    "post": {"type": "array", "items": _CONDITION},
                },
                "required": ["n", "tool", "args"],
            },
        },
    },
    "required": ["goal", "steps"],
}
RUN_PLAN: ChatCompletionToolParam = {
    "type": "function",
    "function": {
        "name": "run_plan",
        "description": (
            "Run a plan of tool calls through plangate, which checks the world before and after "
            "every step and stops a step that would act on a world that moved. Answers with the "
            "run report (status, each step's state and checks, the failure), or with the "
            "problems of a plan it refused."
        ),
        "parameters": PLAN_SCHEMA,
    },
}
SYSTEM = (
    "You reach goals by writing plans and handing them to run_plan; you never act otherwise. "
    "Use the deployment's tools and probes; a plan naming others is refused with the reason, "
    "which you may fix. When the report is in, answer the user in one or two sentences."
)


@dataclass
class Handover:
    answer: str  # the model's last message
    runs: list[str] = field(default_factory=list)  # the run ids, in order
    messages: list[ChatCompletionMessageParam] = field(default_factory=list)


async def run_plan(pg: Plangate, arguments: str) -> tuple[str | None, str]:
    """The tool itself: (the run id, the run report as JSON), or (None, the refusal)."""
    try:
        plan = json.loads(arguments)
        if not isinstance(plan, dict):
            raise PlanError(["the arguments must be a plan: an object with goal and steps"])
        run_id = await pg.start(plan)
    except json.JSONDecodeError as e:
        return None, json.dumps({"refused": [f"the arguments are not JSON: {e}"]})
    except PlanError as e:
        return None, json.dumps({"refused": e.problems})
    report = await pg.result(run_id)  # waits for the run to end
    return run_id, report.model_dump_json()


async def hand_over(goal: str, llm: AsyncOpenAI, pg: Plangate, *, model: str) -> Handover:
    """Talk with the model until it answers without calling ``run_plan``."""
    done = Handover(answer="", messages=[
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": goal},
    ])
    for _ in range(MAX_TURNS):
        completion = await llm.chat.completions.create(
            model=model, messages=done.messages, tools=[RUN_PLAN]
        )
        message = completion.choices[0].message
        calls = [c for c in message.tool_calls or []
                 if isinstance(c, ChatCompletionMessageFunctionToolCall)]
        said: ChatCompletionAssistantMessageParam = {
            "role": "assistant", "content": message.content
        }
        if not calls:
            done.messages.append(said)
            done.answer = message.content or ""
            return done
        said["tool_calls"] = [
            {"id": c.id, "type": "function",
             "function": {"name": c.function.name, "arguments": c.function.arguments}}
            for c in calls
        ]
        done.messages.append(said)
        for c in calls:
            if c.function.name == "run_plan":
                run_id, result = await run_plan(pg, c.function.arguments)
                done.runs += [run_id] if run_id else []
            else:
                result = json.dumps({"error": f"no tool {c.function.name}; use run_plan"})
            done.messages.append({"role": "tool", "tool_call_id": c.id, "content": result})
    raise RuntimeError(f"no answer from the model after {MAX_TURNS} turns")


async def main(goal: str) -> int:
    pg = await Plangate.connect()  # the deployment's settings, from the environment
    async with AsyncOpenAI() as llm:  # OPENAI_BASE_URL, OPENAI_API_KEY
        model = os.environ.get("PLANGATE_MODEL") or "gpt-4o-mini"
        done = await hand_over(goal, llm, pg, model=model)
    print(done.answer)
    return 0


if __name__ == "__main__":
    code = asyncio.run(main(" ".join(sys.argv[1:]) or "take ticket T-1 in hand"))
    sys.stdout.flush()
    # as the plangate command does: no interpreter teardown with a Temporal client in the
    # process (temporalio/sdk-python issue 300)
    os._exit(code)
