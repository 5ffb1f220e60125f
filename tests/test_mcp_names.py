"""Names models accept (issue 35, item 2): every tool `plangate mcp` serves matches OpenAI's
``^[a-zA-Z0-9_-]{1,64}$`` and is mapped back exactly (a call by its served name runs the
catalogue tool: the S3 object and the Temporal history say so); a clash is refused at start;
titles carry the catalogue name, descriptions what the tool does; ``check_plan`` and
``run_plan`` carry the plan's JSON schema, which every example plan satisfies; the plan
language is served with an example that passes ``check_plan``."""

from __future__ import annotations

import glob
import inspect
import json
import re
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import jsonschema  # type: ignore[import-untyped]  # a dependency of mcp; no stubs
import pytest
from mcp_types import TextContent, TextResourceContents

from plangate.activities.catalogue import catalogue
from plangate.activities.tools.registry import TOOLS
from plangate.demo.scenarios import closeout_plan, seed_replanned_plan
from plangate.mcp.language import EXAMPLE_PLAN, LANGUAGE_URI, plan_schema
from plangate.mcp.names import NameClash, served_name, served_names
from plangate.testing import running_worker, scheduled
from tests.mcp_client import http_server, server_env, stdio

OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
ROOT = Path(__file__).resolve().parent.parent


def words(text: str) -> str:
    return " ".join(text.split())


async def test_served_names_are_names_a_model_accepts_and_map_back(client, settings, stack, s3):
    bucket, key = f"names-{uuid.uuid4().hex[:8]}", f"note-{uuid.uuid4().hex[:8]}.txt"
    s3.create_bucket(Bucket=bucket)
    async with running_worker(client, settings) as h:
        env = server_env(stack, settings, h.settings.temporal.task_queue)
        async with stdio(env) as mcp:
            listed = {t.name: t for t in (await mcp.list_tools()).tools}
            instructions = mcp.instructions
            bad = [n for n in listed if not OPENAI_NAME.match(n)]
            assert bad == []
            guarded = {n: t for n, t in listed.items()
                       if n not in ("check_plan", "run_plan", "run_report", "cancel_run")}
            # every catalogue tool, each under its served name, titled with its catalogue name
            assert {t.title for t in guarded.values()} == set(catalogue(settings.catalogue).tools)
            for name, t in guarded.items():
                assert t.title is not None and served_name(t.title) == name
                assert t.annotations is not None and t.annotations.title == t.title
            assert {"s3_put", "s3_get", "billing_issue_credit"} <= set(guarded)
            # the description says what the tool does (its docstring), its effect and contract
            put = guarded["s3_put"].description or ""
            doc = inspect.getdoc(TOOLS["s3.put"].fn)
            assert doc and put.startswith(words(doc)), put
            assert "effect write" in put
            assert "after the call it reads back object_content_equals(bucket=<bucket>, " \
                "key=<key>, body=<body>)" in put
            assert "_meta['io.plangate/request-id']" in put
            get = guarded["s3_get"].description or ""
            assert "before the call it checks object_exists(bucket=<bucket>, key=<key>)" in get
            credit = guarded["billing_issue_credit"].description or ""
            assert credit.startswith(words(inspect.getdoc(TOOLS["billing.issue_credit"].fn)
                                           or "-"))
            assert "effect money (moves money)" in credit
            # the test deployment holds no effect for a person (PLANGATE_APPROVE_EFFECTS=none)
            assert "may hold a call for a credentialed person" in credit
            assert instructions is not None and LANGUAGE_URI in instructions

            # the plan tools carry the plan's schema, not a bare object
            for tool in ("check_plan", "run_plan"):
                plan = listed[tool].input_schema["properties"]["plan"]
                assert plan["required"] == ["goal", "steps"]
                assert set(plan["properties"]["steps"]["items"]["required"]) == {"n", "tool"}

            # called by its served name: the catalogue tool runs (the world and the history)
            res = await mcp.call_tool("s3_put", {"bucket": bucket, "key": key, "body": "hi"})
            assert not res.is_error, res.content
            out = res.structured_content
            assert out is not None and out["status"] == "succeeded", out
            # the dotted name is not served: a client cannot reach a tool by another name
            dotted = await mcp.call_tool("s3.put", {"bucket": bucket, "key": "x", "body": "x"})
            assert dotted.is_error
            (said,) = dotted.content
            assert isinstance(said, TextContent) and said.text == "Unknown tool: s3.put"
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"hi"
    assert "x" not in {o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])}
    ran = await scheduled(client, out["run_id"])
    assert ran.get("s3.put") == 1 and "s3_put" not in ran


async def test_the_plan_language_is_served_with_an_example_check_plan_passes(settings, stack):
    async with http_server(server_env(stack, settings, "unused")) as srv, \
            srv.client() as mcp:
        (page,) = (await mcp.read_resource(LANGUAGE_URI)).contents
        assert isinstance(page, TextResourceContents) and page.mime_type == "text/markdown"
        prompts = {p.name: p for p in (await mcp.list_prompts()).prompts}
        assert "plan_language" in prompts
        (message,) = (await mcp.get_prompt("plan_language")).messages
        assert isinstance(message.content, TextContent)
        assert message.content.text == page.text
        (example,) = re.findall(r"```json\n(.*?)```", page.text, re.S)
        plan = json.loads(example)
        assert plan == EXAMPLE_PLAN
        checked = await mcp.call_tool("check_plan", {"plan": plan, "strict": True})
        (cat,) = (await mcp.read_resource("plangate://catalogue")).contents
    assert isinstance(cat, TextResourceContents)
    put = next(t for t in json.loads(cat.text)["tools"] if t["name"] == "s3.put")
    assert put["served_as"] == "s3_put" and put["description"].startswith("Writes the object")
    assert not checked.is_error and checked.structured_content == {
        "valid": True, "problems": [], "warnings": []}


