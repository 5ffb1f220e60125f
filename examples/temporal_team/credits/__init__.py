"""A team's own Temporal project (activities, workflows, a worker), guarded by plangate by
adding one plugin and a guard table (``guards.yaml``): nothing here is written for plangate
but ``issue_credit``'s use of the call's key (``plangate.temporal.call_key``), which any
payment API's idempotency key would take, its marker (``@guarded``: it refuses to run on a
worker without plangate's guard), and its agents' tools (``openai_agent``: plangate's
``guarded_tool`` in place of Temporal's ``activity_as_tool``; ``pydantic_agent``: a refusal
answered to the model), so that the model reads why the guard refused a call."""
