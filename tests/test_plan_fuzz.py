"""Plan fuzzing in CI (issue 12, part 2; ``tests/plan_fuzz.py`` says what is drawn and how each
plan is judged): a few hundred drawn plans through ``plangate check`` and the Python API, a few
dozen through ``plangate check`` and ``plangate run`` on a real worker. What fuzzing found is
replayed by ``tests/test_fuzz_corpus.py``. The full run is ``python -m bench.fuzz`` (at least 10,000
examples); ``PLANGATE_FUZZ_CHECKS`` and ``PLANGATE_FUZZ_RUNS`` change the counts here.

Reproducible: derandomized (the same examples on every run and machine), no example database.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given
from hypothesis import settings as hyp_settings

from plangate.dev.stack import environment
from plangate.testing import Harness, running_worker
from plangate.world.clients import World
from plangate.world.settings import Settings
from tests.plan_fuzz import (
    LEFT_OUT,
    REFUSED,
    Document,
    check_then_run,
    documents,
    drawn_runs,
    judge_check,
    seed_world,
)

CHECKS = int(os.environ.get("PLANGATE_FUZZ_CHECKS", "500"))
RUNS = int(os.environ.get("PLANGATE_FUZZ_RUNS", "24"))

_SLOW = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]


@pytest.fixture(scope="module")
def check_env() -> Iterator[tuple[Path, Settings]]:
    """A work directory of its own and the settings ``plangate check`` reads from the
    environment (the demo systems on, as in the whole session)."""
    with (
        tempfile.TemporaryDirectory(prefix="plangate-fuzz-") as tmp,
        environment({"PLANGATE_WORKDIR": str(Path(tmp) / "work")}),
    ):
        yield Path(tmp), Settings.from_env(os.environ)


@hyp_settings(max_examples=CHECKS, deadline=None, derandomize=True, database=None,
              suppress_health_check=_SLOW)
@given(doc=documents())
def test_every_drawn_plan_is_checked_or_refused_by_name(check_env, doc: Document):
    directory, settings = check_env
    with environment({"PLANGATE_WORKDIR": str(settings.world.workdir)}):
        judge_check(doc, directory, settings)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def fuzz_worker(client, settings, stack) -> AsyncIterator[tuple[Harness, dict[str, str]]]:
    """One worker for the run part, the fuzz world seeded, and the environment ``plangate``
    needs to reach it (the stack, the worker's task queue and work directory)."""
    async with running_worker(client, settings) as h:
        world = World(h.settings.world)
        try:
            await seed_world(world)
        finally:
            await world.close()
        env = {**stack.env(), "PLANGATE_TASK_QUEUE": h.settings.temporal.task_queue,
               "PLANGATE_WORKDIR": str(h.settings.world.workdir)}
        yield h, env


async def test_drawn_plans_run_to_an_end_or_are_refused_without_a_workflow(fuzz_worker,
                                                                            tmp_path):
    """Drawn plans through ``plangate check`` and ``plangate run`` (4 at a time): a refused
    one is refused by both alike and no workflow exists for it (so no tool was called); an
    accepted one ends in a final state, its history free of failed workflow tasks and its
    report of internal errors. Both kinds are among them."""
    h, env = fuzz_worker
    drawn = drawn_runs(RUNS)
    gate = asyncio.Semaphore(4)
    ends: list[str] = []

    async def one(i: int, doc: Document, answers: list[bool]) -> None:
        where = tmp_path / f"run-{i}"
        where.mkdir()
        async with gate:
            ends.append(await check_then_run(doc, where, h.client, h.settings, answers))

    with environment(env):
        await asyncio.gather(*(one(i, d, a) for i, (d, a) in enumerate(drawn)))
    print(f"{len(drawn)} drawn: {dict(Counter(ends))}")
    assert REFUSED in ends and set(ends) - {REFUSED, LEFT_OUT}
