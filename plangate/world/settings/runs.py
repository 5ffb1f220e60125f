"""What a client gives every run it starts (``RunSettings``): the most its history holds before
it continues as new, and how long a step waits for a system that does not answer. Both travel in
the run's input (``records.run.RunInput``), so the workflow reads them from there, never from
settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from plangate.world.settings.parse import at_least, duration


@dataclass(frozen=True)
class RunSettings:
    # the most a run's history holds before it continues as new (records.run.HistoryBound)
    history_events: int = 10_240
    history_bytes: int = 10 * 1024 * 1024
    # how long a step waits for a system that does not answer before it halts
    outage_patience_s: float = 900.0

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> RunSettings:
        return cls(
            history_events=at_least(env, "PLANGATE_HISTORY_EVENTS", cls.history_events, 200),
            history_bytes=at_least(env, "PLANGATE_HISTORY_BYTES", cls.history_bytes, 65_536),
            outage_patience_s=duration(env, "PLANGATE_OUTAGE_PATIENCE", "15m"),
        )
