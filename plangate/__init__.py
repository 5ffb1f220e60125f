"""plangate: run agent plans on Temporal, every step guarded by read-only probes of the world."""

__version__ = "0.1.0"
