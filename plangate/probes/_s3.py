"""What the S3 probes do (declared in ``plangate.probes.s3``)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from plangate.probes.registry import ProbeContext, Verdict
from plangate.probes.s3 import ContentArgs, ObjectArgs

if TYPE_CHECKING:
    from plangate.world.clients import World


def _status(e: ClientError) -> int:
    return int(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


async def _head(world: World, args: ObjectArgs) -> dict[str, Any] | None:
    """The object's HEAD, None when there is no such object; 403 and 5xx raise: the probe
    cannot tell, which is not the same as "absent"."""
    try:
        head = await asyncio.to_thread(world.s3.head_object, Bucket=args.bucket, Key=args.key)
    except ClientError as e:
        if _status(e) == 404:
            return None
        raise
    return dict(head)


async def object_exists(args: ObjectArgs, world: World, ctx: ProbeContext) -> Verdict:
    head = await _head(world, args)
    if head is None:
        return Verdict(False, None, f"s3://{args.bucket}/{args.key} does not exist")
    size = int(head.get("ContentLength", 0))
    observed = {"etag": head.get("ETag"), "size": size}
    if size <= 0:
        return Verdict(False, observed, f"s3://{args.bucket}/{args.key} is empty")
    return Verdict(True, observed)


async def object_version(args: ObjectArgs, world: World, ctx: ProbeContext) -> Verdict:
    head = await _head(world, args)
    if head is None:
        return Verdict(True, {"absent": True})
    return Verdict(True, {"etag": head.get("ETag"), "size": int(head.get("ContentLength", 0))})


async def object_content_equals(args: ContentArgs, world: World, ctx: ProbeContext) -> Verdict:
    if args.body is not None:
        want = args.body.encode()
    else:
        want = await asyncio.to_thread(ctx.files.read, args.source or "")

    def read() -> tuple[bytes, str]:
        obj = world.s3.get_object(Bucket=args.bucket, Key=args.key)
        return obj["Body"].read(), str(obj.get("ETag"))

    try:
        have, etag = await asyncio.to_thread(read)
    except ClientError as e:
        if _status(e) == 404:
            return Verdict(False, None, f"s3://{args.bucket}/{args.key} does not exist")
        raise
    observed = {"etag": etag, "size": len(have)}
    if have != want:
        return Verdict(False, observed, f"s3://{args.bucket}/{args.key} holds other content")
    return Verdict(True, observed)
