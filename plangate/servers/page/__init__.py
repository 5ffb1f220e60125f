"""``plangate ui``: a small web page of the approval cards waiting across runs (issue 14), on
Starlette and uvicorn (the ``page`` extra: ``pip install 'plangate[page]'``).

The page lists every pending card of the open runs on this deployment's task queue (through
``Plangate.pending_approvals``), each showing what will happen to what, the versions its probes
observed, who the run acts for, the digest and the time left. Approve and Reject post the
card's digest and go through the same Updates as ``plangate approve`` / ``reject``: a card that
changed, expired or was already answered is refused by the workflow, and the page says why.

The rooms: ``options`` (what the command is given; imports no web framework), ``gate`` (login
tokens, throttling), ``sessions`` (random ids held server-side, with an expiry), ``csrf``
(a form only from this site, with its session's token), ``answers`` (what became of them),
``views`` with ``templates/`` and ``static/`` (HTML, CSS, the script), ``app`` (the routes),
``server`` (uvicorn, the headers, the log).
"""

from __future__ import annotations

from collections.abc import Sequence

from plangate.client.api import Plangate
from plangate.records.signing import SigningKey
from plangate.servers.page.options import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    DEFAULT_TEMPORAL_UI,
    SESSION_VAR,
    PageOptions,
    temporal_ui_arg,
    ui_keys,
    ui_options,
)
from plangate.world.settings import TEMPORAL_UI_VAR

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "DEFAULT_TEMPORAL_UI", "SESSION_VAR",
           "TEMPORAL_UI_VAR", "PageOptions", "run_ui", "temporal_ui_arg", "ui_keys",
           "ui_options"]


async def run_ui(api: Plangate, keys: Sequence[SigningKey], host: str, port: int,
                 temporal_ui: str = DEFAULT_TEMPORAL_UI,
                 options: PageOptions | None = None) -> int:
    """Serve the page until interrupted (``server.run_ui``; the web framework loads here, once
    ``ui_options`` has said whether the extra is installed)."""
    from plangate.servers.page import server

    return await server.run_ui(api, keys, host, port, temporal_ui, options)
