"""The probe registry: named read-only checks against S3, Postgres, files and records.

Importing this package registers the built-in probes.
"""

from plangate.probes import files, postgres, records, s3  # noqa: F401  (registration)
from plangate.probes.registry import PROBES, ProbeContext, ProbeSpec, Verdict, probe

__all__ = ["PROBES", "ProbeContext", "ProbeSpec", "Verdict", "probe"]
