"""S3 tools: ``s3.get`` (object to a local file) and ``s3.put`` (conditional writes). The
declarations are here; what each does is in ``_s3``, imported on its first call: a client that
checks plans never loads botocore."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import JsonValue, model_validator

from plangate.activities.tools.registry import CallContext, ToolArgs, tool
from plangate.plans.catalogue import Contract, Term, VersionBinding
from plangate.plans.model import Effect
from plangate.plans.names import BucketName, NonEmpty
from plangate.plans.scope import Reads, Writes

if TYPE_CHECKING:
    from plangate.world.clients import World


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
    """Downloads the object ``bucket``/``key`` to the local file ``dest`` (in the work
    directory); with ``if_match``, only while the object still has that ETag."""
    from plangate.activities.tools import _s3

    return await _s3.s3_get(args, world, call)


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
    """Writes the object ``bucket``/``key`` from ``body`` (text) or the local file ``source``;
    ``if_none_match`` "*" creates it only if absent, ``if_match`` replaces only that ETag."""
    from plangate.activities.tools import _s3

    return await _s3.s3_put(args, world, call)
