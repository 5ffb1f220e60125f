"""The team's support agent on the OpenAI Agents SDK, run durably by Temporal's integration
(``temporalio.openai_agents``: ``pip install temporalio-openai-agents``). Its tools are the team's
own activities, as Temporal's ``activity_as_tool`` makes them, through plangate's
``guarded_tool``: the same tools, whose guard refusals the model reads.

The client carries ``OpenAIAgentsPlugin`` (the model's calls are activities), the worker
plangate's plugin and the guard table::

    client = await Client.connect(address, plugins=[OpenAIAgentsPlugin()])
    worker = Worker(client, task_queue="support", workflows=[AgentsSdkSupportWorkflow],
                    activities=[issue_credit, find_credit, load_export],
                    plugins=[PlangatePlugin("guards.yaml", principal="support-agent")])

A credit the model asks for waits for a person's approval of its card (it names the arguments
the model chose); an export that answers ok and wrote nothing is caught by its post condition,
and the model's next turn reads why.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

# the Agents SDK, plangate and the team's activities (boto3, psycopg) are not loaded in the
# sandbox (a worker without plangate's plugin then loads this module too, and is refused at
# the call)
with workflow.unsafe.imports_passed_through():
    from agents import Agent, Runner

    from credits.activities import issue_credit, load_export
    from plangate.temporal.agents import guarded_tool

INSTRUCTIONS = (
    "You help the support team: credit a customer's account when asked (a person approves "
    "each credit), and load exports. Say what each tool answered.")


@workflow.defn
class AgentsSdkSupportWorkflow:
    @workflow.run
    async def run(self, request: str) -> str:
        options = {"start_to_close_timeout": timedelta(seconds=30),
                   "retry_policy": RetryPolicy(maximum_attempts=3)}
        agent: Agent[None] = Agent(
            name="support", instructions=INSTRUCTIONS,
            tools=[guarded_tool(issue_credit, **options), guarded_tool(load_export, **options)],
        )
        result = await Runner.run(agent, request)
        return str(result.final_output)
