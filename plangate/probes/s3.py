"""S3 probes. The declarations are here; what each does is in ``_s3``, imported on its first
read: a client that checks plans never loads botocore."""

from __future__ import annotations

from typing import TYPE_CHECKING

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
    from plangate.probes import _s3

    return await _s3.object_exists(args, world, ctx)


@probe("object_version", ObjectArgs, system="s3", reads=BUCKET)
async def object_version(args: ObjectArgs, world: World, ctx: ProbeContext) -> Verdict:
    """HEAD the object for the version a write should carry: holds whenever S3 can answer;
    observes ``{"etag", "size"}``, or ``{"absent": true}`` when there is no such object."""
    from plangate.probes import _s3

    return await _s3.object_version(args, world, ctx)


@probe("object_content_equals", ContentArgs, system="s3", reads=BUCKET)
async def object_content_equals(args: ContentArgs, world: World, ctx: ProbeContext) -> Verdict:
    """GET the object and compare it with what the write meant to leave there: existence alone
    would let a replacing write be skipped as done."""
    from plangate.probes import _s3

    return await _s3.object_content_equals(args, world, ctx)
