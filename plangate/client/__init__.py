"""The client: what a program that runs plans needs, and no tool, probe or model client.
``api`` (``Plangate``, a front over the modules after it, and ``errors``, what its caller
catches), ``starting`` (start, queue, cancel), ``answers`` (approve, reject), ``reports`` (a
run's report, from the run; ``unbegun``: the one read from history), ``following`` (poll,
watch, wait for a card), ``listings`` (runs through visibility), ``pending`` (the cards
waiting), ``handles``; ``checked`` (a plan checked for a deployment), ``connection`` (the one
way plangate makes a Temporal client), ``placement``, ``view`` (the live view of a run),
``reporting``, ``staleness`` and ``staleness_html`` (the staleness report). Imports nothing of
``cli``, ``servers``, ``dev`` or ``demo``; of ``worker``, only the parts a connection shares
with a worker (the codec, tracing, the metrics runtime), never the assembly."""
