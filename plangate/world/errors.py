"""Errors a tool raises.

    Exception
    └── ToolError                 a tool call failed; carries code, status, retryable
        (code -> status/retryable comes from records.codes.CODES; an unlisted code is a bug)

Temporal sees a ToolError as an ``ApplicationError`` whose ``type`` is the code, so the
activity's RetryPolicy can name permanent codes in ``non_retryable_error_types``.
"""

from __future__ import annotations

from pydantic import JsonValue

from plangate.errors import PlangateError
from plangate.records.codes import CODES


class ToolError(PlangateError):
    def __init__(self, code: str, detail: str = "", data: JsonValue = None) -> None:
        if code not in CODES:
            raise ValueError(f"unknown tool error code {code!r}; add it to records.codes.CODES")
        super().__init__(f"{code}: {detail}" if detail else code)
        self.code = code
        self.status = CODES[code].status
        self.retryable = CODES[code].retryable
        self.may_have_acted = CODES[code].may_have_acted
        self.detail = detail
        self.data = data
