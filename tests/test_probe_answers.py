"""Probes that cannot be fooled (issue 34): an answer that says nothing (no content, text that
is not JSON, JSON naming a key twice, a number where an object was asked) is ``unknown``, never
``holds``, and values compare by JSON type (``false`` is not ``0``). Unit tests of the strict
reading and the typed comparison; then real runs against an MCP server of the test's own
(``tests/mcp_answers.py`` over stdio) whose read tool guards its write tool: the probe's outcome
in the run report, and the write tool's calls counted by the server itself."""

from __future__ import annotations

import sys
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import JsonValue

from plangate.activities.probe_activity import probe_context
from plangate.activities.tools import TOOLS
from plangate.activities.tools.mcp.file import CheckDecl
from plangate.activities.tools.mcp.probes import document, judge
from plangate.activities.tools.mcp.sessions import ToolAnswer
from plangate.activities.tools.mcp.tools import result
from plangate.demo.schema import Account, seed_account
from plangate.plans import jsondoc
from plangate.probes import PROBES
from plangate.probes.registry import Unjudgeable, Verdict
from plangate.records.calls import ProbeRequest, StepRef
from plangate.records.report import RunReport, StepState
from plangate.testing import running_worker, scheduled
from plangate.world.settings import Settings
from tests.mcp_answers import HTML

SERVER = Path(__file__).with_name("mcp_answers.py")
AT = "MCP server q tool pending"

# -- strict reading ---------------------------------------------------------------------------


def test_a_key_named_twice_is_refused_at_any_depth():
    with pytest.raises(jsondoc.DuplicateKey, match="has duplicate key 'pending'") as e:
        jsondoc.loads('{"pending": 3, "pending": null}')
    assert e.value.key == "pending"
    with pytest.raises(jsondoc.DuplicateKey, match="'id'"):
        jsondoc.loads('{"items": [{"id": 1, "id": 2}]}')
    # the same key in two objects is no duplicate
    assert jsondoc.loads('[{"id": 1}, {"id": 2}]') == [{"id": 1}, {"id": 2}]


@pytest.mark.parametrize(("text", "why"), [
    ("<html><body>502 Bad Gateway</body></html>",
     "is not JSON (Expecting value): '<html><body>502 Bad Gateway</body></html>'"),
    ('{"pending": 0} trailing', "is not JSON (Extra data): "),
    ('{"pending": NaN}', "is not JSON (NaN is not a JSON number)"),
    ("[Infinity]", "is not JSON (Infinity is not a JSON number)"),
    ("", "is not JSON (Expecting value): ''"),
])
def test_what_is_not_one_json_document_is_refused_naming_why(text, why):
    with pytest.raises(jsondoc.NotJson) as e:
        jsondoc.loads(text)
    assert str(e.value).startswith(why), str(e.value)
    assert not isinstance(e.value, jsondoc.DuplicateKey)


def test_a_refused_text_is_quoted_by_its_first_80_characters():
    with pytest.raises(jsondoc.NotJson) as e:
        jsondoc.loads("<" + "x" * 200)
    assert str(e.value).endswith(repr("<" + "x" * 79 + "..."))


# -- comparison by JSON type ------------------------------------------------------------------

@pytest.mark.parametrize(("a", "b", "same"), [
    (1.0, 1, True),  # numbers compare as numbers
    (0, 0.0, True),
    (False, 0, False),  # Python's False == 0
    (True, 1, False),
    (0, False, False),
    (True, True, True),
    (None, False, False),
    (None, 0, False),
    (None, None, True),
    ("1", 1, False),
    ("a", "a", True),
    ([1, True], [1.0, True], True),
    ([1, True], [1, 1], False),  # nested
    ([0], [False], False),
    ([1, 2], [1, 2, 3], False),
    ({"n": 1, "ok": False}, {"ok": False, "n": 1.0}, True),
    ({"n": {"ok": False}}, {"n": {"ok": 0}}, False),  # nested
    ({"n": 1}, {"n": 1, "m": None}, False),
    ({}, [], False),
])
def test_values_compare_by_json_type(a, b, same):
    assert jsondoc.same(a, b) is same
    assert jsondoc.same(b, a) is same


def test_contains_takes_an_element_by_json_type():
    assert jsondoc.contains([1, 2], 1.0)
    assert not jsondoc.contains([0, 1], False)
    assert not jsondoc.contains([True], 1)
    assert jsondoc.contains({"pending": 1}, "pending")
    assert jsondoc.contains("On branch main", "main")
    assert not jsondoc.contains(3, 3)


