"""Path confinement: every local path a plan names resolves inside one directory: the run's own
under the work directory (``world.files``), or the work directory where a plan is checked."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from plangate.plans import limits
from plangate.plans.load import shown


class PathOutsideWorkdir(ValueError):
    """A path argument that leaves the work directory, or (``confine_file``) names no file in
    it. A tool that meets one at run time fails with ``bad_arguments``, having written nothing."""


class NotAFile(ValueError):
    """The path names something that is not a regular file (a directory)."""


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def confine(workdir: Path, path: str) -> Path:
    """``path`` resolved under ``workdir``; anything that escapes it is refused, and so is a
    name no file system takes (``plans.limits``: ``MAX_LOCAL_PATH_BYTES``,
    ``MAX_FILE_NAME_BYTES``)."""
    if "\0" in path:
        raise PathOutsideWorkdir(f"{shown(path, 200)} holds a NUL byte, which no file name does")
    if _size(path) > limits.MAX_LOCAL_PATH_BYTES:
        raise PathOutsideWorkdir(
            f"{shown(path)} is {_size(path):,} bytes long; a local path is at most "
            f"{limits.MAX_LOCAL_PATH_BYTES:,} bytes"
        )
    most = limits.MAX_FILE_NAME_BYTES
    long = next((part for part in path.split("/") if _size(part) > most), None)
    if long is not None:
        raise PathOutsideWorkdir(
            f"{shown(path)} holds a name of {_size(long):,} bytes; a file or directory name is "
            f"at most {limits.MAX_FILE_NAME_BYTES} bytes"
        )
    p = Path(path)
    full = (p if p.is_absolute() else workdir / p).resolve()
    if not full.is_relative_to(workdir.resolve()):
        raise PathOutsideWorkdir(f"{path!r} is outside the work directory {workdir}")
    return full


def confine_file(workdir: Path, path: str) -> Path:
    """``path`` as a file strictly inside ``workdir``: never the work directory itself, never a
    directory (an existing one, or a path written as one: ``.``, ``..``, a trailing ``/``).

    What a tool writes goes to this path (or to a temporary file beside it, in the same
    directory), so nothing is written outside the work directory."""
    full = confine(workdir, path)
    last = path.rstrip("/").rsplit("/", 1)[-1]
    if full == workdir.resolve():
        raise PathOutsideWorkdir(f"{path!r} is the work directory itself, not a file in it")
    try:
        directory = full.is_dir()
    except OSError as e:  # a name longer than the file system takes (ENAMETOOLONG)
        why = f"{path!r} is no file name this system takes: {e.strerror}"
        raise PathOutsideWorkdir(why) from None
    if path.endswith("/") or last in (".", "..") or directory:
        raise PathOutsideWorkdir(f"{path!r} is a directory, not a file in the work directory")
    return full


def path_check(workdir: Path) -> Callable[[str], str | None]:
    """What ``plans.checking`` judges a plan's local paths with: this work directory's rule."""

    def problem(path: str) -> str | None:
        try:
            confine_file(workdir, path)
        except PathOutsideWorkdir as e:
            return str(e)
        return None

    return problem
