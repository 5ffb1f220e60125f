"""``key new`` and ``key show``: a signing key (an approver's or a submitter's) made in a file
only its owner can read, or read back; each prints the public line a deployment lists and the
approval page's login token."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from plangate.cli.command import EXIT_OK, Command, UsageError
from plangate.world.settings import Settings

if TYPE_CHECKING:
    from plangate.records.signing import SigningKey


def _print(key: SigningKey) -> int:
    print(f"public: {key.public_entry()}")
    print("# list it in the worker's PLANGATE_APPROVERS (an approver) or, with :PRINCIPAL|..., "
          "in PLANGATE_SUBMITTERS (a submitter); a worker's receipt key (PLANGATE_RECEIPT_KEY): "
          "`plangate receipt verify FILE --public-key` takes this line")
    print(f"login token (the approval page; a secret too): {key.login_token()}")
    return EXIT_OK


def _new_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="whose key: the name answers and submissions are recorded by")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="where (default: NAME.key; missing folders are made, owner only)")


def _write_new(where: str, text: str) -> str:
    """``text`` written at ``where`` (``~`` expanded), readable by its owner alone, never over
    a file; a folder of keys (``~/.plangate``) made where missing, only its owner's."""
    path = os.path.expanduser(where)
    try:
        os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise UsageError(f"{where} exists: a key is never overwritten") from None
    except OSError as e:
        raise UsageError(f"cannot write {where}: {e.strerror}") from None
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


async def _new(args: argparse.Namespace, settings: Settings) -> int:
    """A new key, written where only its owner can read it, never over a file."""
    from plangate.records.signing import KeyProblem, SigningKey

    try:
        key = SigningKey.generate(args.name)
    except KeyProblem as e:
        raise UsageError(str(e)) from None
    path = _write_new(args.output or f"{args.name}.key", key.text() + "\n")
    print(f"# {path}: the secret key of {key.name} (PLANGATE_APPROVER_KEY, "
          "PLANGATE_SUBMITTER_KEY or a worker's PLANGATE_RECEIPT_KEY); never share it",
          file=sys.stderr)
    return _print(key)


def _show_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a key file, as key new wrote it")


def _read(file: str) -> SigningKey:
    from plangate.records.signing import KeyProblem, SigningKey

    try:
        return SigningKey.parse(Path(file).read_text(), file)
    except OSError as e:
        raise UsageError(f"cannot read {file}: {e.strerror}") from None
    except KeyProblem as e:
        raise UsageError(str(e)) from None


async def _show(args: argparse.Namespace, settings: Settings) -> int:
    return _print(_read(args.file))


KEY = Command(
    "key", help="make or show a signing key: an approver's (PLANGATE_APPROVER_KEY), a "
    "submitter's (PLANGATE_SUBMITTER_KEY) or a worker's receipt key (PLANGATE_RECEIPT_KEY)",
    description="Make a signing key (an approver's or a submitter's) in a file only you can "
                "read, or show the public line and login token of one.",
    subcommands=(
        Command("new", help="a new key: written to a file only you can read; prints the public "
                "line a deployment lists",
                description="Make a new signing key in a file only you can read (never "
                            "overwritten) and print the public line a deployment lists.",
                run=_new, arguments=_new_arguments),
        Command("show", help="the public line and page login token of a key file",
                description="Print the public line and the approval page's login token of a "
                            "key file.",
                run=_show, arguments=_show_arguments),
    ),
)
