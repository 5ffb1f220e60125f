"""plangate's own metrics from activity code: each read of the world (probe, system, outcome)
and each tool call (tool, status).

They go through the activity's metric meter (``activity.metric_meter()``: local activities, as
probes are, included), which carries the labels ``namespace``, ``task_queue`` and
``activity_type``, to the worker's Temporal runtime: on its Prometheus endpoint when the worker
serves one (``PLANGATE_METRICS_ADDRESS``, ``plangate.worker.metrics``), else nowhere. Every
label value is a registered name or a fixed word: never a run id, a key, a bucket or a path.
"""

from __future__ import annotations

import logging

from temporalio import activity

PROBES = "plangate_probes"
TOOL_CALLS = "plangate_tool_calls"
#: the ``probe`` label of a condition no registered probe answers (a plan's own words are not
#: a label: they would have no bound)
UNREGISTERED = "unregistered"

log = logging.getLogger("plangate.metrics")


def probe_read(probe: str, system: str, outcome: str) -> None:
    """One condition read: ``holds``, ``violated`` or ``unknown`` (every attempt of the probe
    activity counts: an unknown answer retried is read again)."""
    _count(PROBES, "conditions read by probes", probe=probe, system=system, outcome=outcome)


def tool_call(tool: str, status: int) -> None:
    """One attempt of a tool: ``status`` 200 when it answered, else its error's HTTP-like
    status (``records.codes``)."""
    _count(TOOL_CALLS, "tool calls (attempts)", tool=tool, status=str(status))


def _count(name: str, description: str, **labels: str) -> None:
    if not activity.in_activity():
        return
    try:
        activity.metric_meter().create_counter(name, description).add(1, labels)
    except Exception:  # a metric never changes what an activity does
        log.warning("metric %s not recorded", name, exc_info=True)
