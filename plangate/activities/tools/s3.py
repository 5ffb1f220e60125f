"""S3 tools: ``s3.get`` (object to a local file) and ``s3.put`` (conditional writes)."""

from __future__ import annotations

import asyncio
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import JsonValue, model_validator

from plangate.activities.tools.registry import CallContext, ToolArgs, tool
from plangate.plans.catalogue import Contract, Term, VersionBinding
from plangate.plans.model import Effect
from plangate.plans.names import BucketName, NonEmpty
from plangate.plans.scope import Reads, Writes
from plangate.world.clients import World
from plangate.world.errors import ToolError
from plangate.world.s3errors import to_tool_error


class GetArgs(ToolArgs):
    bucket: BucketName
    key: NonEmpty
    dest: NonEmpty
    if_match: str | None = None


class PutArgs(ToolArgs):
    bucket: BucketName
    key: NonEmpty
    source: NonEmpty | None = None  # a local file, or
    body: str | None = None  # literal content
    if_match: str | None = None  # the ETag a probe observed
    if_none_match: str | None = None  # "*": only if the key does not exist yet

    @model_validator(mode="after")
    def _one_source(self) -> PutArgs:
        if (self.source is None) == (self.body is None):
            raise ValueError("give exactly one of source and body")
        return self


@tool(
    "s3.get",
    GetArgs,
    Effect.READ,
    Contract(
        pre=(Term("object_exists", {"bucket": "bucket", "key": "key"}),),
        post=(Term("local_file_nonempty", {"path": "dest"}),),
    ),
    reads=(Reads("bucket", "bucket"),),
)
async def s3_get(args: GetArgs, world: World, call: CallContext) -> dict[str, JsonValue]:
    dest = world.file_path(args.dest)  # a file inside the work directory, or bad_arguments

    def fetch() -> dict[str, Any]:
        extra = {"IfMatch": args.if_match} if args.if_match else {}
        obj = world.s3.get_object(Bucket=args.bucket, Key=args.key, **extra)  # type: ignore[arg-type]
        # the run's file, whole or not at all (world.files): in the work directory, or, when
        # workers share no disk, in the run's artifact prefix where any worker finds it
        info = world.files.write(call.run_id, args.dest, obj["Body"].iter_chunks(1 << 20))
        shared = info.where != str(dest)
        return {"etag": obj["ETag"], "size": info.size, "sha256": info.sha256,
                "dest": args.dest if shared else str(dest), "stored": info.where}

    try:
        return await asyncio.to_thread(fetch)
    except (ClientError, BotoCoreError) as e:
        raise to_tool_error(e, f"s3://{args.bucket}/{args.key}") from e


@tool(
    "s3.put",
    PutArgs,
    Effect.WRITE,
    # The content, not mere existence: a replacing write must not be skipped as already done.
    Contract(
        post=(
            Term(
                "object_content_equals",
                {"bucket": "bucket", "key": "key", "body": "body"},
                identifies=True,
            ),
            Term(
                "object_content_equals",
                {"bucket": "bucket", "key": "key", "source": "source"},
                identifies=True,
            ),
        )
    ),
    writes=(Writes("bucket", "bucket"),),
    # the ETag the step's own pre probe saw rides on the write (If-Match; If-None-Match: * for
    # an object that was absent): S3 refuses it with 412 if the object moved in between
    version=VersionBinding(
        "if_match",
        Term("object_version", {"bucket": "bucket", "key": "key"}),
        observed="etag",
        when_absent={"if_none_match": "*"},
        set_by=("if_match", "if_none_match"),
    ),
)
async def s3_put(args: PutArgs, world: World, call: CallContext) -> dict[str, JsonValue]:
    def put() -> dict[str, Any]:
        if args.source is not None:
            body = world.files.read(call.run_id, args.source)
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
