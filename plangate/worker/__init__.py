"""The worker assembly: ``assembly`` (``build_worker`` and ``PlangateWorkerPlugin``: every workflow
and activity on the deployment's data converter) and the parts every Temporal connection of a
deployment shares with its workers: ``encryption`` (the payload codec and data converter),
``compression``, ``tracing``, ``metrics`` and ``sandbox`` (plangate passed through the workflow
sandbox). Knows nothing of the client, the CLI or the servers; this module imports none of its
submodules, so a client that connects loads no activity."""
