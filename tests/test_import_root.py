"""One import root (issue 20): plangate installs under ``plangate`` alone, so it imports inside a
team's own Temporal project, laid out as samples-python lays one out: ``activities.py``,
``workflows/``, ``records.py`` and ``worker.py`` beside its scripts. The team tests its own tool
as plangate's tests test plangate's, with ``plangate.testing`` (its own pytest session, its own
embedded stack); ``plangate.testing`` needs no pytest, and ``import plangate`` never loads it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import uuid
import zipfile
from pathlib import Path

ROOT = Path(__file__).parent.parent

# The team's own modules, under the names plangate's layers once had; and a tool of its own.
TEAM = {
    "activities.py": '''
        from temporalio import activity

        OWNER = "the team"

        @activity.defn
        async def greet(name: str) -> str:
            return f"hello {name}"
    ''',
    "workflows/__init__.py": '''
        OWNER = "the team"
    ''',
    "records.py": '''
        OWNER = "the team"
    ''',
    "worker.py": '''
        OWNER = "the team"
    ''',
    "team_tools.py": '''
        import asyncio

        from plangate import Contract, Effect, Term, ToolArgs, Writes, tool

        class Note(ToolArgs):
            text: str

        @tool("team.note", Note, Effect.READ)
        async def note(args, world, call):
            return {"noted": args.text}

        class Save(ToolArgs):
            bucket: str
            key: str
            text: str

        # what a fresh read finds after the call: the object holds the text
        SAVED = Term("object_content_equals", {"bucket": "bucket", "key": "key", "body": "text"},
                     identifies=True)

        @tool("team.save", Save, Effect.WRITE, Contract(post=(SAVED,)),
              writes=(Writes("bucket", "bucket"),))
        async def save(args, world, call):
            await asyncio.to_thread(
                world.s3.put_object, Bucket=args.bucket, Key=args.key, Body=args.text.encode())
            return {"saved": args.key}
    ''',
    "run_a_plan.py": '''
        import asyncio, json, os, sys

        import activities, records, worker, workflows
        from plangate import Plangate, Settings
        from plangate.worker.assembly import build_worker
        from plangate.client.connection import connect

        async def main():
            assert {m.OWNER for m in (activities, records, worker, workflows)} == {"the team"}
            settings = Settings.from_env(os.environ)
            client = await connect(settings)
            api = Plangate(client, settings)
            checked = api.check({"goal": "note it", "steps": [
                {"n": 1, "tool": "team.note", "effect": "read", "args": {"text": "hi"},
                 "binds": {"noted": "$.noted"}}]})
            async with await build_worker(client, settings):
                rep = await api.result(await api.start(checked.plan))
            print(json.dumps({"status": rep.status.value, "binds": rep.completed[0].binds}))

        asyncio.run(main())
    ''',
    "pyproject.toml": '''
        [tool.pytest.ini_options]
        asyncio_mode = "auto"
        asyncio_default_fixture_loop_scope = "session"
        asyncio_default_test_loop_scope = "session"
        pythonpath = ["."]
    ''',
}


# appended to the team's test: what it found in the world, for the test of this project to read
FOUND = '''
        import json, os, pathlib
        post = [(r.condition.probe, r.outcome.value) for c in report.step(1).checks
                if c.phase == "post" for r in c.results]
        pathlib.Path(os.environ["TEAM_FOUND"]).write_text(json.dumps({
            "body": body.decode(), "calls": dict(calls), "post": post,
            "status": report.status.value}))
'''


def team_tests() -> dict[str, str]:
    """The team's tests exactly as ``plangate.testing``'s docstring shows them (file name from
    each ``# tests/...`` line), so the example a team copies is the one that runs here."""
    import plangate.testing

    doc = plangate.testing.__doc__ or ""
    example = textwrap.dedent(doc.split("::\n", 1)[1].split("\n- ", 1)[0])
    files: dict[str, list[str]] = {}
    for line in example.strip().splitlines():
        if line.startswith("# tests/"):
            files[line[2:]] = []
        else:
            files[list(files)[-1]].append(line)
    return {name: "\n".join(lines).strip() + "\n" for name, lines in files.items()}


def make_project(where: Path) -> Path:
    files = {name: textwrap.dedent(text).lstrip() for name, text in TEAM.items()}
    files.update(team_tests())
    files["tests/test_team_tools.py"] += textwrap.indent(textwrap.dedent(FOUND), "    ")
    for name, text in files.items():
        path = where / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return where


async def test_plangate_runs_inside_a_temporal_project_of_its_own(stack, tmp_path):
    project = make_project(tmp_path / "team")
    env = {
        **{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, **stack.env(),
        "PLANGATE_TASK_QUEUE": f"team-{uuid.uuid4().hex[:8]}",
        "PLANGATE_EXTENSIONS": "team_tools", "PLANGATE_WORKDIR": str(tmp_path / "work"),
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "run_a_plan.py", cwd=project, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()[-3000:]
    assert out.decode().strip().splitlines()[-1] == (
        '{"status": "succeeded", "binds": {"noted": "hi"}}'
    )


async def test_a_team_tests_its_own_tool_with_plangate_testing(tmp_path):
    """The team's pytest session, in its project: its own embedded stack, the real worker with
    its tool loaded as an extension, the object the tool wrote read back from S3."""
    project = make_project(tmp_path / "team")
    found = tmp_path / "found.json"
    env = {
        **{k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith(
            ("PLANGATE_", "AWS_", "TEMPORAL_"))},
        "TEAM_FOUND": str(found),
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests", cwd=project,
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 180)
    assert proc.returncode == 0, out.decode()[-3000:]
    seen = json.loads(found.read_text())
    assert seen["body"] == "hi" and seen["status"] == "succeeded"
    # one call, and the team's post-condition read after it
    assert seen["calls"]["team.save"] == 1, seen
    assert seen["post"] == [["object_content_equals", "holds"]], seen


def test_plangate_testing_needs_no_pytest_and_plangate_never_loads_it():
    code = (
        "import sys\n"
        "for m in ('pytest', 'pytest_asyncio', 'hypothesis'): sys.modules[m] = None\n"
        "import plangate\n"
        "from plangate import Plangate, tool\n"
        "before = sorted(m for m in sys.modules if m.startswith('plangate.testing'))\n"
        "import plangate.testing\n"
        "print(before, len(plangate.testing.__all__))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-3000:]
    import plangate.testing

    assert out.stdout.split() == ["[]", str(len(plangate.testing.__all__))]


def test_the_wheel_installs_the_one_import_root(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps",
         "--quiet", "--disable-pip-version-check", "-w", str(tmp_path), str(ROOT)],
        check=True, capture_output=True, timeout=300,
    )
    (wheel,) = tmp_path.glob("plangate-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    roots = {n.split("/")[0] for n in names if ".dist-info/" not in n}
    assert roots == {"plangate"}, sorted(roots)
    assert "plangate/workflows/plan_run.py" in names and "worker.py" not in names


def test_what_a_caller_catches_is_exported_and_listed():
    """Every error a caller of the Python API catches comes from ``plangate`` itself, and
    ``dir(plangate)`` lists the surface before any of it is loaded."""
    script = (
        "import plangate\n"
        "listed = dir(plangate)\n"
        "from plangate import AnswerRefused, RunEnded, UnknownRun, PlangateError, Plangate\n"
        "from plangate.client import api\n"
        "assert UnknownRun is api.UnknownRun and issubclass(RunEnded, PlangateError)\n"
        "assert issubclass(AnswerRefused, plangate.RunError)\n"
        "missing = sorted(set(plangate.__all__) - set(listed))\n"
        "unknown = [n for n in plangate.__all__ if not hasattr(plangate, n)]\n"
        "print(missing, unknown, 'UnknownRun' in listed, 'Plangate' in listed)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[]", "[]", "True", "True"]
