"""One import root (issue 20): plangate installs under ``plangate`` alone, so it imports inside a
team's own Temporal project, laid out as samples-python lays one out: ``activities.py``,
``workflows/``, ``records.py`` and ``worker.py`` beside its scripts."""

from __future__ import annotations

import asyncio
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
        from plangate import Effect, ToolArgs, tool

        class Note(ToolArgs):
            text: str

        @tool("team.note", Note, Effect.READ)
        async def note(args, world, call):
            return {"noted": args.text}
    ''',
    "run_a_plan.py": '''
        import asyncio, json, os, sys

        import activities, records, worker, workflows
        from plangate import Plangate, Settings
        from plangate.assembly import build_worker
        from plangate.connection import connect

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
}


def make_project(where: Path) -> Path:
    for name, text in TEAM.items():
        path = where / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
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