@pytest.mark.parametrize(("path", "found", "value"), [
    ("$.a.b", True, None),
    ("$.a.c", False, None),  # an object without the key: absent
    ("$.l[5]", False, None),  # an array without the index: absent
    ("$.l[-1]", True, 2),
])
def test_a_path_finds_or_says_absent(path, found, value):
    assert jsondoc.find({"a": {"b": None}, "l": [1, 2]}, path) == (found, value)


@pytest.mark.parametrize(("doc", "path", "why"), [
    (502, "$.pending", "$.pending: $ is a number, not an object"),
    (None, "$.pending", "$.pending: $ is null, not an object"),
    ({"a": None}, "$.a.b", "$.a.b: $.a is null, not an object"),
    ({"a": {"b": 1}}, "$.a[0]", "$.a[0]: $.a is an object, not an array"),
    ({"l": ["x"]}, "$.l[0].id", "$.l[0].id: $.l[0] is a string, not an object"),
])
def test_a_path_the_document_cannot_answer_is_refused(doc, path, why):
    with pytest.raises(jsondoc.WrongShape) as e:
        jsondoc.find(doc, path)
    assert str(e.value) == why


# -- an MCP answer, judged --------------------------------------------------------------------

ABSENT: dict[str, JsonValue] = {"path": "$.pending", "present": False}


def judged(check: dict[str, Any], answer: ToolAnswer) -> bool:
    decl = CheckDecl.model_validate(check)
    return judge(decl, document(answer, decl, AT), {}, AT).holds


@pytest.mark.parametrize(("check", "answer", "why"), [
    (ABSENT, ToolAnswer(False, "", None), f"the answer of {AT} has no content"),
    (ABSENT, ToolAnswer(False, " \n", None), f"the answer of {AT} has no content"),
    ({"contains": "x"}, ToolAnswer(False, "", None), f"the answer of {AT} has no content"),
    (ABSENT, ToolAnswer(False, "<html>502</html>", None),
     f"the answer of {AT} is not JSON (Expecting value): '<html>502</html>': it has no "
     "$.pending"),
    (ABSENT, ToolAnswer(False, '{"pending": 3, "pending": null}', None),
     f"the answer of {AT} has duplicate key 'pending'"),
    # judged by its structured content, the text naming a key twice still says two things
    (ABSENT, ToolAnswer(False, '{"pending": 3, "pending": null}', {"x": 1}),
     f"the answer of {AT} has duplicate key 'pending'"),
    ({**ABSENT, "source": "structured"}, ToolAnswer(False, '{"pending": 1}', None),
     f"the answer of {AT} has no structured content"),
    (ABSENT, ToolAnswer(False, "502", None),
     f"the answer of {AT} does not say: $.pending: $ is a number, not an object"),
    (ABSENT, ToolAnswer(False, "null", None),
     f"the answer of {AT} does not say: $.pending: $ is null, not an object"),
])
def test_an_answer_that_says_nothing_is_unjudgeable(check, answer, why):
    with pytest.raises(Unjudgeable) as e:
        judged(check, answer)
    assert str(e.value) == why


@pytest.mark.parametrize(("check", "answer", "holds"), [
    (ABSENT, ToolAnswer(False, '{"queue": "q"}', None), True),  # an object without it
    (ABSENT, ToolAnswer(False, '{"pending": null}', None), True),
    (ABSENT, ToolAnswer(False, '{"pending": 0}', None), False),
    ({"path": "$.pending", "equals": 0}, ToolAnswer(False, '{"pending": false}', None), False),
    ({"path": "$.pending", "equals": 0}, ToolAnswer(False, '{"pending": 0.0}', None), True),
    ({"path": "$.pending", "equals": False}, ToolAnswer(False, '{"pending": 0}', None), False),
    ({"path": "$.ids", "contains": 1}, ToolAnswer(False, '{"ids": [true]}', None), False),
    ({"path": "$.ids", "not_contains": 0}, ToolAnswer(False, '{"ids": [false]}', None), True),
    # text that is not JSON is still its own $, for text predicates
    ({"contains": "On branch main\n"}, ToolAnswer(False, "On branch main\nclean", None), True),
    ({"equals": "notes\n"}, ToolAnswer(False, "notes\n", None), True),
    # structured content, its text a summary that is not JSON
    (ABSENT, ToolAnswer(False, "0 pending", {"queue": "q"}), True),
])
def test_an_answer_that_says_something_is_judged_by_json_type(check, answer, holds):
    assert judged(check, answer) is holds


