"""Files a plan passes from one step to the next (a download, then a load of it).

Each run has files of its own (a *scope*, ``world.scopes``: a directory named by a digest the
worker derives from Temporal's word, never from the call's): no run, and no read answered
without one, reads or writes another's. A step may run on any worker. With one machine, a run's
files live in its directory under the work directory, ``<workdir>/<scope>/`` (``LocalFiles``,
the default). With many workers that share no disk, they live in the object store under
``prefix/<scope>/`` (``SharedFiles``: ``PLANGATE_ARTIFACTS=s3://bucket/prefix``), so the step
that reads a file, and the probe that checks it, find what the step that wrote it left,
whichever worker each runs on. The work directory is then only scratch space.

Paths are the plan's own: relative to the run's directory and confined to it (``world.paths``)
in both modes. A tool or probe sees only ``RunFiles``, its call's scope bound. The functions here
block: call them in a thread.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from plangate.world.paths import NotAFile, confine, confine_file
from plangate.world.runfiles import FileInfo
from plangate.world.scopes import checked

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

DIGEST_META = "sha256"  # object metadata of an artifact: the SHA-256 of its content

__all__ = ["FileInfo", "LocalFiles", "SharedFiles"]


def _written(dest_dir: Path, name: str, chunks: Iterable[bytes]) -> tuple[Path, int, str]:
    """``chunks`` in a uniquely named temporary file in ``dest_dir``: concurrent attempts never
    share one. Returns the file, its size and SHA-256; removes it if writing fails."""
    dest_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest_dir, prefix=f".{name}.", suffix=".part")
    h, size = hashlib.sha256(), 0
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
                h.update(chunk)
                size += len(chunk)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return Path(tmp), size, h.hexdigest()


class LocalFiles:
    """One machine: a run's files are its directory's, ``<workdir>/<scope>/``."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir

    def root(self, scope: str) -> Path:
        return self.workdir / checked(scope)

    def check(self, scope: str, path: str) -> None:
        confine_file(self.root(scope), path)

    def write(self, scope: str, path: str, chunks: Iterable[bytes]) -> FileInfo:
        dest = confine_file(self.root(scope), path)
        tmp, size, digest = _written(dest.parent, dest.name, chunks)
        try:
            os.replace(tmp, dest)  # never a half-written file under the real name
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return FileInfo(size, digest, str(dest))

    def read(self, scope: str, path: str) -> bytes:
        return confine_file(self.root(scope), path).read_bytes()

    def size(self, scope: str, path: str) -> int | None:
        try:
            st = confine(self.root(scope), path).stat()
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise NotAFile(f"{path} is {kind}, not a file")
        return st.st_size

    def sha256(self, scope: str, path: str) -> str | None:
        full = confine(self.root(scope), path)
        if not full.is_file():
            return None
        h = hashlib.sha256()
        with full.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()

    def discard(self, scope: str) -> None:
        shutil.rmtree(self.root(scope), ignore_errors=True)


class SharedFiles:
    """Many workers: the run's files are objects under ``prefix/<scope>/`` in ``bucket``,
    each with the SHA-256 of its content in its metadata. An object appears whole or not at
    all, so a reader on another worker never sees half a file."""

    def __init__(
        self, workdir: Path, s3: Callable[[], S3Client], bucket: str, prefix: str
    ) -> None:
        self.workdir, self._s3, self.bucket = workdir, s3, bucket
        self.prefix = prefix.strip("/")

    def key(self, scope: str, path: str) -> str:
        root = self.workdir / checked(scope)  # where the path is judged, as on one machine
        rel = confine(root, path).relative_to(root.resolve()).as_posix()
        return "/".join(p for p in (self.prefix, scope, rel) if p)

    def check(self, scope: str, path: str) -> None:
        confine_file(self.workdir / checked(scope), path)

    def where(self, scope: str, path: str) -> str:
        return f"s3://{self.bucket}/{self.key(scope, path)}"

    def write(self, scope: str, path: str, chunks: Iterable[bytes]) -> FileInfo:
        key = self.key(scope, path)
        scratch = self.workdir / ".artifacts"
        tmp, size, digest = _written(scratch, Path(key).name, chunks)
        try:
            self._s3().upload_file(
                str(tmp), self.bucket, key, ExtraArgs={"Metadata": {DIGEST_META: digest}}
            )
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        return FileInfo(size, digest, f"s3://{self.bucket}/{key}", local=False)

    def read(self, scope: str, path: str) -> bytes:
        try:
            obj = self._s3().get_object(Bucket=self.bucket, Key=self.key(scope, path))
        except ClientError as e:
            if _status(e) == 404:
                raise FileNotFoundError(path) from e
            raise
        return obj["Body"].read()

    def _head(self, scope: str, path: str) -> dict[str, object] | None:
        try:
            head = self._s3().head_object(Bucket=self.bucket, Key=self.key(scope, path))
        except ClientError as e:
            if _status(e) == 404:
                return None
            raise
        return dict(head)

    def size(self, scope: str, path: str) -> int | None:
        head = self._head(scope, path)
        return None if head is None else int(str(head.get("ContentLength", 0)))

    def sha256(self, scope: str, path: str) -> str | None:
        head = self._head(scope, path)
        if head is None:
            return None
        meta = head.get("Metadata")
        digest = meta.get(DIGEST_META) if isinstance(meta, dict) else None
        if not isinstance(digest, str):
            # not written by plangate: no digest to trust, so no answer (never a pass)
            raise ValueError(f"{self.where(scope, path)} carries no {DIGEST_META} digest")
        return digest


    def discard(self, scope: str) -> None:
        s3, prefix = self._s3(), "/".join(p for p in (self.prefix, checked(scope)) if p) + "/"
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket,
                                                                 Prefix=prefix):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if keys:
                s3.delete_objects(Bucket=self.bucket, Delete={"Objects": keys})  # type: ignore[typeddict-item]


def _status(e: ClientError) -> int:
    return int(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
