"""plangate's HTTP servers: ``page`` (``plangate ui``: the approval cards waiting
across runs) and ``codec`` (``plangate codec-server``: Temporal's remote codec for the Web UI),
with ``tokens`` (the entropy a server's token must have)."""
