"""The name plangate prints in a command a person pastes (``plangate approve ...``): ``plangate``
where that name, looked up on this process's ``PATH``, is this very plangate (a venv
activated, an install on ``PATH``); else the path of the executable that runs, so that the
line works in a shell that never activated the venv rather than failing ``command not found``
or reaching another install."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import sysconfig
from pathlib import Path

NAME = "plangate"


def plangate_command() -> str:
    """``plangate``, or this plangate's executable by its absolute path (shell-quoted)."""
    here = _running()
    if here is None:
        return NAME
    found = shutil.which(NAME)
    if found is not None and _same(found, here):
        return NAME
    return shlex.quote(str(here))


def _running() -> Path | None:
    """The ``plangate`` script this process runs from: ``sys.argv[0]`` when it is one (as the
    shell was given it, made absolute), else the one installed beside this interpreter."""
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    candidates = [argv0] if argv0 is not None and argv0.name == NAME else []
    candidates.append(Path(sysconfig.get_path("scripts")) / NAME)
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return Path(os.path.abspath(path))
    return None


def _same(a: str, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