def test_the_plan_schema_accepts_every_example_plan_and_is_self_contained():
    schema = plan_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    # under a tool's properties.plan a $ref would point at the tool's schema: none is left
    assert "$ref" not in json.dumps(schema) and "$defs" not in schema
    valid = jsonschema.Draft202012Validator(schema)
    plans = {p: json.loads(Path(p).read_text()) for p in glob.glob(str(ROOT / "examples/*.json"))}
    assert len(plans) >= 2
    plans.update({"closeout": closeout_plan(), "replanned": seed_replanned_plan(),
                  "language example": EXAMPLE_PLAN})
    for name, plan in plans.items():
        assert [e.message for e in valid.iter_errors(plan)] == [], name
    # the forms plans are written in: a flat condition with its wait, one condition for a list
    flat = {"goal": "g", "steps": [{"n": 1, "tool": "s3.get", "args": {},
                                    "pre": {"probe": "object_exists", "bucket": "b", "key": "k"},
                                    "post": [{"probe": "job_state", "job_id": "j", "want": "done",
                                              "wait": {"timeout_s": 60, "interval_s": 5}}]}]}
    assert list(valid.iter_errors(flat)) == []
    # and what no plan may be
    no_tool = {"goal": "g", "steps": [{"n": 1, "args": {}}]}
    assert [e.message for e in valid.iter_errors(no_tool)] == ["'tool' is a required property"]
    extra = {"goal": "g", "steps": [{"n": 1, "tool": "s3.get"}], "owner": "me"}
    assert [e.message for e in valid.iter_errors(extra)] == [
        "Additional properties are not allowed ('owner' was unexpected)"]


def test_a_name_served_twice_or_too_long_is_refused_naming_both():
    assert served_names(["s3.put", "billing.issue_credit"]) == {
        "s3_put": "s3.put", "billing_issue_credit": "billing.issue_credit"}
    with pytest.raises(NameClash) as twice:
        served_names(["s3.put", "s3_put"])
    assert str(twice.value) == (
        "mcp: tool 's3_put' and tool 's3.put' would both be served as 's3_put' (names a model "
        "accepts: ^[a-zA-Z0-9_-]{1,64}$); rename one of them")
    with pytest.raises(NameClash) as plan_tool:
        served_names(["run.plan"])
    assert str(plan_tool.value) == (
        "mcp: tool 'run.plan' and plangate's plan tool run_plan would both be served as "
        "'run_plan' (names a model accepts: ^[a-zA-Z0-9_-]{1,64}$); rename one of them")
    long = "ext." + "x" * 61
    with pytest.raises(NameClash) as too_long:
        served_names([long])
    assert str(too_long.value) == (
        f"mcp: tool {long!r} cannot be served over MCP: its name {served_name(long)!r} is 65 "
        "characters, a model accepts ^[a-zA-Z0-9_-]{1,64}$; rename the tool")


def test_plangate_mcp_refuses_to_start_on_a_clash(tmp_path):
    (tmp_path / "clash_tools.py").write_text(textwrap.dedent('''
        from plangate.activities.tools.registry import ToolArgs, tool
        from plangate.plans.model import Effect

        class NoArgs(ToolArgs):
            pass

        @tool("s3_put", NoArgs, Effect.READ)
        async def s3_put_too(args, world, call):
            """A tool whose name is the one s3.put is served under."""
            return {}
    '''))
    import os

    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PLANGATE_EXTENSIONS": "clash_tools"}
    done = subprocess.run([sys.executable, "-m", "plangate", "mcp"], env=env,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done
    assert done.stderr.strip().splitlines()[-1] == (
        "plangate: mcp: tool 's3_put' and tool 's3.put' would both be served as 's3_put' "
        "(names a model accepts: ^[a-zA-Z0-9_-]{1,64}$); rename one of them")
    assert "Traceback" not in done.stderr and done.stdout == ""


async def test_a_back_door_tool_is_described_by_its_servers_file(tmp_path):
    """A tool of an MCP servers file: served under a name a model accepts, described by the
    file's ``description`` (the server is not asked: building the front door connects nothing)."""
    servers = tmp_path / "servers.yaml"
    servers.write_text(textwrap.dedent('''
        servers:
          git:
            command: [python, -m, mcp_server_git, --repository, /srv/repo]
            tools:
              git.log:
                tool: git_log
                effect: read
                args: {repo_path: string}
                description: The commit log of the repository at repo_path, newest first.
    '''))
    import os

    from plangate.mcp.server import build_server
    from plangate.world.settings import Settings

    settings = Settings.from_env({**os.environ, "PLANGATE_MCP_SERVERS": str(servers)},
                                 connects=False)
    listed = {t.name: t for t in await build_server(settings).list_tools()}
    log = listed["git_log"]
    assert log.title == "git.log"
    assert (log.description or "").startswith(
        "The commit log of the repository at repo_path, newest first.\n\nplangate tool "
        "git.log, effect read (changes nothing); each call is a one-step guarded run on "
        "Temporal. Its contract probes nothing of its own")
