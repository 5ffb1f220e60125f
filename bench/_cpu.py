"""CPU time by process of an embedded stack: this process (client, worker and activities), the
Temporal server and Postgres (its postmaster and every backend), each found by the port it
listens on. What a benchmark uses to say where a step's time goes, not only how long it took."""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

import psutil

THIS = "this process"
TEMPORAL = "Temporal server"
POSTGRES = "Postgres"


def _listening(port: int) -> psutil.Process | None:
    for c in psutil.net_connections(kind="tcp"):
        if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid:
            return psutil.Process(c.pid)
    return None


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


class StackCpu:
    """``seconds()``: CPU seconds (user + system) each part has used so far."""

    def __init__(self, temporal_address: str, database_url: str) -> None:
        self.temporal = _listening(_port(temporal_address))
        self.postgres = _listening(urlsplit(database_url).port or 5432)

    def _parts(self) -> dict[str, Iterable[psutil.Process]]:
        pg = [self.postgres, *self.postgres.children(recursive=True)] if self.postgres else []
        return {THIS: [psutil.Process()], TEMPORAL: [self.temporal] if self.temporal else [],
                POSTGRES: pg}

    def seconds(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, procs in self._parts().items():
            total = 0.0
            for p in procs:
                try:
                    t = p.cpu_times()
                except psutil.Error:  # a backend gone meanwhile: its time is lost
                    continue
                total += t.user + t.system
            out[name] = total
        return out
