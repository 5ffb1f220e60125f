"""A guarded activity as an OpenAI Agents SDK agent's tool, on Temporal: what the guard refuses
reaches the agent's model as the tool's answer.

    from plangate.temporal.agents import guarded_tool

    agent = Agent(name="support", tools=[
        guarded_tool(issue_credit, start_to_close_timeout=timedelta(seconds=30))])

``guarded_tool`` is Temporal's ``temporalio.openai_agents.workflow.activity_as_tool`` (the same
options, the same tool schema), except for a ``GuardRefused``: that tool has no failure handler,
so any failed activity fails the agent's workflow and its model never reads why. Here a call the
guard refused (a rejected card, a policy, a failed pre condition, a post condition that failed
on a fresh read after the activity said ok) answers the model with plangate's reason
(``tool_error_text``: its code, the condition and what was seen), for the model's next turn;
every other failure is raised as ``activity_as_tool`` raises it.

A pydantic-ai tool that runs in the workflow (``metadata={"temporal": False}``) and calls the
team's activity does the same itself: ``except GuardRefused as e: raise
ToolFailed(tool_error_text(e))`` (see examples/temporal_team/credits/pydantic_agent.py).

The Agents SDK and Temporal's integration of it (``pip install temporalio-openai-agents``) are
imported when a tool is made, never by ``plangate.temporal``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from plangate.temporal.errors import GuardRefused, tool_error_text

if TYPE_CHECKING:
    from agents import FunctionTool
    from agents.tool_context import ToolContext


def guarded_tool(fn: Callable[..., Any], **activity_options: Any) -> FunctionTool:
    """The activity ``fn`` as an agent's tool (``activity_as_tool(fn, **activity_options)``)
    whose guard refusals are answered to the model as text."""
    from agents import FunctionTool
    from temporalio.openai_agents.workflow import activity_as_tool

    tool = activity_as_tool(fn, **activity_options)
    if not isinstance(tool, FunctionTool):
        raise TypeError(f"activity_as_tool made a {type(tool).__name__}, not a FunctionTool")
    invoke = tool.on_invoke_tool

    async def on_invoke_tool(ctx: ToolContext[Any], input: str) -> Any:
        try:
            return await invoke(ctx, input)
        except GuardRefused as e:
            return tool_error_text(e)

    tool.on_invoke_tool = on_invoke_tool
    return tool

