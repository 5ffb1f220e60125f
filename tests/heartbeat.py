"""A tool's heartbeat timeout for the tests that wait it out (a worker killed or paused in the
middle of a call): the deployment's ``PLANGATE_TOOL_HEARTBEAT_TIMEOUT``, 10 s instead of 30.
A tool beats every second, sent at most every 2 s (``worker.assembly``): 10 s still leaves
room for four missed sends on a loaded machine before a live call is taken for lost."""

from __future__ import annotations

from dataclasses import replace

from plangate.world.settings import Settings

BEAT_S = 10.0
BEAT_ENV = {"PLANGATE_TOOL_HEARTBEAT_TIMEOUT": f"{BEAT_S:g}s"}  # a worker process's


def beating(settings: Settings) -> Settings:
    """``settings`` with the short heartbeat timeout (an in-process worker's)."""
    return replace(settings, runs=replace(settings.runs, tool_heartbeat_s=BEAT_S))
