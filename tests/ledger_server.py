"""A payments MCP server for the effect ledger's tests, run over stdio: ``pay`` pays on every
call, whatever was paid before (it does not dedupe), appending a line per payment (with the
``_meta`` the request carried) to the file named by its one argument."""

from __future__ import annotations

import json
import sys
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

LOG = sys.argv[1] if len(sys.argv) > 1 else "payments.log"
server = MCPServer("payments")


@server.tool()
def pay(account: str, amount_eur: float, ctx: Context[Any]) -> str:
    meta = dict(ctx.request_context.meta or {})
    with open(LOG, "a", encoding="utf-8") as f:
        f.write(json.dumps({"account": account, "amount_eur": amount_eur, "meta": meta}) + "\n")
    return json.dumps({"paid": amount_eur, "account": account})


if __name__ == "__main__":
    server.run("stdio")