@pytest.mark.parametrize(("answer", "why"), [
    (ToolAnswer(False, "", None), "has no content"),
    (ToolAnswer(False, "<html>502</html>", None), "is not JSON (Expecting value)"),
    (ToolAnswer(False, '{"pending": 3, "pending": null}', {"pending": None}),
     "has duplicate key 'pending'"),
])
def test_a_reader_answer_that_is_no_record_is_refused_to_field_probes(answer, why):
    with pytest.raises(Unjudgeable) as e:
        result(answer, AT, for_probe=True)
    assert str(e.value).startswith(f"the answer of {AT} {why}"), str(e.value)
    # called as a step it is a result: its json null, never the last of two keys
    assert result(answer, AT, for_probe=False) == {
        "text": answer.text, "structured": answer.structured, "json": None}


def test_a_reader_answer_that_is_a_record_is_read():
    answer = ToolAnswer(False, '{"pending": 0}', None)
    assert result(answer, AT, for_probe=True)["json"] == {"pending": 0}
    summary = ToolAnswer(False, "0 pending", {"pending": 0})
    assert result(summary, AT, for_probe=True)["structured"] == {"pending": 0}


# -- field probes over a real record (demo.customers in Postgres, through its tool's reader) ---

async def field(world: Any, name: str, tool: str, args: dict[str, Any],
                **probe_args: JsonValue) -> Verdict:
    spec = PROBES[name]
    ref = StepRef(run_id="test", plan_version=1, n=1, tool=tool, args=args)
    ctx = probe_context(ProbeRequest(step=ref, conditions=[], idempotency_key=""), world, TOOLS)
    return await spec.fn(spec.args.model_validate(probe_args), world, ctx)


async def test_field_probes_compare_a_real_record_by_json_type(world):
    aid = f"acct_{uuid.uuid4().hex[:8]}"
    await seed_account(world, Account(aid, f"ar@{aid}.example", archived_at=datetime.now(UTC)))
    cust = {"account_id": aid}
    v = await field(world, "field_equals", "customer.restore", cust, path="$.archived",
                    value=True)
    assert (v.holds, v.observed) == (True, True)
    # the record's true is not 1, and not "not 0" either: Python's True == 1 held before
    v = await field(world, "field_equals", "customer.restore", cust, path="$.archived", value=1)
    assert (v.holds, v.detail) == (False, "$.archived is True, not 1")
    v = await field(world, "field_not_equals", "customer.restore", cust, path="$.archived",
                    value=1)
    assert v.holds
    v = await field(world, "field_present", "customer.restore", cust, path="$.nickname")
    assert (v.holds, v.detail) == (False, "$.nickname is absent")
    # a field of a string: the record does not say, so the probe cannot answer
    with pytest.raises(Unjudgeable) as e:
        await field(world, "field_present", "customer.restore", cust, path="$.status.code")
    assert str(e.value) == ("the record of customer.restore does not say: $.status.code: "
                            "$.status is a string, not an object")


# -- real runs: a back-door server whose read tool guards its write tool ----------------------

# answer -> (the probe's check, its outcome, what its detail says)
CASES: dict[str, tuple[dict[str, JsonValue], str, str]] = {
    "empty": (ABSENT, "unknown", "the answer of MCP server empty tool pending has no content"),
    "html": (ABSENT, "unknown", "the answer of MCP server html tool pending is not JSON "
             f"(Expecting value): {jsondoc.quote(HTML)}: it has no $.pending"),
    "duplicate": (ABSENT, "unknown",
                  "the answer of MCP server duplicate tool pending has duplicate key 'pending'"),
    "number": (ABSENT, "unknown", "the answer of MCP server number tool pending does not say: "
               "$.pending: $ is a number, not an object"),
    "false": ({"path": "$.pending", "equals": 0}, "violated", "$.pending is False, not 0"),
    "zero": ({"path": "$.pending", "equals": 0}, "holds", ""),  # the control: it acts
}


