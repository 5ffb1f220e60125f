"""Every protocol version the SDK serves, with and without the Tasks extension (issue 35): the
official client on each (the handshake versions offered as an older client offers them, the
2026 one adopted), a money call that waits for a person answered in a shape that client takes
(a task only on a 2026 connection that declared the extension; the pending run otherwise,
never JSON-RPC -32603), and no orphan: every run Temporal holds has its id in an answer."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import mcp.client.session as client_session
from mcp_types import CallToolResult
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from plangate import __version__
from plangate.client.api import Plangate
from plangate.testing import running_worker
from tests.mcp_client import TASKS, TaskCreated, call_as_task, http_server, server_env
from tests.test_mcp_guarded import CREDIT, SERVED_CREDIT, account, credits, money_waits
from tests.test_mcp_identity import runs_on

VERSIONS = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)


@contextlib.contextmanager
def offering(version: str) -> Iterator[str]:
    """The official client's mode for ``version``: the 2026 one found by its probe
    (``server/discover``, as the client does by default); a handshake version is what its
    ``initialize`` offers (the SDK offers its newest, as an older client offers its own)."""
    if version in MODERN_PROTOCOL_VERSIONS:
        yield "auto"
        return
    newest = getattr(client_session, "LATEST_HANDSHAKE_VERSION")  # noqa: B009
    setattr(client_session, "LATEST_HANDSHAKE_VERSION", version)  # noqa: B010
    try:
        yield "legacy"
    finally:
        setattr(client_session, "LATEST_HANDSHAKE_VERSION", newest)  # noqa: B010


async def test_a_waiting_call_on_every_protocol_version_names_its_run(
    client, settings, stack, pg, world
):
    aid = await account(world)
    answered: dict[tuple[str, bool], str] = {}
    async with running_worker(client, money_waits(settings)) as h:
        queue = h.settings.temporal.task_queue
        async with http_server(server_env(stack, settings, queue)) as srv:
            for version in VERSIONS:
                for tasks in (False, True):
                    args = {"account_id": aid, "amount_eur": float(len(answered) + 1)}
                    with offering(version) as mode:
                        async with srv.client(tasks=tasks, mode=mode) as mcp:
                            assert mcp.protocol_version == version
                            assert mcp.server_info is not None
                            assert (mcp.server_info.name, mcp.server_info.version) == (
                                "plangate", __version__)
                            extensions = mcp.server_capabilities.extensions or {}
                            modern = version in MODERN_PROTOCOL_VERSIONS
                            assert (TASKS in extensions) == modern, (version, extensions)
                            got = await call_as_task(mcp, SERVED_CREDIT, args,
                                                     f"req-{uuid.uuid4().hex[:8]}")
                    where = (version, tasks)
                    if modern and tasks:
                        assert isinstance(got, TaskCreated), where
                        assert got.status == "input_required", where
                        answered[where] = got.task_id
                        continue
                    assert isinstance(got, CallToolResult) and not got.is_error, where
                    out: dict[str, Any] | None = got.structured_content
                    assert out is not None and out["status"] == "awaiting_approval", where
                    assert (out["awaiting"]["tool"], out["awaiting"]["args"]) == (CREDIT, args)
                    assert out["run_id"] in " ".join(getattr(c, "text", "") for c in got.content)
                    answered[where] = out["run_id"]
        held = await runs_on(client, queue, len(answered))
        api = Plangate(client, h.settings)
        for run_id in held:
            await api.cancel(run_id, reason="test over")
    assert len(set(answered.values())) == 2 * len(VERSIONS)
    assert set(held) == set(answered.values())  # no run without its id in an answer
    assert await credits(pg, aid) == 0
