"""plangate_tickets: plangate tools and a probe for a tickets HTTP service (``TICKETS_URL``).

- ``tickets.get(ticket_id)``: read; binds the ``etag`` a later write can be bound to;
- ``tickets.update(ticket_id, status?, assignee?, if_match?)``: write; its post conditions are
  the fields it sets, read back over HTTP through ``tickets.get``;
- ``ticket_status(ticket_id, want)``: a probe.

Loaded by the ``plangate.extensions`` entry point this package installs, or by
``PLANGATE_EXTENSIONS=plangate_tickets``.
"""

from __future__ import annotations

from plangate import Registry
from plangate_tickets import probes, tools


def register(registry: Registry) -> None:
    registry.add_tools(tools)
    registry.add_probes(probes)
