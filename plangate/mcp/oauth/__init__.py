"""OAuth 2.1 for ``plangate mcp --http``: the server a resource server of an authorization
server the deployment names (settings, the issuer's keys, the token check, the guard)."""
