"""Every command that listens (``ui``, ``codec-server``, ``mcp --http``) on an address another
process holds: one line naming the command, the address and the OS's reason, exit 2
(``plangate.cli.serve.listening``), and the holder keeps its port; on a port that is no port,
one usage line, exit 2."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from plangate.cli import main


@pytest.fixture
def held() -> Iterator[socket.socket]:
    """A port on 127.0.0.1 that this test's own socket listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s


def still_holds(holder: socket.socket) -> bool:
    """Whether a connection to the holder's port reaches the holder."""
    holder.settimeout(10)
    with socket.create_connection(holder.getsockname(), timeout=10) as client:
        conn, peer = holder.accept()
        conn.close()
        return bool(peer == client.getsockname())


@pytest.mark.parametrize("argv", [
    ["codec-server", "--insecure-local"],
    ["mcp", "--http", "--insecure-local"],
    ["ui"],
])
def test_a_taken_port_is_one_line_and_exit_2(argv, held, stack, monkeypatch, capsys):
    for k, v in stack.env().items():  # ui connects to Temporal before it listens
        monkeypatch.setenv(k, v)
    port = held.getsockname()[1]
    assert main([*argv, "--host", "127.0.0.1", "--port", str(port)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (f"plangate: {argv[0]}: cannot listen on 127.0.0.1:{port}: "
                       "Address already in use"), err
    assert "Traceback" not in "\n".join(err)
    assert still_holds(held)


@pytest.mark.parametrize("command", [["codec-server", "--insecure-local"],
                                     ["mcp", "--http", "--insecure-local"], ["ui"]])
@pytest.mark.parametrize("bad", ["99999", "-1", "http"])
def test_a_port_that_is_no_port_is_one_usage_line_and_exit_2(command, bad, capsys):
    assert main([*command, "--port", bad]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith(
        f"error: argument --port: a port is a number from 0 to 65535, not '{bad}'"), err
    assert "Traceback" not in "\n".join(err)
