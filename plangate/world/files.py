"""Files a plan passes from one step to the next (a download, then a load of it).

A step may run on any worker. With one machine, the files live in its work directory
(``LocalFiles``, the default). With many workers that share no disk, they live in the object
store under a run-scoped prefix (``SharedFiles``: ``PLANGATE_ARTIFACTS=s3://bucket/prefix``),
so the step that reads a file, and the probe that checks it, find what the step that wrote it
left, whichever worker each runs on. The work directory is then only scratch space.

Paths are the plan's own: relative to the work directory and confined to it
(``world.paths``) in both modes. The functions here block: call them in a thread.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol
from urllib.parse import quote

from botocore.exceptions import ClientError

from plangate.world.paths import NotAFile, confine, confine_file

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

DIGEST_META = "sha256"  # object metadata of an artifact: the SHA-256 of its content


@dataclass(frozen=True)
class FileInfo:
    size: int
    sha256: str
    where: str  # the local path or the artifact's s3:// address, for reports


class Files(Protocol):
    def write(self, run_id: str, path: str, chunks: Iterable[bytes]) -> FileInfo:
        """Writes ``chunks`` as the run's file ``path``, whole or not at all."""
        ...

    def read(self, run_id: str, path: str) -> bytes:
        """The content of the run's file ``path``; ``FileNotFoundError`` if there is none."""
        ...

    def size(self, run_id: str, path: str) -> int | None:
        """Its size, None when absent; ``NotAFile`` when the path is a directory."""
        ...

    def sha256(self, run_id: str, path: str) -> str | None:
        """The SHA-256 of its content, None when absent."""
        ...


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
    """One machine: the run's files are the work directory's (every run shares it)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir

    def write(self, run_id: str, path: str, chunks: Iterable[bytes]) -> FileInfo:
        dest = confine_file(self.workdir, path)
        tmp, size, digest = _written(dest.parent, dest.name, chunks)
        try:
            os.replace(tmp, dest)  # never a half-written file under the real name
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return FileInfo(size, digest, str(dest))

    def read(self, run_id: str, path: str) -> bytes:
        return confine_file(self.workdir, path).read_bytes()

    def size(self, run_id: str, path: str) -> int | None:
        try:
            st = confine(self.workdir, path).stat()
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise NotAFile(f"{path} is {kind}, not a file")
        return st.st_size

    def sha256(self, run_id: str, path: str) -> str | None:
        full = confine(self.workdir, path)
        if not full.is_file():
            return None
        h = hashlib.sha256()
        with full.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()


class SharedFiles:
    """Many workers: the run's files are objects under ``prefix/<run id>/`` in ``bucket``,
    each with the SHA-256 of its content in its metadata. An object appears whole or not at
    all, so a reader on another worker never sees half a file."""

    def __init__(
        self, workdir: Path, s3: Callable[[], S3Client], bucket: str, prefix: str
    ) -> None:
        self.workdir, self._s3, self.bucket = workdir, s3, bucket
        self.prefix = prefix.strip("/")

    def key(self, run_id: str, path: str) -> str:
        rel = confine(self.workdir, path).relative_to(self.workdir.resolve()).as_posix()
        # a run id may hold "/": one path segment per run, whatever it holds
        return "/".join(p for p in (self.prefix, quote(run_id, safe=""), rel) if p)

    def where(self, run_id: str, path: str) -> str:
        return f"s3://{self.bucket}/{self.key(run_id, path)}"

    def write(self, run_id: str, path: str, chunks: Iterable[bytes]) -> FileInfo:
        key = self.key(run_id, path)
        scratch = self.workdir / ".artifacts"
        tmp, size, digest = _written(scratch, Path(key).name, chunks)
        try:
            self._s3().upload_file(
                str(tmp), self.bucket, key, ExtraArgs={"Metadata": {DIGEST_META: digest}}
            )
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        return FileInfo(size, digest, f"s3://{self.bucket}/{key}")

    def read(self, run_id: str, path: str) -> bytes:
        try:
            obj = self._s3().get_object(Bucket=self.bucket, Key=self.key(run_id, path))
        except ClientError as e:
            if _status(e) == 404:
                raise FileNotFoundError(path) from e
            raise
        return obj["Body"].read()

    def _head(self, run_id: str, path: str) -> dict[str, object] | None:
        try:
            head = self._s3().head_object(Bucket=self.bucket, Key=self.key(run_id, path))
        except ClientError as e:
            if _status(e) == 404:
                return None
            raise
        return dict(head)

    def size(self, run_id: str, path: str) -> int | None:
        head = self._head(run_id, path)
        return None if head is None else int(str(head.get("ContentLength", 0)))

    def sha256(self, run_id: str, path: str) -> str | None:
        head = self._head(run_id, path)
        if head is None:
            return None
        meta = head.get("Metadata")
        digest = meta.get(DIGEST_META) if isinstance(meta, dict) else None
        if not isinstance(digest, str):
            # not written by plangate: no digest to trust, so no answer (never a pass)
            raise ValueError(f"{self.where(run_id, path)} carries no {DIGEST_META} digest")
        return digest


def _status(e: ClientError) -> int:
    return int(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
