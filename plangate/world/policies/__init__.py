"""The deployment's Cedar policies (``cedarpy``): plangate's schema, the policy files of
``PLANGATE_POLICIES`` read and validated (``FILE:LINE:COLUMN``), the settings as built-in
policies, the bundle (a digest, never a label) and the decision about one call
(docs/policy.md). Below the activities and the CLI, which put a call to it; the decision's
models are ``plangate.records.policy``, which workflows carry.

    bundle = load_bundle(settings.policy, settings.world.scope, catalogue)
    decision = bundle.decide(PolicyRequest(tool=..., effect=..., args=..., now=...))
"""

from plangate.world.policies.builtin import builtin_policies
from plangate.world.policies.engine import (
    Bundle,
    bundle_of,
    bundle_read,
    decide,
    digest_of,
    load_bundle,
    resources_of,
)
from plangate.world.policies.schema import arg_types, base_schema, cents, schema_text
from plangate.world.policies.source import (
    PoliciesUnusable,
    PolicyFileError,
    PolicyProblem,
    read_directory,
)

__all__ = [
    "Bundle", "PoliciesUnusable", "PolicyFileError", "PolicyProblem", "arg_types", "base_schema",
    "builtin_policies", "bundle_of", "bundle_read", "cents", "decide", "digest_of",
    "load_bundle", "read_directory", "resources_of", "schema_text",
]
