"""The demo systems, as an extension (``activities.extensions``): the billing, CRM and e-mail
tools of the churn close-out (seed 001) and their tables in schema ``demo``
(``plangate.demo.schema``).

Registered only where they are turned on (``PLANGATE_DEMO_SYSTEMS``; ``plangate dev`` and
``plangate demo`` turn it on): elsewhere a worker has none of these tools, ``plangate check``
refuses them as unknown, the re-planner is not offered them and schema ``demo`` is never
created.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from plangate.demo import billing, crm, email
from plangate.demo.schema import ensure_demo_schema

if TYPE_CHECKING:
    from plangate.activities.extensions import Registry

SCHEMA = "demo"


def register(registry: Registry) -> None:
    registry.add_tools(billing, crm, email)
    registry.add_schema(SCHEMA, ensure_demo_schema)
