"""A stdio MCP server for tests whose read tool answers what the test chose (``ANSWERS``: no
content, an HTML error page without ``isError``, JSON naming a key twice, ...), and whose write
tool counts its calls in a file the test reads. Run: ``python mcp_answers.py ANSWER CALLS``."""

from __future__ import annotations

import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from mcp_types import CallToolResult, TextContent

HTML = ("<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad "
        "Gateway</h1><p>The upstream server did not answer.</p></body></html>")
ANSWERS: dict[str, str | None] = {
    "empty": None,  # no content block at all
    "html": HTML,
    "duplicate": '{"pending": 3, "pending": null}',
    "number": "502",
    "false": '{"pending": false}',
    "zero": '{"pending": 0}',
}


def serve(answer: str, calls: Path) -> None:
    text = ANSWERS[answer]
    server = MCPServer(f"answers-{answer}")

    @server.tool(name="pending", annotations=ToolAnnotations(read_only_hint=True),
                 structured_output=False)
    def pending(queue: str) -> CallToolResult:
        return CallToolResult(content=[] if text is None else [TextContent(type="text",
                                                                           text=text)])

    @server.tool(name="drain", structured_output=False)
    def drain(queue: str) -> str:
        with calls.open("a", encoding="utf-8") as f:
            f.write(queue + "\n")
        return f"drained {queue}"

    server.run()


if __name__ == "__main__":
    serve(sys.argv[1], Path(sys.argv[2]))
