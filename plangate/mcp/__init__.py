"""plangate and the Model Context Protocol, both ways, one package a door:

- ``plangate.mcp.front``: the front door, an MCP server (``plangate mcp``) whose tools start
  plans and guarded calls through the client's API; it sits above the client.
- ``plangate.mcp.back``: the back door, plangate as an MCP client guarding the tools of other
  MCP servers (``PLANGATE_MCP_SERVERS``); it sits with the activities.

This module imports neither: each door is a layer of its own (pyproject.toml's contracts).
"""
