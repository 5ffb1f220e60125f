"""Every error plangate raises to its caller shares one root, ``PlangateError``; each keeps the
built-in base it had, so ``except ValueError`` still catches what it caught.

    PlangateError
    ├── PlanError                  a plan no check passes; ``.problems`` names each
    │                              (step and field)                        plans.load
    ├── ConfigurationError         settings that cannot be used: the variable named
    │   ├── KeyProblem             a signing key or key list that cannot be used
    │   │                                                                  records.signing
    │   ├── MetricsError           no Prometheus endpoint at that address  worker.metrics
    │   ├── TracingUnavailable     traces asked for, the exporter missing  worker.tracing
    │   ├── PoliciesUnusable       PLANGATE_POLICIES unusable; PolicyFileError: each file's
    │   │                          problem at FILE:LINE:COLUMN             world.policies
    │   └── CodecServerRefused     a codec server that would hold keys open
    │                                                                      servers.codec
    ├── ServiceUnreachable         Temporal, Postgres or S3 did not answer (or let us in)
    ├── SchemaNotReady             plangate's tables are not there for this role
    │                                                                      activities.bootstrap
    ├── ExtensionError             an extension that cannot load, or clashes
    │                                                                      activities.extensions
    ├── StackError                 an embedded service would not start or stop
    │                                                                      dev._stack
    ├── PlanningUnavailable        the model for a first plan gave no answer
    │   └── NoModel                ... or none is configured (a ConfigurationError too)
    │                                                                      replanner.planner
    ├── DecryptionError            a payload that does not decrypt with these keys
    │                                                                      worker.encryption
    ├── RunError                   about one run, by its id                client.errors
    │   ├── UnknownRun             no such run in the namespace
    │   ├── RunIdInUse             a run with that id is running
    │   ├── RunEnded               it has ended: nothing to cancel or answer
    │   ├── AnswerRefused          the run refused an answer to its card (why, in the message)
    │   ├── NoWorkerAnswered       no worker answered the run's report query in time
    │   └── SearchAttributesMissing  runs cannot be found by status in this namespace
    ├── NoApproverKey              no approver's key to sign an answer with
    └── ToolError                  a tool's call failed: ``code``, ``status``, ``retryable``
                                   (a tool author raises it)               world.errors

Each is defined where it arises; the roots of the branches are here, and so are the errors of
no deeper layer. Nothing matches on an error's message: callers match on the class.
"""

from __future__ import annotations


class PlangateError(Exception):
    """The root of every error plangate raises to its caller."""


class ConfigurationError(PlangateError, ValueError):
    """Settings (an environment variable, a file, a flag) that cannot be used."""


class RunError(PlangateError):
    """Something about one run, named by its id."""


class ServiceUnreachable(PlangateError):
    """A service plangate needs could not be reached (or would not let us in)."""

    def __init__(self, service: str, where: str, reason: str, origin: str = "",
                 todo: str = "") -> None:
        """``origin``: where the address came from (``TEMPORAL_ADDRESS``, the default);
        ``todo``: what to do about it, in a sentence."""
        said = f" ({origin})" if origin else ""
        super().__init__(f"cannot reach {service} at {where}{said}: {reason}"
                         + (f". {todo}" if todo else ""))
        self.service = service
        self.where = where
        self.reason = reason