def servers_file(tmp_path: Path) -> tuple[Path, dict[str, Path]]:
    """One server per answer of ``CASES``: ``NAME.drain`` (write) guarded by ``NAME.idle``, and
    ``field.drain`` guarded by a field probe through its reader (the duplicate-key server).
    The files each server counts its write calls in."""
    calls = {name: tmp_path / f"{name}.calls" for name in CASES}
    servers: dict[str, Any] = {}
    for name, (check, _, _) in CASES.items():
        servers[name] = {
            "command": [sys.executable, str(SERVER), name, str(calls[name])],
            "tools": {f"{name}.drain": {
                "tool": "drain", "effect": "write", "args": {"queue": "string"},
                "contract": {"pre": [{"probe": f"{name}.idle", "from_args": {"queue": "queue"}}]},
            }},
            "probes": {f"{name}.idle": {
                "tool": "pending", "args": {"queue": "string"}, "call": {"queue": "{queue}"},
                "check": check,
            }},
        }
    calls["field"] = tmp_path / "field.calls"
    servers["field"] = {
        "command": [sys.executable, str(SERVER), "duplicate", str(calls["field"])],
        "tools": {
            "field.peek": {"tool": "pending", "effect": "read", "args": {"queue": "string"}},
            "field.drain": {
                "tool": "drain", "effect": "write", "args": {"queue": "string"},
                "reader": {"tool": "field.peek", "args": {"queue": "args.queue"}},
                "contract": {"pre": [{"probe": "field_equals",
                                      "fixed": {"path": "$.json.pending", "value": None}}]},
            },
        },
    }
    path = tmp_path / "answers.yaml"
    path.write_text(yaml.safe_dump({"servers": servers}, sort_keys=False))
    return path, calls


def with_file(settings: Settings, path: Path) -> Settings:
    return replace(settings, catalogue=replace(settings.catalogue, mcp_servers=str(path)))


def drain(name: str) -> dict[str, Any]:
    return {"goal": "drain the queue once it is idle", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": f"{name}.drain", "on_unmet": "halt", "args": {"queue": "invoices"}}]}


def written(calls: Path) -> int:
    return len(calls.read_text().splitlines()) if calls.exists() else 0


def pre_results(report: RunReport, probe: str) -> list[tuple[str, str]]:
    return [(c.outcome.value, c.detail) for r in report.step(1).checks
            for c in r.results if c.condition.probe == probe]


async def test_a_back_door_probe_over_an_answer_that_says_nothing_is_unknown_and_nothing_is_sent(
        client, settings, tmp_path):
    path, calls = servers_file(tmp_path)
    async with running_worker(client, with_file(settings, path)) as runs:
        reports = {name: await runs.run(drain(name)) for name in [*CASES, "field"]}
        ran = {name: await scheduled(client, rep.run_id) for name, rep in reports.items()}

    # the control: an answer that says 0 pending holds, and the server drained once
    zero = reports["zero"]
    assert zero.status == "succeeded", zero.failure
    assert set(pre_results(zero, "zero.idle")) == {("holds", "")}
    assert written(calls["zero"]) == 1 and ran["zero"]["zero.drain"] == 1

    for name in ("empty", "html", "duplicate", "number"):
        rep, (_, outcome, why) = reports[name], CASES[name]
        results = pre_results(rep, f"{name}.idle")
        assert results, (name, rep.step(1).checks)
        assert {o for o, _ in results} == {outcome}, (name, results)
        assert {d for _, d in results} == {f"Unjudgeable: {why}"}, (name, results)
        assert rep.status == "halted", (name, rep.failure)
        assert rep.failure is not None and rep.failure.code == "probe_unknown"
        assert rep.failure.detail == f"{name}.idle(queue='invoices'): Unjudgeable: {why}", \
            rep.failure.detail
        assert rep.step(1).state == StepState.HALTED
        # nothing was sent: not by the server's count, not in the history
        assert written(calls[name]) == 0, name
        assert ran[name][f"{name}.drain"] == 0, (name, ran[name])

    # false is not 0: violated, the step's pre condition unmet, nothing sent
    false = reports["false"]
    assert pre_results(false, "false.idle")[-1] == ("violated", "$.pending is False, not 0")
    assert "unknown" not in {o for o, _ in pre_results(false, "false.idle")}
    assert false.status == "halted" and false.failure is not None
    assert false.failure.code == "precondition_unmet", false.failure
    assert written(calls["false"]) == 0 and ran["false"]["false.drain"] == 0

    # a field probe through the tool's reader: the same answer naming a key twice
    field = reports["field"]
    why = ("Unjudgeable: the answer of MCP server field tool pending has duplicate key "
           "'pending'")
    assert {r for r in pre_results(field, "field_equals")} == {("unknown", why)}
    assert field.status == "halted" and field.failure is not None
    assert field.failure.code == "probe_unknown", field.failure
    assert written(calls["field"]) == 0 and ran["field"]["field.drain"] == 0
