"""One embedded stack per state directory: an exclusive ``flock`` on ``<state_dir>/stack.lock``,
held for the life of the stack.

Two stacks on one state directory would run one Postgres data directory (the second restarts it
on its own port) and share Temporal's database. The lock is released by the kernel when its
holder exits, however it exits, so a stale file never blocks a new stack. The file holds its
holder's pid and, once the stack is up, its addresses: what a refused second stack names.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
from pathlib import Path

from . import StackError

LOCK_FILE = "stack.lock"


class StateDirInUse(StackError):
    """Another live process holds the state directory's lock."""

    def __init__(self, state_dir: Path, holder: dict[str, object]) -> None:
        pid = holder.get("pid", "?")
        command = holder.get("command") or "an embedded stack"
        addresses = holder.get("addresses")
        where = (
            ", ".join(f"{k} {v}" for k, v in addresses.items())
            if isinstance(addresses, dict) and addresses
            else "still starting"
        )
        super().__init__(
            f"{state_dir} is in use by {command} (pid {pid}; {where}): stop it, or give this "
            "one another --state-dir"
        )
        self.holder = holder


class StateDirLock:
    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.path = state_dir / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, or raise :class:`StateDirInUse` naming its holder."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read(fd)
            os.close(fd)
            raise StateDirInUse(self.state_dir, holder) from None
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self.describe({})

    def describe(self, addresses: dict[str, str]) -> None:
        """Write who holds the lock (this process) and where its services listen."""
        if self._fd is None:
            return
        holder = {"pid": os.getpid(), "command": _command(), "addresses": addresses}
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, (json.dumps(holder) + "\n").encode(), 0)

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)  # closing the last descriptor releases the flock


def _read(fd: int) -> dict[str, object]:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _command() -> str:
    """``plangate dev`` / ``plangate demo`` when run as the command line, else the program."""
    argv = sys.argv
    name = Path(argv[0]).name if argv and argv[0] else "python"
    words = [a for a in argv[1:] if not a.startswith("-")]
    if name in ("plangate", "__main__.py") and words:
        return f"plangate {words[0]}"
    return name
