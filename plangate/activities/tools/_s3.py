"""What the S3 tools do (declared in ``plangate.activities.tools.s3``)."""

from __future__ import annotations

import asyncio
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import JsonValue

from plangate.activities.tools.registry import CallContext
from plangate.activities.tools.s3 import GetArgs, PutArgs
from plangate.world.clients import World
from plangate.world.errors import ToolError
from plangate.world.s3errors import to_tool_error


async def s3_get(args: GetArgs, world: World, call: CallContext) -> dict[str, JsonValue]:
    def fetch() -> dict[str, Any]:
        call.files.check(args.dest)  # a file of the run's directory, or bad_arguments: unread
        extra = {"IfMatch": args.if_match} if args.if_match else {}
        obj = world.s3.get_object(Bucket=args.bucket, Key=args.key, **extra)  # type: ignore[arg-type]
        # the run's file, whole or not at all (world.files): in the run's own directory, or,
        # when workers share no disk, in the run's artifact prefix where any worker finds it
        info = call.files.write(args.dest, obj["Body"].iter_chunks(1 << 20))
        return {"etag": obj["ETag"], "size": info.size, "sha256": info.sha256,
                "dest": info.where if info.local else args.dest, "stored": info.where}

    try:
        return await asyncio.to_thread(fetch)
    except (ClientError, BotoCoreError) as e:
        raise to_tool_error(e, f"s3://{args.bucket}/{args.key}") from e


async def s3_put(args: PutArgs, world: World, call: CallContext) -> dict[str, JsonValue]:
    def put() -> dict[str, Any]:
        if args.source is not None:
            body = call.files.read(args.source)
        else:
            body = (args.body or "").encode()
        extra: dict[str, str] = {}
        if args.if_match:
            extra["IfMatch"] = args.if_match
        if args.if_none_match:
            extra["IfNoneMatch"] = args.if_none_match
        out = world.s3.put_object(Bucket=args.bucket, Key=args.key, Body=body, **extra)  # type: ignore[arg-type]
        return {"etag": out["ETag"], "size": len(body)}

    try:
        return await asyncio.to_thread(put)
    except FileNotFoundError as e:
        raise ToolError("not_found", f"source file {args.source}") from e
    except (ClientError, BotoCoreError) as e:
        raise to_tool_error(e, f"s3://{args.bucket}/{args.key}") from e
