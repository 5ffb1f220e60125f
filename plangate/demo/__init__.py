"""The demo: the seeds' incidents, loaded only when asked for (``plangate demo``,
``PLANGATE_DEMO_SYSTEMS=1``, ``plangate dev``), never by the core.

- ``systems``: the demo systems as an extension, registered through the same mechanism as a
  team's own tools (``plangate.activities.extensions``): the tools of ``billing``, ``crm`` and
  ``email`` (with ``_records``, what they share) and their tables in schema ``demo``
  (``schema``);
- ``scenarios``: the incidents as plans; ``naive``: the executor they happened under;
  ``replay``: ``plangate demo``, both incidents replayed each way against real services.
"""
