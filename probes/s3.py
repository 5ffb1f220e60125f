"""S3 probes."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from plans.names import BucketName, NonEmpty
from probes.registry import ProbeArgs, ProbeContext, Verdict, probe

if TYPE_CHECKING:
    from activities.world import World


class ObjectArgs(ProbeArgs):
    bucket: BucketName
    key: NonEmpty


@probe("object_exists", ObjectArgs, system="s3")
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
