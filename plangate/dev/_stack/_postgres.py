"""A real PostgreSQL server on ``HOST:port``, run with ``initdb``/``pg_ctl``.

The binaries come from the ``pgserver`` wheel (PostgreSQL 16) when it is installed, else from the
machine (``/usr/lib/postgresql/*/bin`` or PATH). We drive them ourselves rather than through
``pgserver.get_server`` so that the server listens on TCP at a port we choose, stops when we say so
(no ``atexit`` hooks, no per-user lock files) and the same code serves both sources of binaries.

PostgreSQL refuses to run as root. When we are root, the server runs as an unprivileged system
user (``postgres`` or ``pgserver`` if one exists, else a ``pgserver`` user is created with
``useradd``), owns the data directory, and every ancestor directory of the data and binaries gets
the world-execute (traverse) bit so that user can reach them.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import shutil
import stat
import subprocess
from pathlib import Path

from . import HOST, PortTaken, StackError, log_tail

SUPERUSER = "postgres"
# what the postmaster logs when its port is taken (initdb --locale=C: messages in English)
_BIND_FAILED = "Address already in use"
DATABASE = "postgres"
_RUN_AS_CANDIDATES = ("postgres", "pgserver")


def find_bin_dir() -> Path:
    """The directory holding ``initdb``, ``pg_ctl`` and ``postgres``."""
    candidates: list[Path] = []
    spec = importlib.util.find_spec("pgserver")  # locate the wheel without importing it
    if spec is not None and spec.origin is not None:
        candidates.append(Path(spec.origin).parent / "pginstall" / "bin")
    system = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
        reverse=True,
    )
    candidates += system
    on_path = shutil.which("pg_ctl")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    for c in candidates:
        if all((c / exe).is_file() for exe in ("initdb", "pg_ctl", "postgres")):
            return c
    raise StackError(
        "no PostgreSQL binaries found: install the `pgserver` wheel or PostgreSQL "
        "(looked in: " + ", ".join(map(str, candidates)) + ")"
    )


class PostgresServer:
    """``postgres`` with its data in ``data_dir``, listening on ``HOST:port`` only (no socket)."""

    def __init__(self, *, data_dir: Path, port: int, log_file: Path) -> None:
        self.data_dir = data_dir.resolve()
        self.port = port
        self.log_file = log_file.resolve()
        self.bin_dir = find_bin_dir()
        self._user = _run_as_user()
        # as root: the user's uid and gid, and no supplementary groups (root's group would
        # otherwise decide access to root-owned directories with group bits)
        pw = None if self._user is None else pwd.getpwnam(self._user)
        self._uid = None if pw is None else pw.pw_uid
        self._gid = None if pw is None else pw.pw_gid
        self._groups: list[int] | None = None if pw is None else []
        self._started = False

    @property
    def url(self) -> str:
        return f"postgresql://{SUPERUSER}@{HOST}:{self.port}/{DATABASE}"

    def start(self) -> None:
        self._prepare_dirs()
        if not (self.data_dir / "PG_VERSION").exists():
            self._run(
                "initdb",
                "-D", str(self.data_dir),
                "-U", SUPERUSER,
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            )  # fmt: skip
        elif self._is_running():
            # left over from a process that died without stopping it: restart on our port
            self._run("pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w", "stop")
        options = f"-c listen_addresses={HOST} -p {self.port} -c unix_socket_directories=''"
        logged = self.log_file.stat().st_size  # what this start writes to the log follows
        try:
            self._run(
                "pg_ctl",
                "-D", str(self.data_dir),
                "-l", str(self.log_file),
                "-o", options,
                "-w", "-t", "60",
                "start",
            )  # fmt: skip
        except StackError as e:
            if _BIND_FAILED in _read_from(self.log_file, logged):
                raise PortTaken("Postgres", self.port) from e
            raise StackError(f"{e}\n{log_tail(self.log_file)}") from e
        self._started = True

    def stop(self) -> None:
        if not self._started:
            return
        self._started = False
        try:
            self._run("pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w", "-t", "30", "stop")
        except StackError:
            if self._is_running():
                raise

    def _is_running(self) -> bool:
        pg_ctl = str(self.bin_dir / "pg_ctl")
        status = subprocess.run(
            [pg_ctl, "-D", str(self.data_dir), "status"],
            capture_output=True,
            user=self._uid,
            group=self._gid,
            extra_groups=self._groups,
        )
        return status.returncode == 0

    def _run(self, exe: str, *args: str) -> None:
        cmd = [str(self.bin_dir / exe), *args]
        proc = subprocess.run(
            cmd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            start_new_session=True,  # the server must not get the terminal's Ctrl-C
            user=self._uid,
            group=self._gid,
            extra_groups=self._groups,
        )
        if proc.returncode != 0:
            raise StackError(
                f"`{' '.join(cmd)}` failed with code {proc.returncode}: "
                f"{(proc.stderr or proc.stdout).strip()}"
            )

    def _prepare_dirs(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_file.touch()
        if self._uid is None or self._gid is None:
            self.data_dir.chmod(0o700)
            return
        for path in (self.data_dir, self.log_file):
            os.chown(path, self._uid, self._gid)
        self.data_dir.chmod(0o700)
        for path in (self.data_dir, self.log_file, self.bin_dir):
            _allow_traverse(path.parent)


def _read_from(path: Path, offset: int) -> str:
    try:
        with path.open("rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _run_as_user() -> str | None:
    """None when we may run postgres ourselves; else the unprivileged user to run it as."""
    if os.geteuid() != 0:
        return None
    for name in _RUN_AS_CANDIDATES:
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    try:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "pgserver"],
            check=True,
            capture_output=True,
        )
    except (OSError, subprocess.CalledProcessError) as e:
        raise StackError(
            "running as root, PostgreSQL needs an unprivileged user and `useradd pgserver` "
            f"failed: {e}"
        ) from e
    return "pgserver"


def _allow_traverse(directory: Path) -> None:
    """Add o+x to ``directory`` and each of its ancestors that lacks it."""
    for d in (directory, *directory.parents):
        mode = d.stat().st_mode
        if not mode & stat.S_IXOTH:
            d.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)
