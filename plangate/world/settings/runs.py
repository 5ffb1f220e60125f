"""The deployment's limits on every run (``RunSettings``): the most its history holds before it
continues as new, and how long a step waits for a system that does not answer. A client puts
its own in the run's input; the worker's guards (``guard.resolve``) hand the workflow the
worker's, and the run takes the smaller of each: an input (anyone's raw start) may ask for
less, never more. Neither exceeds what plangate allows at all (``plans.limits``). And how long
a tool's call may go without a heartbeat (``PLANGATE_TOOL_HEARTBEAT_TIMEOUT``): the worker's
alone, never the input's (it is not a limit a start could shorten)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from plangate.errors import ConfigurationError
from plangate.plans.limits import (
    MAX_HISTORY_BYTES,
    MAX_HISTORY_EVENTS,
    MAX_OUTAGE_PATIENCE_S,
    MAX_TOOL_HEARTBEAT_S,
    MIN_TOOL_HEARTBEAT_S,
    TOOL_HEARTBEAT_S,
)
from plangate.world.settings.parse import at_least, duration


def _at_most(name: str, value: float, most: float, shown: str) -> float:
    if value > most:
        raise ConfigurationError(f"{name} must be at most {shown}, not {value:,.0f}")
    return value


@dataclass(frozen=True)
class RunSettings:
    # the most a run's history holds before it continues as new (records.run.HistoryBound)
    history_events: int = 10_240
    history_bytes: int = 10 * 1024 * 1024
    # how long a step waits for a system that does not answer before it halts
    outage_patience_s: float = 900.0
    # how long a tool activity may go without a heartbeat before Temporal takes it for lost
    # and tries it again (or, once-only effects, ends the call unknown: records.options)
    tool_heartbeat_s: float = TOOL_HEARTBEAT_S

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> RunSettings:
        events = at_least(env, "PLANGATE_HISTORY_EVENTS", cls.history_events, 200)
        size = at_least(env, "PLANGATE_HISTORY_BYTES", cls.history_bytes, 65_536)
        patience = duration(env, "PLANGATE_OUTAGE_PATIENCE", "15m")
        # Temporal ends a run at 51,200 events or 50 MiB; a wait is at most 7 days
        _at_most("PLANGATE_HISTORY_EVENTS", events, MAX_HISTORY_EVENTS, f"{MAX_HISTORY_EVENTS:,}")
        _at_most("PLANGATE_HISTORY_BYTES", size, MAX_HISTORY_BYTES, f"{MAX_HISTORY_BYTES:,}")
        _at_most("PLANGATE_OUTAGE_PATIENCE", patience, MAX_OUTAGE_PATIENCE_S, "7d")
        beat = duration(env, "PLANGATE_TOOL_HEARTBEAT_TIMEOUT", "30s")
        if not MIN_TOOL_HEARTBEAT_S <= beat <= MAX_TOOL_HEARTBEAT_S:
            raise ConfigurationError(
                f"PLANGATE_TOOL_HEARTBEAT_TIMEOUT must be between 5s and 10m, not {beat:g}s"
            )
        return cls(history_events=events, history_bytes=size, outage_patience_s=patience,
                   tool_heartbeat_s=beat)
