"""What plan fuzzing found (``tests/fuzz_corpus/``), replayed. ``expected.json`` says, for each
plan, what plangate did with it before (``before``) and what it must do now: be refused
(``error``, a fragment of the ``message``) by ``plangate check`` and by ``plangate run`` (exit 2,
one line per problem, no workflow started, so no tool called) and by the Python API, from the
file and from the parsed value; or be accepted and run to an end (``ends``: the final status,
``void``: the steps never dispatched) with no failed workflow task and no timer that fired (on
the time-skipping server, where a wait of an hour would fire at once).
``tests/test_plan_fuzz.py`` and ``python -m bench.fuzz`` are the fuzzing itself."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from temporalio.api.enums.v1 import EventType
from temporalio.service import RPCError, RPCStatusCode

from plangate.cli import main
from plangate.client.checked import check
from plangate.plans.load import PlanError, _maybe_unfit, _unfit_values, parse_plan
from plangate.testing import running_worker
from plangate.world.settings import Settings

CORPUS = Path(__file__).parent / "fuzz_corpus"
EXPECTED: dict[str, dict[str, Any]] = json.loads((CORPUS / "expected.json").read_text())
ERRORS: dict[str, type[PlanError]] = {"PlanError": PlanError}
REFUSED = sorted(name for name, e in EXPECTED.items() if "error" in e)
RUN = sorted(name for name, e in EXPECTED.items() if "ends" in e)


def test_the_corpus_is_complete():
    files = {p.name for p in CORPUS.iterdir()} - {"expected.json"}
    assert files == set(EXPECTED), "every file in tests/fuzz_corpus/ has an expectation"
    assert set(REFUSED) | set(RUN) == files and not set(REFUSED) & set(RUN)
    assert all(EXPECTED[n]["error"] in ERRORS and EXPECTED[n]["message"] for n in REFUSED)
    assert all(e["before"] for e in EXPECTED.values())


@pytest.fixture
def stack_env(stack, settings, monkeypatch) -> Settings:
    for k, v in stack.env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("PLANGATE_WORKDIR", str(settings.world.workdir))
    return Settings.from_env(os.environ)


def _parsed(path: Path) -> tuple[bool, Any]:
    """The file as the value a Python caller would hand the API, if the parsers read it."""
    try:
        text = path.read_text(encoding="utf-8", errors="surrogatepass")
        return True, (yaml.safe_load(text) if path.suffix == ".yaml" else json.loads(text))
    except (ValueError, yaml.YAMLError):
        return False, None


def _one_line_each(err: str, path: Path) -> None:
    """``plangate`` printed a rejection: one line, or a header and one line per problem."""
    lines = err.splitlines()
    one = f"plangate: plan {path} rejected: "
    assert "Traceback" not in err
    assert (len(lines) == 1 and lines[0].startswith(one)) or (
        lines[0] == one.rstrip() and all(x.startswith("  - ") for x in lines[1:])
    ), err


@pytest.mark.parametrize("name", REFUSED)
async def test_refused_by_check_run_and_the_api(name, stack_env, client, capsys):
    want = EXPECTED[name]
    error, message = ERRORS[want["error"]], want["message"]
    path = CORPUS / name
    run_id = f"fuzz-corpus-{uuid.uuid4().hex[:8]}"
    for argv in (["check", str(path)], ["run", str(path), "--id", run_id]):
        code = await asyncio.to_thread(main, argv)
        captured = capsys.readouterr()
        assert (code, captured.out) == (2, ""), (argv, captured.err)
        assert message in captured.err, captured.err
        _one_line_each(captured.err, path)
    with pytest.raises(RPCError) as e:  # no workflow: nothing was dispatched
        await client.get_workflow_handle(run_id).describe()
    assert e.value.status == RPCStatusCode.NOT_FOUND
    readable, value = _parsed(path)
    for source in (path, *([value] if readable else [])):
        with pytest.raises(error) as refused:
            check(source, stack_env)
        problems = refused.value.problems
        assert any(message in p for p in problems), problems
        assert all(len(p.splitlines()) == 1 for p in problems), problems


@pytest.mark.parametrize("name", RUN)
async def test_accepted_and_run_to_an_end(name, own_time_skipping_env, settings, capsys):
    want = EXPECTED[name]
    path = CORPUS / name
    assert await asyncio.to_thread(main, ["check", str(path)]) == 0, capsys.readouterr().err
    env = own_time_skipping_env  # its own: a run here was seen to leave the clock years ahead
    async with running_worker(env.client, settings) as h:
        rep = await h.run(json.loads(path.read_text()))
    assert rep.status == want["ends"]
    assert [s.n for s in rep.steps if s.state == "VOID"] == want["void"]
    events = [e async for e in env.client.get_workflow_handle(rep.run_id).fetch_history_events()]
    kinds = [e.event_type for e in events]
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in kinds
    assert EventType.EVENT_TYPE_TIMER_FIRED not in kinds


def test_the_api_refuses_what_only_python_can_hand_over(settings):
    """Values no file holds (found by fuzzing the API with mappings): each a ``PlanError`` with
    one line per problem, never another exception."""
    one = {"n": 1, "tool": "warehouse.run_sql", "effect": "read",
           "args": {"statement": "select_one"}}

    def params(value: Any) -> dict[str, Any]:
        return {"goal": "g", "steps": [{**one, "args": {
            "statement": "set_job_state", "params": {"job_id": value, "state": "done"}}}]}

    cases: dict[str, tuple[Any, str]] = {
        "a list": ([one], "plan: a plan is an object with goal and steps, not a list"),
        "a number": (5, "not a number"),
        "None": (None, "not null"),
        "a step number of 5,000 digits": (
            {"goal": "g", "steps": [{**one, "n": 10**5000}]},
            "step #1, field n: an integer beyond 64 bits"),
        "an argument of 5,000 digits": (
            params(10**5000), "step 1, field args.params.job_id: an integer beyond 64 bits"),
        "a lone surrogate": (params("\udcff"), "step 1, field args.params.job_id: not Unicode"),
        "a path with a NUL byte": ("a\0b.json", "cannot read: no file name holds a NUL byte"),
        "a path with a line break": ("a\nb.json", "'a\\nb.json': cannot read"),
        "a tuple as a name": ({"goal": "g", "steps": [{**one, "args": {(1, 2): "x"}}]},
                              "step 1, field args['(1, 2)'] (the name)"),
        "bytes as a value": (params(b"x"), "step 1, field args.params.job_id: input was not"),
    }
    for what, (source, message) in cases.items():
        with pytest.raises(PlanError) as e:
            check(source, settings)
        assert any(message in p for p in e.value.problems), (what, e.value.problems)
        assert all(len(p.splitlines()) == 1 for p in e.value.problems), (what, e.value.problems)


def test_a_plans_values_are_walked_only_where_its_json_shows_an_unfit_one():
    """The values of a plan are searched as JSON text first (``plans.load._maybe_unfit``) and
    walked only where the text shows a lone surrogate, a NUL or 19 digits: a plan with none is
    not walked, and every unfit value or name is still found where it is."""
    steps = [{"n": n, "tool": "warehouse.run_sql", "depends_on": [n - 1] if n > 1 else [],
              "args": {"statement": "set_job_state",
                       "params": {"job_id": f"job-{n}", "state": "done"}},
              "pre": [{"probe": "column_exists", "table": "t", "column": "id"}],
              "post": [{"probe": "job_state", "job_id": f"job-{n}", "want": "done"}]}
             for n in range(1, 32)]
    raw = {"goal": "clean", "steps": steps}
    assert not _maybe_unfit(raw)
    assert not _maybe_unfit(parse_plan(raw).model_dump())  # its datetimes and enums too

    def at(value: Any, name: str = "job_id") -> dict[str, Any]:
        return {"steps": [{"args": {"params": {name: value}}}]}

    unfit = {
        "a lone surrogate": at("a\udcffb"), "a surrogate in a name": at(1, "n\ud800"),
        "a NUL": at("a\0b"), "a NUL in a name": at(1, "n\0"), "2**63": at(2**63),
        "-(2**63) - 1": at(-(2**63) - 1), "a name of 2**64": {"steps": {2**64: 1}},
        "5,000 digits": at(10**5000), "a name that is a tuple": {(1, 2): "a\0"},
    }
    for what, value in unfit.items():
        assert _maybe_unfit(value), what
        assert len(_unfit_values(value)) == 1, what
    # suspected, walked, and fit: the largest integer a plan holds, a backslash written out
    for fit in (at(2**63 - 1), at(-(2**63)), at("\\u0000"), {"a": "x", "b": 1.5e300}):
        assert _maybe_unfit(fit) == ("u0000" in str(fit) or "9223372036854775" in str(fit))
        assert _unfit_values(fit) == [], fit
