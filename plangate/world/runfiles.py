"""What a tool or probe sees of its run's files (``world.files`` stores them): the run's scope
bound, so a call names a path and never whose. Free of botocore: the registries import it, and
a client that checks plans never loads botocore."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from plangate.world.scopes import NoScope


@dataclass(frozen=True)
class FileInfo:
    size: int
    sha256: str
    where: str  # the local path or the artifact's s3:// address, for reports
    local: bool = True  # ``where`` is a path on this worker


class Files(Protocol):
    """A run's files, by its ``scope`` (``world.scopes``) and the plan's relative path."""

    def check(self, scope: str, path: str) -> None:
        """``PathOutsideWorkdir`` unless ``path`` names a file the run may write."""
        ...

    def write(self, scope: str, path: str, chunks: Iterable[bytes]) -> FileInfo:
        """Writes ``chunks`` as the run's file ``path``, whole or not at all."""
        ...

    def read(self, scope: str, path: str) -> bytes:
        """The content of the run's file ``path``; ``FileNotFoundError`` if there is none."""
        ...

    def size(self, scope: str, path: str) -> int | None:
        """Its size, None when absent; ``NotAFile`` when the path is a directory."""
        ...

    def sha256(self, scope: str, path: str) -> str | None:
        """The SHA-256 of its content, None when absent."""
        ...

    def discard(self, scope: str) -> None:
        """Every file of ``scope``, removed (a read answered without a run, once answered)."""
        ...


@dataclass
class RunFiles:
    """The files of one call's run: ``store`` with the scope the worker derived bound, so a
    tool or probe names a path and never whose. ``written``: what this call wrote (ledgered as
    local writes, ``activities.workspace``)."""

    store: Files | None
    scope: str
    written: list[tuple[str, FileInfo]] = field(default_factory=list)

    def _store(self) -> Files:
        if self.store is None:
            raise NoScope("this call has no run, so no local files")
        return self.store

    def check(self, path: str) -> None:
        self._store().check(self.scope, path)

    def write(self, path: str, chunks: Iterable[bytes]) -> FileInfo:
        info = self._store().write(self.scope, path, chunks)
        self.written.append((path, info))
        return info

    def read(self, path: str) -> bytes:
        return self._store().read(self.scope, path)

    def size(self, path: str) -> int | None:
        return self._store().size(self.scope, path)

    def sha256(self, path: str) -> str | None:
        return self._store().sha256(self.scope, path)


def no_files() -> RunFiles:
    """A call for no run (a probe's reader): every file operation refused."""
    return RunFiles(None, "")
