"""The tickets service over HTTP: one ``httpx2.AsyncClient`` per worker (kept by the world and
closed with it), the service's answers mapped to plangate's error codes.

``TICKETS_URL`` (read at each call) says where the service is.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import quote

import httpx2
from pydantic import JsonValue

from plangate import ToolError, World

URL_VAR = "TICKETS_URL"
# plangate owns retries (the activity's retry policy): the client fails fast and says so
TIMEOUT = httpx2.Timeout(10.0, connect=3.0)

# status -> (code, what it means here); anything else is "internal": nobody knows what happened
_CODES = {
    400: "bad_arguments",
    403: "authority_revoked",
    404: "not_found",
    409: "resource_moved",
    412: "precondition_failed",
    422: "idempotency_conflict",
    429: "throttled",
}


def _client(world: World) -> httpx2.AsyncClient:
    return world.client("tickets", lambda: httpx2.AsyncClient(timeout=TIMEOUT))


def _url(ticket_id: str) -> str:
    base = os.environ.get(URL_VAR)
    if not base:
        raise ToolError("unavailable", f"{URL_VAR} is not set: where is the tickets service?")
    return f"{base.rstrip('/')}/tickets/{quote(ticket_id, safe='')}"


async def call(
    world: World,
    method: str,
    ticket_id: str,
    body: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The ticket the service answers with; ``ToolError`` for any other answer, or none."""
    url = _url(ticket_id)
    try:
        resp = await _client(world).request(method, url, json=body, headers=headers)
    except httpx2.TransportError as e:  # refused, reset, timed out: it did not answer
        raise ToolError("unavailable", f"tickets service {url}: {type(e).__name__}: {e}") from e
    try:
        answer = resp.json()
    except ValueError:
        answer = None
    if resp.status_code == 200 and isinstance(answer, dict):
        return answer
    why = answer.get("error", "") if isinstance(answer, dict) else resp.text[:200]
    detail = f"{method} {url}: {resp.status_code} {why}".strip()
    data: dict[str, JsonValue] = {"ticket_id": ticket_id, "status": resp.status_code}
    if isinstance(answer, dict) and "etag" in answer:
        data["etag"] = answer["etag"]  # a 412 tells where the ticket is now
    if resp.status_code >= 500:
        raise ToolError("unavailable", detail, data)
    raise ToolError(_CODES.get(resp.status_code, "internal"), detail, data)
