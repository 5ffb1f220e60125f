"""Deterministic orchestration only: the plan run and the step lifecycle. No I/O here."""
