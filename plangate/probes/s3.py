"""S3 probes."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError
from pydantic import model_validator

from plangate.plans.names import BucketName, NonEmpty
from plangate.plans.scope import Reads
from plangate.probes.registry import ProbeArgs, ProbeContext, Verdict, probe

if TYPE_CHECKING:
    from plangate.world.clients import World


class ObjectArgs(ProbeArgs):
    bucket: BucketName
    key: NonEmpty


class ContentArgs(ObjectArgs):
    body: str | None = None  # the bytes a write meant to leave, or
    source: NonEmpty | None = None  # the local file they came from

    @model_validator(mode="after")
    def _one(self) -> ContentArgs:
        if (self.body is None) == (self.source is None):
            raise ValueError("give exactly one of body and source")
        return self


BUCKET = (Reads("bucket", "bucket"),)  # scoped like a tool's reads (plans.scope)


@probe("object_exists", ObjectArgs, system="s3", reads=BUCKET)
async def object_exists(args: ObjectArgs, world: World, ctx: ProbeContext) -> Verdict:
    """HEAD the object: it holds when the object is there with size > 0; reports the ETag."""
    try:
        head = await asyncio.to_thread(world.s3.head_object, Bucket=args.bucket, Key=args.key)
    except ClientError as e:
        status = int(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
        if status == 404:
            return Verdict(False, None, f"s3://{args.bucket}/{args.key} does not exist")
        raise  # 403, 5xx: the probe cannot tell, which is not the same as "absent"
    size = int(head.get("ContentLength", 0))
    observed = {"etag": head.get("ETag"), "size": size}
    if size <= 0:
        return Verdict(False, observed, f"s3://{args.bucket}/{args.key} is empty")
    return Verdict(True, observed)


@probe("object_version", ObjectArgs, system="s3", reads=BUCKET)
async def object_version(args: ObjectArgs, world: World, ctx: ProbeContext) -> Verdict:
    """HEAD the object for the version a write should carry: holds whenever S3 can answer;
    observes ``{"etag", "size"}``, or ``{"absent": true}`` when there is no such object."""
    try:
        head = await asyncio.to_thread(world.s3.head_object, Bucket=args.bucket, Key=args.key)
    except ClientError as e:
        status = int(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
        if status == 404:
            return Verdict(True, {"absent": True})
        raise
    return Verdict(True, {"etag": head.get("ETag"), "size": int(head.get("ContentLength", 0))})


@probe("object_content_equals", ContentArgs, system="s3", reads=BUCKET)
async def object_content_equals(args: ContentArgs, world: World, ctx: ProbeContext) -> Verdict:
    """GET the object and compare it with what the write meant to leave there: existence alone
    would let a replacing write be skipped as done."""
    if args.body is not None:
        want = args.body.encode()
    else:
        want = await asyncio.to_thread(world.files.read, ctx.run_id, args.source or "")

    def read() -> tuple[bytes, str]:
        obj = world.s3.get_object(Bucket=args.bucket, Key=args.key)
        return obj["Body"].read(), str(obj.get("ETag"))

    try:
        have, etag = await asyncio.to_thread(read)
    except ClientError as e:
        status = int(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
        if status == 404:
            return Verdict(False, None, f"s3://{args.bucket}/{args.key} does not exist")
        raise
    observed = {"etag": etag, "size": len(have)}
    if have != want:
        return Verdict(False, observed, f"s3://{args.bucket}/{args.key} holds other content")
    return Verdict(True, observed)
