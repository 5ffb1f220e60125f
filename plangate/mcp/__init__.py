"""plangate and the Model Context Protocol. ``plangate.mcp.front``: the front door, an MCP
server (``plangate mcp``) whose tools start plans and guarded calls through the client's API.

This module imports nothing: each door is a layer of its own (pyproject.toml's contracts).
"""
