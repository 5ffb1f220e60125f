"""The dev stack: ``stack`` (``EmbeddedStack``: real Temporal, Postgres and S3 servers from
wheels; its services in ``_stack``) and ``run`` (``plangate dev``: the stack and a worker in
the foreground). The servers come from the extra ``plangate[embedded]``."""
