"""The object a card's call acts on, in words (the page's cards and the notices both say it);
imports no web framework."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_TARGETS = ("target", "table", "account_id", "invoice_id", "sub_id", "ticket_id", "to")


def target(args: Mapping[str, Any]) -> str | None:
    """The object a call acts on, where its arguments name one plainly."""
    bucket, key = args.get("bucket"), args.get("key")
    if isinstance(bucket, str) and isinstance(key, str):
        return f"s3://{bucket}/{key}"
    return next((args[n] for n in _TARGETS if isinstance(args.get(n), str)), None)
