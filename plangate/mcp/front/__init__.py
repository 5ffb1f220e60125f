"""The front door, ``plangate mcp``: plangate's plan tools over the Model Context Protocol, on
the official ``mcp`` SDK (``pip install 'plangate[mcp]'``). See :mod:`plangate.mcp.front.server`."""
