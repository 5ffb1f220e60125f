"""The plan language: models, loading, bindings and validation.

Everything here is pure (no I/O beyond reading a plan file in ``load``), so workflows may use it.
"""

from plangate.plans.model import Budget, Condition, Effect, OnUnmet, Plan, Step, WaitSpec

__all__ = ["Budget", "Condition", "Effect", "OnUnmet", "Plan", "Step", "WaitSpec"]
