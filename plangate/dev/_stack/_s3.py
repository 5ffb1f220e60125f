"""An S3-compatible HTTP server: moto's server app, served from a thread of this process.

This is what ``moto.server.ThreadedMotoServer`` does, except that the socket is bound in the
caller's thread, so a taken port raises :class:`PortTaken` here instead of hanging ``start()``,
and port 0 has the OS pick a free port as it binds: no race. Its state lives in this process's
memory (moto's, one per process) and ends with ``stop``, unless :func:`save` writes it to a file
that :func:`load` reads back in the next process (``plangate dev`` does, across restarts).
"""

from __future__ import annotations

import copyreg
import errno
import io
import os
import pickle
import threading
from pathlib import Path
from typing import Any

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from moto.s3.utils import _VersionedKeyStore
from werkzeug.serving import BaseWSGIServer, make_server

from . import FAKE_CREDENTIALS, HOST, PortTaken, StackError

__all__ = ["FAKE_CREDENTIALS", "S3Server"]


class _QuietHandler(MotoRequestHandler):
    def log_request(self, *args: Any, **kwargs: Any) -> None:  # no access log on stderr
        pass


class S3Server:
    def __init__(self, *, port: int) -> None:
        self.port = port
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self) -> None:
        app = DomainDispatcherApplication(create_backend_app)
        try:
            self._server = make_server(
                HOST, self.port, app, threaded=True, request_handler=_QuietHandler
            )
        except SystemExit as e:  # werkzeug exits on a taken port
            raise PortTaken("S3 server", self.port) from e
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise PortTaken("S3 server", self.port) from e
            raise StackError(f"S3 server cannot listen on {HOST}:{self.port}: {e}") from e
        self.port = self._server.server_port
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="plangate-s3", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None


def save(path: Path) -> int:
    """Write every bucket of this process's S3 (moto's backends: buckets with their objects,
    versions and tags) to ``path``, readable only by its owner; the number of buckets."""
    from moto.s3.models import s3_backends

    buckets = {
        (account, partition): (backend.buckets, backend.tagger)
        for account, partitions in s3_backends.items()
        for partition, backend in partitions.items()
    }
    data = io.BytesIO()
    pickler = pickle.Pickler(data)
    pickler.dispatch_table = {**copyreg.dispatch_table, _VersionedKeyStore: _reduce_keys}
    pickler.dump({"buckets": buckets, "bucket_accounts": dict(s3_backends.bucket_accounts)})
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data.getvalue())
    tmp.replace(path)  # a stop interrupted mid-write leaves the previous file whole
    return sum(len(held) for held, _ in buckets.values())


def load(path: Path) -> int:
    """Put the buckets :func:`save` wrote to ``path`` back into this process's S3 (before the
    server starts); the number of buckets. Raises :class:`StackError` if the file cannot be
    read (e.g. written by another version of moto)."""
    from moto.s3.models import s3_backends

    try:
        # the state directory's own file, written by save(): trusted as its other files are
        state = pickle.loads(path.read_bytes())
        restored = 0
        for (account, partition), (buckets, tagger) in state["buckets"].items():
            backend = s3_backends[account][partition]
            backend.buckets.update(buckets)
            backend.tagger = tagger
            restored += len(buckets)
        s3_backends.bucket_accounts.update(state["bucket_accounts"])
    except Exception as e:
        raise StackError(f"S3 state in {path} cannot be read ({type(e).__name__}: {e})") from e
    return restored


def _reduce_keys(store: _VersionedKeyStore) -> tuple[Any, tuple[Any, ...]]:
    # pickle would go through its items(), which yield each key's latest version only
    return _rebuild_keys, ({key: store.getlist(key) for key in dict.keys(store)},)


def _rebuild_keys(lists: dict[str, list[Any]]) -> _VersionedKeyStore:
    store = _VersionedKeyStore()
    for key, versions in lists.items():
        store.setlist(key, versions)
    return store
