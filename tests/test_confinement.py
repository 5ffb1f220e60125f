"""At run time, after ``${}`` binding: a path that leaves the work directory or names no file in
it, and run_sql parameters that do not fit the statement, are ``bad_arguments``; nothing is
written outside the run's own directory under the work directory and no statement runs. Real
worker, S3 and Postgres."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from plangate.probes.files import FileArgs, local_file_nonempty
from plangate.probes.registry import ProbeContext
from plangate.testing import attempts, running_worker, scheduled
from plangate.world.clients import World
from plangate.world.runfiles import RunFiles
from plangate.world.scopes import SCOPE, run_scope


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def bucket(s3):
    name = unique("confined-drops")
    s3.create_bucket(Bucket=name)
    s3.put_object(Bucket=name, Key="k.csv", Body=b"id\n1\n")
    return name


def fetch_then(bucket: str, second: dict[str, Any], dest: str) -> dict[str, Any]:
    """Fetch k.csv to ``dest``, binding where it went, then ``second``."""
    return {"goal": "fetch twice", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "s3.get", "effect": "read",
         "args": {"bucket": bucket, "key": "k.csv", "dest": dest},
         "binds": {"where": "$.dest", "size": "$.size"}},
        {"n": 2, "depends_on": [1], **second},
    ]}


def get_to(bucket: str, dest: str) -> dict[str, Any]:
    return {"tool": "s3.get", "effect": "read",
            "args": {"bucket": bucket, "key": "k.csv", "dest": dest}}


def entries_beside(workdir: Path) -> set[str]:
    # the embedded servers keep their state beside it; their SQLite journals come and go
    transient = ("-journal", "-wal", "-shm")
    return {p.name for p in workdir.parent.iterdir() if not p.name.endswith(transient)}


def names_in(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.mark.parametrize(("dest", "why"), [
    # <workdir>/conf-N/k.csv/../.. is the work directory itself: this once wrote <workdir>.part
    ("${where}/../..", "is the work directory itself"),
    ("${where}/../../../escaped.csv", "is outside the work directory"),
    ("${where}/..", "is a directory, not a file"),
    # a name of 245 bytes: s3.get's temporary file beside it would pass the file system's 255
    ("${where}" + "a" * 240, "a file or directory name is at most 200 bytes"),
])
async def test_a_bound_path_that_names_no_file_inside_is_refused(client, settings, bucket, dest,
                                                                 why):
    workdir = settings.world.workdir.resolve()
    beside = entries_beside(workdir)
    first = unique("conf")
    async with running_worker(client, settings) as h:
        rep = await h.run(fetch_then(bucket, get_to(bucket, dest), f"{first}/k.csv"))
    assert rep.status == "failed" and rep.step(1).state == "DONE"
    assert rep.failure is not None and rep.failure.step == 2
    assert rep.failure.code == "bad_arguments" and why in rep.failure.detail
    assert (await attempts(client, rep.run_id))["s3.get"] == [1, 1]  # permanent: not retried
    # nothing new beside the work directory (no <workdir>.part, no escaped.csv); inside it,
    # only step 1's file (no temporary file left behind)
    assert entries_beside(workdir) == beside
    # step 1's file is in the run's own directory under the work directory, nowhere else
    result = rep.step(1).result
    assert result is not None
    got = Path(str(result["dest"]))
    own = got.parent.parent
    assert own.parent == workdir and SCOPE.match(own.name) and own.name.startswith("run-")
    assert got == own / first / "k.csv" and names_in(own / first) == ["k.csv"]
    assert not (workdir / first).exists()


async def test_run_sql_params_are_checked_after_binding(client, settings, bucket, pg):
    # job_id is bound to the file's size, an integer: check cannot know, the tool refuses
    run_sql = {"tool": "warehouse.run_sql",
               "args": {"statement": "set_job_state",
                        "params": {"job_id": "${size}", "state": "requested"}}}
    async with running_worker(client, settings) as h:
        rep = await h.run(fetch_then(bucket, run_sql, f"{unique('conf-sql')}/k.csv"))
    assert rep.failure is not None and rep.failure.code == "bad_arguments"
    assert "params.job_id" in rep.failure.detail and "valid string" in rep.failure.detail
    assert (await scheduled(client, rep.run_id))["warehouse.run_sql"] == 1
    cur = await pg.execute("SELECT count(*) FROM plangate.jobs WHERE job_id = '5'")
    assert (await cur.fetchone())[0] == 0  # no statement ran


async def test_probe_arguments_that_do_not_fit_after_binding_fail_at_once(client, settings,
                                                                          bucket, pg):
    # the pre condition's job_id is bound to an integer: asking again cannot change that
    run_sql = {"tool": "warehouse.run_sql", "args": {"statement": "select_one"},
               "pre": [{"probe": "job_state", "job_id": "${size}", "want": "done"}]}
    async with running_worker(client, settings) as h:
        rep = await h.run(fetch_then(bucket, run_sql, f"{unique('conf-probe')}/k.csv"))
    assert rep.failure is not None and rep.failure.code == "bad_arguments"
    assert rep.failure.step == 2 and "job_id" in rep.failure.detail
    probes = (await attempts(client, rep.run_id))["probe.evaluate"]
    assert probes[-1] == 1  # not retried as if the probe were merely unavailable
    assert (await scheduled(client, rep.run_id)).get("warehouse.run_sql", 0) == 0


async def test_local_file_nonempty_holds_only_for_a_regular_file(settings):
    world = World(settings.world)
    a_dir, a_file = unique("a-dir"), unique("a-file")
    scope = run_scope(unique("wf"), "0" * 16)
    (settings.world.workdir / scope / a_dir).mkdir(parents=True)
    (settings.world.workdir / scope / a_file).write_text("x")
    ctx = ProbeContext(tool="s3.get", args={}, files=RunFiles(world.files, scope))
    on_dir = await local_file_nonempty(FileArgs(path=a_dir), world, ctx)
    on_workdir = await local_file_nonempty(FileArgs(path="."), world, ctx)
    on_file = await local_file_nonempty(FileArgs(path=a_file), world, ctx)
    assert not on_dir.holds and on_dir.detail == f"{a_dir} is a directory, not a file"
    assert not on_workdir.holds
    assert on_file.holds and on_file.observed == {"size": 1}
