"""Scripted models for the team's agents on Temporal (tests/test_temporal_agents.py), with no
network: each answers its script in turn and keeps what it was given, call by call. The models
run in the agents' model activities, in the test's process.

Imported by the workflow sandbox (it holds the pydantic-ai workflow): nothing here reads the
world at import, and the example's modules (``credits``, on the path the test sets) pass
through."""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    from agents import ModelResponse as AgentsResponse
    from agents import ModelSettings, Tool
    from agents.agent_output import AgentOutputSchemaBase
    from agents.handoffs import Handoff
    from agents.items import TResponseInputItem
    from agents.models.interface import ModelTracing
    from credits.pydantic_agent import issue_credit, load_export, support_agent
    from pydantic_ai import Agent, FunctionToolset
    from pydantic_ai.messages import ModelMessage, ModelResponse
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    with warnings.catch_warnings():  # deprecated in pydantic-ai 2.x, for TemporalDurability
        warnings.simplefilter("ignore", DeprecationWarning)
        from pydantic_ai.durable_exec.temporal import TemporalAgent
    from temporalio.openai_agents.testing import TestModel


class ScriptedAgentsModel(TestModel):
    """An Agents SDK model answering ``replies`` in turn; ``inputs``: the input of each call."""

    __test__ = False

    def __init__(self, replies: list[AgentsResponse]) -> None:
        self.replies = list(replies)
        self.inputs: list[str | list[TResponseInputItem]] = []
        super().__init__(self._next)

    def _next(self) -> AgentsResponse:
        return self.replies[len(self.inputs) - 1]

    async def get_response(
        self, system_instructions: str | None, input: str | list[TResponseInputItem],
        model_settings: ModelSettings, tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None, handoffs: list[Handoff],
        tracing: ModelTracing, **kwargs: Any,
    ) -> AgentsResponse:
        self.inputs.append(copy.deepcopy(input))
        return await super().get_response(system_instructions, input, model_settings, tools,
                                          output_schema, handoffs, tracing, **kwargs)


@dataclass
class Script:
    """A pydantic-ai run's model: ``replies`` in turn; ``seen``: the messages of each request."""

    replies: list[ModelResponse]
    seen: list[list[ModelMessage]] = field(default_factory=list)


SCRIPTS: dict[str, Script] = {}  # by the workflow id of the run the model answers


async def _scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    script = SCRIPTS[activity.info().workflow_id or ""]  # the model request is an activity
    script.seen.append(copy.deepcopy(messages))
    return script.replies[len(script.seen) - 1]


# the example's agent (its tools, its durability) on the scripted model
scripted_agent = support_agent(FunctionModel(_scripted), name="scripted_support")


@workflow.defn
class ScriptedPydanticAISupportWorkflow:
    __pydantic_ai_agents__ = (scripted_agent,)

    @workflow.run
    async def run(self, request: str) -> str:
        result = await scripted_agent.run(request)
        return result.output


# the example's tools, as the older ``TemporalAgent`` wrapper runs them (pydantic-ai 2.x deprecates
# it for ``TemporalDurability``; a team on it writes the tools the same way)
with warnings.catch_warnings():  # PydanticAIDeprecationWarning: the point here
    warnings.simplefilter("ignore")
    legacy_agent = TemporalAgent(
        Agent(FunctionModel(_scripted), name="scripted_legacy", toolsets=[FunctionToolset(
            [issue_credit, load_export], metadata={"temporal": False}, id="credits")]),
        activity_config={"start_to_close_timeout": timedelta(seconds=60)})


@workflow.defn
class ScriptedTemporalAgentWorkflow:
    __pydantic_ai_agents__ = (legacy_agent,)

    @workflow.run
    async def run(self, request: str) -> str:
        result = await legacy_agent.run(request)
        return result.output
