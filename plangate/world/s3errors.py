"""How an S3 client error maps onto a tool error code."""

from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError

from plangate.world.errors import ToolError


def s3_error_code(e: ClientError) -> str:
    return str(e.response.get("Error", {}).get("Code", ""))


def s3_status(e: ClientError) -> int:
    return int(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


def to_tool_error(e: ClientError | BotoCoreError, what: str) -> ToolError:
    if isinstance(e, BotoCoreError):
        return ToolError("unavailable", f"{what}: {e}")
    code, status = s3_error_code(e), s3_status(e)
    if code in ("NoSuchKey", "NoSuchBucket", "404", "NotFound"):
        return ToolError("not_found", f"{what}: {code}")
    if status == 412 or code == "PreconditionFailed":
        # The version the write carried is no longer the object's: S3 says so with 412, which
        # plangate answers by reading again (re-evaluate), then re-planning, never blindly.
        return ToolError("precondition_failed", f"{what}: {code}")
    if status == 403:
        return ToolError("authority_revoked", f"{what}: {code}")
    if status == 429 or code in ("SlowDown", "ConditionalRequestConflict") or status >= 500:
        return ToolError("unavailable" if status != 429 else "throttled", f"{what}: {code}")
    return ToolError("bad_arguments", f"{what}: {code} ({status})")
