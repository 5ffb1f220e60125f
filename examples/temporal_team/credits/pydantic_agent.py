"""The team's support agent on pydantic-ai, run durably on Temporal
(``pydantic_ai.durable_exec.temporal``: the ``TemporalDurability`` capability). Its tools run in
the workflow (``metadata={"temporal": False}``) and call the team's own activities, which
plangate guards; a call the guard refused answers the model with plangate's reason
(``ToolFailed(tool_error_text(e))``: the model reads it on its next request and adapts,
without asking for the same call again).

The client carries ``PydanticAIPlugin`` (the model's requests are activities), the worker
plangate's plugin and the guard table::

    client = await Client.connect(address, plugins=[PydanticAIPlugin()])
    worker = Worker(client, task_queue="support", workflows=[PydanticAISupportWorkflow],
                    activities=[issue_credit, find_credit, load_export],
                    plugins=[PlangatePlugin("guards.yaml", principal="support-agent")])
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

# pydantic-ai, plangate and the team's activities (boto3, psycopg) are not loaded in the
# sandbox (a worker without plangate's plugin then loads this module too)
with workflow.unsafe.imports_passed_through():
    from pydantic_ai import Agent, FunctionToolset
    from pydantic_ai.durable_exec.temporal import TemporalDurability
    from pydantic_ai.exceptions import ToolFailed
    from pydantic_ai.models import Model

    from credits import activities
    from plangate.temporal import GuardRefused, tool_error_text

MODEL = "openai-chat:gpt-5.2"  # chat completions: any OpenAI-compatible endpoint (OPENAI_BASE_URL)
INSTRUCTIONS = (
    "You help the support team: credit a customer's account when asked (a person approves "
    "each credit), and load exports. Say what each tool answered.")
TIMEOUT = timedelta(seconds=30)
RETRY = RetryPolicy(maximum_attempts=3)


async def issue_credit(account_id: str, amount_cents: int, reason: str) -> str:
    """Credit a customer's account, in cents. A person approves each credit first."""
    req = activities.CreditRequest(account_id=account_id, amount_cents=amount_cents,
                                   reason=reason)
    try:
        credit = await workflow.execute_activity(activities.issue_credit, req,
                                                 start_to_close_timeout=TIMEOUT,
                                                 retry_policy=RETRY)
    except GuardRefused as e:
        raise ToolFailed(tool_error_text(e)) from e
    return (f"credited {credit.amount_cents} cents to {credit.account_id} "
            f"(credit {credit.credit_id})")


async def load_export(bucket: str, key: str, rows: int) -> str:
    """Load an export of ``rows`` rows into the object ``key`` of ``bucket``."""
    req = activities.ExportRequest(bucket=bucket, key=key, rows=rows)
    try:
        said = await workflow.execute_activity(activities.load_export, req,
                                               start_to_close_timeout=TIMEOUT,
                                               retry_policy=RETRY)
    except GuardRefused as e:
        raise ToolFailed(tool_error_text(e)) from e
    return f"export loaded into s3://{bucket}/{key}: {said}"


def support_agent(model: Model | str, *, name: str = "support") -> Agent[None, str]:
    """The support agent on ``model``; ``name`` names its Temporal activities."""
    # "temporal": False runs the tools in the workflow, where they call the team's activities
    tools: FunctionToolset[None] = FunctionToolset(
        [issue_credit, load_export], metadata={"temporal": False}, id="credits")
    return Agent(model, name=name, instructions=INSTRUCTIONS, toolsets=[tools],
                 capabilities=[TemporalDurability(activity_config={
                     "start_to_close_timeout": timedelta(seconds=60)})])


agent = support_agent(MODEL)


@workflow.defn
class PydanticAISupportWorkflow:
    __pydantic_ai_agents__ = (agent,)

    @workflow.run
    async def run(self, request: str) -> str:
        result = await agent.run(request)
        return result.output
