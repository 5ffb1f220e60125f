"""The back door, a tool source: plangate as an MCP client guarding the tools of other MCP
servers, as the MCP servers file (``PLANGATE_MCP_SERVERS``, docs/mcp-servers.md) declares them.

- ``file``: the file's format, checked field by field and against itself; ``templates``: its
  ``{arg}`` templates;
- ``tools``: a declared tool as a guarded tool (effect, arguments, contract, reader);
- ``probes``: a declared probe, read back through one of the server's read tools;
- ``sessions``: one session per server and worker, kept on the worker's ``World``;
- ``source``: the file's tools and probes, which ``activities.extensions`` adds to a
  deployment's registry, and the check a worker makes at start.

Like the core tools beside it, it imports nothing of the activities but the tool registry; this
module imports nothing, so a plan checked without a servers file loads none of it.
"""
