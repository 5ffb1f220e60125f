"""Re-planner backends: the model backend against a local OpenAI-compatible server, the playbook
on the chapter's close-out (acct_3319f, customer.update refused with record_archived), and the
activity that puts them together."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from plangate.activities.catalogue import catalogue
from plangate.plans.model import Condition, Effect, OnUnmet, Plan, Step
from plangate.records.interface import PROPOSE_ACTIVITY
from plangate.records.replan import ReplanBudget, ReplanRequest
from plangate.records.report import CompletedStep, FailureRecord, StepState
from plangate.replanner.activity import ReplanActivities
from plangate.replanner.backends import FirstLine, PlaybookBackend, backend_for
from plangate.replanner.backends.openai import ModelUnavailable, OpenAIBackend, plan_schema
from plangate.replanner.backends.playbook import splice
from plangate.replanner.prompt import build_messages
from plangate.testing import FakeOpenAI, Reply
from plangate.world.settings import CatalogueSettings, ModelSettings
from tests.harness import DEMO_CATALOGUE

KEY = "sk-test-4f1c9e2b7a0d-SECRET"
CATALOGUE = catalogue(DEMO_CATALOGUE)  # what the model is offered
GOAL = (
    "close out acct_3319f: void open invoices, close the customer record, cancel at period end, "
    "credit the unused balance, notify the billing contact"
)
BINDS: dict[str, Any] = {
    "invoice_id": "in_88a2",
    "sub_id": "sub_71c2",
    "billing_contact": "ar@northwind-old.example",
    "amount_eur": 612.40,
}


def closeout_request(code: str = "record_archived", replans_used: int = 0) -> ReplanRequest:
    return ReplanRequest(
        goal=GOAL,
        completed=[
            CompletedStep(
                n=1, tool="billing.list_invoices", plan_version=1, state=StepState.DONE,
                effect=Effect.READ, args={"account_id": "acct_3319f"}, binds=BINDS,
                result={"invoices": [{"id": "in_88a2", "status": "draft", "amount_eur": 612.40}]},
            ),
            CompletedStep(
                n=2, tool="billing.void_invoice", plan_version=1, state=StepState.DONE,
                effect=Effect.WRITE, args={"invoice_id": "in_88a2"}, result={"status": "void"},
            ),
        ],
        failure=FailureRecord(
            step=3, tool="customer.update", plan_version=1, code=code, status=409,
            retryable=False, detail='{"archived_at": "2026-03-12T02:14:07Z"}',
        ),
        remaining=[
            Step.model_validate(s)
            for s in [
                {"n": 3, "tool": "customer.update", "depends_on": [2],
                 "args": {"account_id": "acct_3319f", "status": "closed",
                          "billing_contact": "ar@northwind.example"},
                 "post": {"probe": "field_equals", "path": "$.status", "value": "closed"}},
                {"n": 4, "tool": "billing.cancel_subscription", "depends_on": [1],
                 "args": {"sub_id": "${sub_id}", "at": "period_end"}},
                {"n": 5, "tool": "billing.issue_credit", "effect": "money", "depends_on": [1],
                 "args": {"account_id": "acct_3319f", "amount_eur": "${amount_eur}"}},
                {"n": 6, "tool": "email.send", "effect": "external", "depends_on": [1],
                 "args": {"to": "ar@northwind.example", "template": "account_closed"}},
            ]
        ],
        budget=ReplanBudget(replans_used=replans_used, replans_max=2),
        bound=BINDS,
    )


# The chapter's answer: the completed work is done, the obstacle is routed around.
GOOD_PLAN = {"steps": [
    {"n": 1, "tool": "customer.restore", "args": {"account_id": "acct_3319f"},
     "post": {"probe": "field_equals", "path": "$.archived", "value": False},
     "on_unmet": "halt"},
    {"n": 2, "tool": "customer.update", "depends_on": [1],
     "args": {"account_id": "acct_3319f", "status": "closed",
              "billing_contact": "ar@northwind.example"},
     "post": {"probe": "field_equals", "path": "$.status", "value": "closed"},
     "on_unmet": "replan"},
    {"n": 3, "tool": "billing.cancel_subscription", "depends_on": [2],
     "args": {"sub_id": "sub_71c2"},
     "post": {"probe": "field_equals", "path": "$.status", "value": "pending_cancellation"},
     "on_unmet": "replan"},
    {"n": 4, "tool": "billing.issue_credit", "depends_on": [3],
     "args": {"account_id": "acct_3319f", "amount_eur": "${amount_eur}"},
     "post": {"probe": "field_not_equals", "path": "$.applied_to", "value": "suspense"},
     "on_unmet": "halt"},
    {"n": 5, "tool": "email.send", "depends_on": [4],
     "args": {"to": "ar@northwind.example", "template": "account_closed"},
     "post": {"probe": "field_present", "path": "$.message_id"}, "on_unmet": "retry"},
], "reason": "restore the archived record, then close out as planned"}


@pytest_asyncio.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    with FakeOpenAI(model="fake-planner") as f:
        yield f


@pytest_asyncio.fixture
async def backend(fake: FakeOpenAI) -> AsyncIterator[OpenAIBackend]:
    b = OpenAIBackend(model="fake-planner", catalogue=CATALOGUE, base_url=fake.base_url,
                      api_key=KEY, timeout=5)
    yield b
    await b.close()


def user_payload(fake: FakeOpenAI, i: int = 0) -> Any:
    messages = fake.completions[i].messages
    assert [m["role"] for m in messages] == ["system", "user"]
    return json.loads(messages[1]["content"])


# -- the model backend --------------------------------------------------------------------------


async def test_request_carries_completed_work_failure_remainder_and_budget(fake, backend):
    fake.add(json.dumps(GOOD_PLAN))
    await backend.propose(closeout_request(replans_used=1))

    [sent] = fake.completions
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.body["model"] == "fake-planner"
    fmt = sent.body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "plan"
    assert fmt["json_schema"]["strict"] is False
    assert fmt["json_schema"]["schema"] == plan_schema()

    payload = user_payload(fake)
    assert payload["goal"] == GOAL
    done = {c["n"]: c for c in payload["completed"]}
    assert done[1]["tool"] == "billing.list_invoices"
    assert done[1]["binds"] == BINDS  # what the new plan may reuse instead of re-reading
    assert done[2]["tool"] == "billing.void_invoice"
    assert done[2]["result"] == {"status": "void"}  # so no plan voids in_88a2 again
    assert payload["failure"]["step"] == 3
    assert payload["failure"]["code"] == "record_archived"
    assert payload["failure"]["status"] == 409
    assert payload["failure"]["retryable"] is False
    assert [s["n"] for s in payload["remaining"]] == [3, 4, 5, 6]
    assert payload["remaining"][1]["args"]["sub_id"] == "${sub_id}"
    # conditions are written flat, as plans write them
    assert payload["remaining"][0]["post"] == [
        {"probe": "field_equals", "path": "$.status", "value": "closed"}
    ]
    assert payload["budget"] == {"replans_used": 1, "replans_max": 2}
    assert payload["bound"]["sub_id"] == "sub_71c2"

    system = sent.messages[0]["content"]
    assert "never repeat them" in system.lower()
    catalogue = json.loads(system.split("Catalogue:\n", 1)[1])
    assert {"field_equals", "field_not_equals", "field_present"} <= {
        p["name"] for p in catalogue["probes"]
    }
    # every tool of the table in docs/tools.md is offered to the model
    assert {
        "s3.get", "s3.put", "warehouse.load", "warehouse.run_sql", "billing.list_invoices",
        "billing.void_invoice", "customer.update", "customer.restore",
        "billing.cancel_subscription", "billing.issue_credit", "email.send",
    } <= {t["name"] for t in catalogue["tools"]}
    tool = catalogue["tools"][0]
    assert set(tool) == {"name", "effect", "args", "field_probes"}
    assert tool["args"]["type"] == "object" and "title" not in tool["args"]


async def test_a_good_plan_comes_back_parsed(fake, backend):
    answer = {**GOOD_PLAN, "goal": "something else", "budget": {"replans_max": 10}}
    fake.add(json.dumps(answer))
    proposal = await backend.propose(closeout_request())

    assert proposal.backend == "openai"
    plan = proposal.plan
    assert isinstance(plan, Plan)
    assert plan.goal == GOAL  # the run's goal and budget, not the model's
    assert plan.budget.replans_max == 2
    assert [s.tool for s in plan.steps] == [
        "customer.restore", "customer.update", "billing.cancel_subscription",
        "billing.issue_credit", "email.send",
    ]
    assert "billing.void_invoice" not in [s.tool for s in plan.steps]
    restore = plan.step(1)
    assert restore.post == [
        Condition(probe="field_equals", args={"path": "$.archived", "value": False})
    ]
    assert restore.on_unmet is OnUnmet.HALT
    assert plan.step(4).post[0].probe == "field_not_equals"
    assert "5 steps" in proposal.reason
    assert "tokens in 3400" in proposal.reason
    assert "restore the archived record" in proposal.reason


async def test_a_fenced_json_answer_is_read(fake, backend):
    fake.add("```json\n" + json.dumps(GOOD_PLAN) + "\n```")
    proposal = await backend.propose(closeout_request())
    assert proposal.plan is not None and len(proposal.plan.steps) == 5


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("I would restore the record first, then close the account.", "not JSON"),
        ('{"steps": [{"n": 1, "tool": "customer.rest', "not JSON"),
        ("[1, 2, 3]", "a JSON list"),
        ('{"steps": [{"tool": "customer.restore"}]}', "steps.0.n"),
        ('{"steps": [{"n": 1, "tool": "x", "on_unmet": "shrug"}]}', "on_unmet"),
        ('{"plan": "restore"}', "steps"),
    ],
)
async def test_output_that_is_not_a_plan_is_no_plan_with_a_reason(fake, backend, content, why):
    fake.add(content)
    proposal = await backend.propose(closeout_request())
    assert proposal.plan is None
    assert proposal.backend == "openai"
    assert proposal.reason.startswith("model output is not a plan")
    assert why in proposal.reason
    assert len(fake.completions) == 1


async def test_no_content_and_no_route_are_no_plan(fake, backend):
    fake.add(
        Reply(content=None, finish_reason="length"),
        json.dumps({"steps": [], "reason": "the record cannot be restored"}),
    )
    cut = await backend.propose(closeout_request())
    assert cut.plan is None and "no content" in cut.reason and "length" in cut.reason
    none = await backend.propose(closeout_request())
    assert none.plan is None
    assert none.reason == "model found no route: the record cannot be restored"


@pytest.mark.parametrize("status", [500, 502, 503, 429])
async def test_no_answer_raises_after_exactly_one_request(fake, backend, status):
    fake.add(status)
    with pytest.raises(ModelUnavailable, match=f"HTTP {status}"):
        await backend.propose(closeout_request())
    assert len(fake.completions) == 1  # no client-side retries: Temporal owns them


async def test_one_http_request_per_call(fake, backend):
    fake.add(500, json.dumps(GOOD_PLAN), "not a plan")
    with pytest.raises(ModelUnavailable):
        await backend.propose(closeout_request())
    assert len(fake.completions) == 1
    assert (await backend.propose(closeout_request())).plan is not None
    assert len(fake.completions) == 2
    assert (await backend.propose(closeout_request())).plan is None
    assert len(fake.completions) == 3
    assert fake.remaining == 0


async def test_a_timeout_raises_after_one_request(fake):
    b = OpenAIBackend(model="m", catalogue=CATALOGUE, base_url=fake.base_url, api_key=KEY,
                      timeout=0.3)
    try:
        fake.add(Reply(content=json.dumps(GOOD_PLAN), delay_s=1.5))
        with pytest.raises(ModelUnavailable):
            await b.propose(closeout_request())
        assert len(fake.completions) == 1
    finally:
        await b.close()


async def test_unreachable_endpoint_raises(fake):
    port = fake.port
    fake.stop()
    b = OpenAIBackend(model="m", catalogue=CATALOGUE, base_url=f"http://127.0.0.1:{port}/v1",
                      api_key=KEY, timeout=2)
    try:
        with pytest.raises(ModelUnavailable, match="APIConnectionError"):
            await b.propose(closeout_request())
    finally:
        await b.close()


async def test_a_refused_request_is_no_plan_and_the_key_never_travels(fake, backend):
    echo = {"error": {"message": f"Incorrect API key provided: {KEY}",
                      "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}}
    fake.add(Reply(status=401, body=echo), Reply(status=500, body=echo))
    refused = await backend.propose(closeout_request())
    assert refused.plan is None
    assert "HTTP 401" in refused.reason
    assert KEY not in refused.reason and "***" in refused.reason

    with pytest.raises(ModelUnavailable) as raised:
        await backend.propose(closeout_request())
    assert KEY not in str(raised.value)
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
    assert KEY not in repr(backend)


async def test_a_body_that_is_not_json_is_no_plan(fake, backend):
    fake.add(Reply(body=b"<html>gateway</html>"))
    proposal = await backend.propose(closeout_request())
    assert proposal.plan is None and "not JSON" in proposal.reason


def test_the_openai_backend_needs_an_endpoint_or_a_key():
    with pytest.raises(ValueError, match="OPENAI_BASE_URL or OPENAI_API_KEY"):
        OpenAIBackend(model="m", catalogue=CATALOGUE)


def test_messages_are_a_system_and_a_user_message():
    system, user = build_messages(closeout_request(), CATALOGUE)
    assert system["role"] == "system" and user["role"] == "user"
    assert isinstance(user["content"], str)
    assert json.loads(user["content"])["failure"]["tool"] == "customer.update"


# -- the playbook -------------------------------------------------------------------------------


async def test_record_archived_restores_then_runs_the_remainder():
    req = closeout_request()
    proposal = await PlaybookBackend().propose(req)

    assert proposal.backend == "playbook"
    plan = proposal.plan
    assert plan is not None
    assert plan.goal == GOAL and plan.budget.replans_max == 2
    assert [(s.n, s.tool, s.depends_on) for s in plan.steps] == [
        (1, "customer.restore", []),
        (2, "customer.update", [1]),
        (3, "billing.cancel_subscription", [2]),
        (4, "billing.issue_credit", [3]),
        (5, "email.send", [4]),
    ]
    restore = plan.step(1)
    assert restore.args == {"account_id": "acct_3319f"}
    assert restore.post == [
        Condition(probe="field_equals", args={"path": "$.archived", "value": False})
    ]
    assert restore.on_unmet is OnUnmet.HALT
    # the failed step comes back as it was, renumbered; the completed ones never do
    assert plan.step(2).args == req.remaining[0].args
    assert plan.step(2).post == req.remaining[0].post
    assert {"billing.list_invoices", "billing.void_invoice"}.isdisjoint(
        s.tool for s in plan.steps
    )
    # references to what earlier versions bound are kept; `bound` carries the values
    assert plan.step(3).args["sub_id"] == "${sub_id}"
    assert plan.step(4).args["amount_eur"] == "${amount_eur}"
    assert plan.step(4).effect.value == "money"
    assert plan.model_dump(mode="json")["steps"][0]["post"] == [
        {"probe": "field_equals", "path": "$.archived", "value": False}
    ]
    assert "customer.restore" in proposal.reason


async def test_no_recipe_is_no_plan_with_the_reason():
    proposal = await PlaybookBackend().propose(closeout_request(code="rate_limited"))
    assert proposal.plan is None
    assert proposal.reason == "no playbook recipe for rate_limited"
    assert proposal.backend == "playbook"


async def test_a_recipe_that_cannot_apply_is_no_plan():
    req = closeout_request()
    no_account = req.model_copy(update={"remaining": [
        req.remaining[0].model_copy(update={"args": {"status": "closed"}}), *req.remaining[1:]
    ]})
    proposal = await PlaybookBackend().propose(no_account)
    assert proposal.plan is None
    assert "account_id" in proposal.reason

    gone = req.model_copy(update={"remaining": req.remaining[1:]})
    proposal = await PlaybookBackend().propose(gone)
    assert proposal.plan is None and "not among the remaining" in proposal.reason


def test_splice_remaps_dependencies_and_respects_their_order():
    fix = [Step(n=1, tool="fix")]
    remaining = [
        Step(n=7, tool="a", depends_on=[2]),  # 2 was completed: dropped
        Step(n=8, tool="b", depends_on=[9]),  # written before the step it depends on
        Step(n=9, tool="c", binds={"x": "$.x"}),
        Step(n=10, tool="d", depends_on=[7, 9], args={"x": "${x}"}),
    ]
    steps = splice(fix, remaining, failed=7)
    assert [(s.n, s.tool, s.depends_on) for s in steps] == [
        (1, "fix", []),
        (2, "a", [1]),
        (3, "c", [2]),
        (4, "b", [3]),
        (5, "d", [2, 3, 4]),
    ]
    assert steps[4].args == {"x": "${x}"}


def test_splice_puts_the_failed_step_first():
    remaining = [Step(n=4, tool="later"), Step(n=5, tool="failed")]
    steps = splice([Step(n=1, tool="fix")], remaining, failed=5)
    assert [s.tool for s in steps] == ["fix", "failed", "later"]


# -- choosing a backend, and the activity -------------------------------------------------------


def test_backend_for_the_settings(fake):
    core = CatalogueSettings()
    assert isinstance(backend_for(ModelSettings(replanner="playbook"), core), PlaybookBackend)
    chosen = backend_for(ModelSettings(replanner="openai", base_url=fake.base_url), core)
    assert isinstance(chosen, FirstLine)
    # the playbook first, then the model
    assert [type(b) for b in chosen.backends] == [PlaybookBackend, OpenAIBackend]
    assert chosen.name == "playbook+openai"


def _settings(fake: FakeOpenAI, replanner: str = "openai") -> ModelSettings:
    return ModelSettings(
        replanner=replanner,  # type: ignore[arg-type]
        base_url=fake.base_url, api_key=KEY, name="fake-planner",
    )


async def test_activity_playbook_only_never_calls_a_model(fake):
    acts = ReplanActivities(_settings(fake, "playbook"), CatalogueSettings())
    assert PROPOSE_ACTIVITY == "replanner.propose"
    found = await ActivityEnvironment().run(acts.propose, closeout_request())
    assert found.backend == "playbook" and found.plan is not None
    missing = await ActivityEnvironment().run(acts.propose, closeout_request(code="timeout"))
    assert missing.plan is None and missing.reason == "no playbook recipe for timeout"
    assert fake.requests == []


async def test_activity_tries_the_playbook_first(fake):
    acts = ReplanActivities(_settings(fake), CatalogueSettings())
    proposal = await ActivityEnvironment().run(acts.propose, closeout_request())
    assert proposal.backend == "playbook"
    assert proposal.plan is not None and proposal.plan.steps[0].tool == "customer.restore"
    assert fake.requests == []  # a recipe fitted: no model call


async def test_activity_asks_the_model_when_no_recipe_fits(fake):
    fake.add(json.dumps(GOOD_PLAN), "no plan here")
    acts = ReplanActivities(_settings(fake), CatalogueSettings())
    proposal = await ActivityEnvironment().run(acts.propose, closeout_request(code="conflict"))
    assert proposal.backend == "openai"
    assert proposal.plan is not None and len(proposal.plan.steps) == 5
    assert user_payload(fake)["failure"]["code"] == "conflict"

    none = await ActivityEnvironment().run(acts.propose, closeout_request(code="conflict"))
    assert none.plan is None and none.backend == "openai"
    assert "playbook: no playbook recipe for conflict" in none.reason
    assert "openai: model output is not a plan" in none.reason
    assert len(fake.completions) == 2


async def test_activity_fails_retryably_when_the_model_gives_no_answer(fake):
    fake.add(503)
    acts = ReplanActivities(_settings(fake), CatalogueSettings())
    with pytest.raises(ApplicationError) as raised:
        await ActivityEnvironment().run(acts.propose, closeout_request(code="conflict"))
    assert raised.value.type == "ModelUnavailable"
    assert not raised.value.non_retryable
    assert KEY not in str(raised.value)
    assert len(fake.completions) == 1
