"""The refund agent as a LangGraph graph: ``agent`` (the model, a Temporal activity that
``temporalio-langgraph`` makes of the node) and ``tools`` (run in the workflow), in a loop
until the model answers in text.

The ``tools`` node calls the team's activity ``issue_refund`` with the arguments the model
chose, so plangate's guard table names it as any activity of the team's: its card shows those
arguments, and a refusal of the guard (a rejected card, a policy, a check) goes back to the
model as the tool's answer (``tool_error_text``), for its next turn. A node that ran the refund
itself as the graph's activity would be named ``refunds.tools`` and take the whole graph state
as its one argument: a card could only show that.

The model is OpenAI's API through ``langchain-openai``: ``OPENAI_API_KEY``, ``OPENAI_BASE_URL``
(any OpenAI-compatible endpoint) and ``TEAM_MODEL`` (default ``gpt-5.2``) are read where the
``agent`` activity runs. The state holds messages as ``langchain_core`` dicts, which cross the
activity boundary as JSON.
"""

from __future__ import annotations

import operator
import os
from datetime import timedelta
from typing import Annotated, Any, TypedDict

from langchain_core.messages import (
    AIMessage,
    ToolMessage,
    messages_from_dict,
    messages_to_dict,
)
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import END, START, StateGraph
from pydantic import ValidationError
from temporalio import workflow
from temporalio.common import RetryPolicy

from plangate.temporal import GuardRefused, tool_error_text
from refunds.activities import RefundRequest, issue_refund

NAME = "refunds"  # the graph's name in LangGraphPlugin(graphs=...) and its activities' prefix
INSTRUCTIONS = ("You help the support team: refund a customer's order when asked (a person "
                "approves each refund). Say what the tool answered.")
REFUND_TOOL = {"type": "function", "function": {
    **convert_to_openai_tool(RefundRequest)["function"], "name": "issue_refund"}}


class State(TypedDict):
    messages: Annotated[list[dict[str, Any]], operator.add]


async def agent(state: State) -> dict[str, Any]:
    """The model's next turn (an activity: it reaches the model's API)."""
    from langchain_openai import ChatOpenAI  # loaded where the activity runs, never in the sandbox

    model = ChatOpenAI(model=os.environ.get("TEAM_MODEL", "gpt-5.2"), max_retries=0)
    said = await model.bind_tools([REFUND_TOOL]).ainvoke(
        [("system", INSTRUCTIONS), *messages_from_dict(state["messages"])])
    return {"messages": messages_to_dict([said])}


async def tools(state: State) -> dict[str, Any]:
    """The model's tool calls, each the team's activity (in the workflow: plangate guards it)."""
    (asked,) = messages_from_dict(state["messages"][-1:])
    assert isinstance(asked, AIMessage)
    answers = []
    for call in asked.tool_calls:
        try:
            req = RefundRequest.model_validate(call["args"])
        except ValidationError as e:  # the model's to correct: a failure here would stall the run
            answers.append(ToolMessage(f"bad arguments: {_errors(e)}", tool_call_id=call["id"]))
            continue
        try:
            refund = await workflow.execute_activity(
                issue_refund, req,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=RetryPolicy(maximum_attempts=3))
            said = (f"refunded {refund.amount_cents} cents of order {refund.order_id} "
                    f"(refund {refund.refund_id})")
        except GuardRefused as e:  # the team's own failures fail the run, as without the guard
            said = tool_error_text(e)
        answers.append(ToolMessage(said, tool_call_id=call["id"]))
    return {"messages": messages_to_dict(answers)}


def _errors(e: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
                     for err in e.errors())


async def next_node(state: State) -> str:
    """To ``tools`` while the model asks for a call, else the end (async: no thread pool in the
    workflow)."""
    return "tools" if state["messages"][-1]["data"].get("tool_calls") else END


def build() -> StateGraph[State, Any, Any, Any]:
    """A fresh graph (``LangGraphPlugin`` wraps the nodes of the one it is given)."""
    g: StateGraph[State, Any, Any, Any] = StateGraph(State)
    g.add_node("agent", agent, metadata={
        "execute_in": "activity", "start_to_close_timeout": timedelta(seconds=60),
        "retry_policy": RetryPolicy(maximum_attempts=3)})
    g.add_node("tools", tools, metadata={"execute_in": "workflow"})
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", next_node, ["tools", END])
    g.add_edge("tools", "agent")
    return g
