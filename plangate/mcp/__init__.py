"""The front door, ``plangate mcp``: plangate's plan tools over the Model Context Protocol, on
the official ``mcp`` SDK (``pip install 'plangate[mcp]'``); its tools start plans and guarded
calls through the client's API, so it sits above the client. See :mod:`plangate.mcp.server`.

The other way round, plangate as an MCP client guarding other servers' tools (the back door,
``PLANGATE_MCP_SERVERS``), is a tool source below the activities: ``plangate.activities.tools.mcp``.
This module imports nothing.
"""
