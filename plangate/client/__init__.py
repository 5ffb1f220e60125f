"""The client: what a program that runs plans needs, and no tool, probe or model client.
``api`` (``Plangate``), ``checked`` (a plan checked for a deployment), ``connection`` (the one
way plangate makes a Temporal client), ``view`` (the live view of a run), ``reporting``,
``staleness`` and ``staleness_html`` (the staleness report). Imports nothing of ``cli``,
``servers``, ``dev`` or ``demo``; of ``worker``, only the parts a connection shares with a
worker (the codec, tracing, the metrics runtime), never the assembly."""
