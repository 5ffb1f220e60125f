"""An S3-compatible HTTP server: moto's server app, served from a thread of this process.

This is what ``moto.server.ThreadedMotoServer`` does, except that the socket is bound in the
caller's thread, so a taken port raises :class:`PortTaken` here instead of hanging ``start()``,
and port 0 has the OS pick a free port as it binds: no race. Its state lives in this process's
memory and ends with ``stop``.
"""

from __future__ import annotations

import errno
import threading
from typing import Any

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
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
