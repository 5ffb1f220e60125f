"""The workflow that runs the refund graph for one customer request."""

from __future__ import annotations

from temporalio import workflow

# LangGraph's plugin passes langgraph and langchain_core through the sandbox, plangate's passes
# plangate; the team's modules (psycopg) are passed through here
with workflow.unsafe.imports_passed_through():
    from langchain_core.messages import HumanMessage, messages_to_dict
    from temporalio.langgraph import graph

    from refunds.graph import NAME


@workflow.defn
class RefundAgentWorkflow:
    @workflow.run
    async def run(self, request: str) -> str:
        app = graph(NAME).compile()
        out = await app.ainvoke({"messages": messages_to_dict([HumanMessage(request)])})
        return str(out["messages"][-1]["data"]["content"])
