"""``receipt RUN``: a run's signed receipts as JSON lines (from the deployment's Postgres);
``receipt verify FILE``: each line of such a file checked against the deployment's public
receipt key, offline (no Temporal, no Postgres)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from plangate.cli.command import EXIT_NOT_SUCCEEDED, EXIT_OK, Command, UsageError
from plangate.plans.words import many
from plangate.world.settings import RECEIPT_KEY_VAR, Settings

VERIFY = "verify"


def _arguments(p: argparse.ArgumentParser) -> None:
    p.usage = "%(prog)s RUN\n       %(prog)s verify FILE [--public-key KEY|FILE]"
    p.add_argument("what", nargs="+", metavar="RUN | verify FILE",
                   help="a run id (its workflow id): its receipts; or `verify FILE`: check "
                        "a file of receipts (- reads stdin)")
    p.add_argument("--public-key", metavar="KEY|FILE",
                   help="verify: the deployment's public receipt key, NAME:BASE64 (`plangate "
                        "key show` of the worker's key file prints it) or a file holding it "
                        f"(default: the public half of {RECEIPT_KEY_VAR})")


async def _receipt(args: argparse.Namespace, settings: Settings) -> int:
    what: list[str] = args.what
    if what[0] == VERIFY:
        if len(what) != 2:
            raise UsageError("receipt verify: name one FILE of receipts (- for stdin)")
        return _verify(what[1], args.public_key, settings)
    if len(what) != 1:
        raise UsageError(f"receipt: one RUN, not {len(what)} words (or `verify FILE`)")
    if args.public_key is not None:
        raise UsageError("receipt RUN: --public-key is for `receipt verify FILE`")
    return await _export(what[0], settings)


async def _export(run_id: str, settings: Settings) -> int:
    import psycopg

    from plangate.cli.services import check_postgres
    from plangate.client.receipts import receipts_of_run

    await check_postgres(settings.world)
    try:
        lines = await receipts_of_run(settings.world, run_id)
    except psycopg.errors.UndefinedTable:
        print("plangate: receipt: plangate.receipts does not exist: start a worker or run "
              "`plangate setup` first", file=sys.stderr)
        return EXIT_NOT_SUCCEEDED
    if not lines:
        print(f"plangate: receipt: no receipts of run {run_id} (none of its effects is "
              f"recorded, or its worker has no {RECEIPT_KEY_VAR})", file=sys.stderr)
        return EXIT_NOT_SUCCEEDED
    for line in lines:
        print(line)
    return EXIT_OK


def _trusted(given: str | None, settings: Settings) -> bytes:
    from plangate.records.receipts import ReceiptProblem, public_key

    if given is None:
        key = settings.policy.receipt_key
        if key is None:
            raise UsageError("receipt verify: name the deployment's public receipt key with "
                             f"--public-key (or set {RECEIPT_KEY_VAR})")
        return key.public
    path = Path(given).expanduser()
    try:
        text = path.read_text() if path.is_file() else given
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"--public-key: cannot read {given}: {e}") from None
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    try:
        return public_key(lines[0] if lines else "")
    except ReceiptProblem as e:
        raise UsageError(f"--public-key: {e} (nor a file that holds one)") from None


def _verify(file: str, given: str | None, settings: Settings) -> int:
    from plangate.records.receipts import verify_receipts
    from plangate.records.signing import fingerprint

    trusted = _trusted(given, settings)
    try:
        text = sys.stdin.read() if file == "-" else Path(file).read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"receipt verify: cannot read {file}: {e}") from None
    good = bad = 0
    for checked in verify_receipts(text.splitlines(), trusted):
        if checked.verified is not None:
            good += 1
            print(f"line {checked.n}: verified: {checked.verified.summary()}")
        else:
            bad += 1
            print(f"line {checked.n}: FAILED: {checked.problem}")
    if good + bad == 0:
        print(f"plangate: receipt verify: {file} holds no receipts", file=sys.stderr)
        return EXIT_NOT_SUCCEEDED
    key = fingerprint(trusted)
    if bad:
        print(f"plangate: receipt verify: {bad} of {good + bad} receipts do not verify under "
              f"the key {key}", file=sys.stderr)
        return EXIT_NOT_SUCCEEDED
    print(f"# {many(good, 'receipt')} verified under the key {key}")
    return EXIT_OK


RECEIPT = Command(
    "receipt", help="a run's signed effect receipts as JSON lines; `receipt verify FILE` "
    "checks them offline",
    description="Print the signed receipts of a run's effects (plangate.receipts), one JSON "
                "line each; or, with `verify FILE`, check each line of a receipts file "
                "against the deployment's public receipt key, offline: a line per receipt, "
                "exit 0 when every one verifies, 1 naming each line that does not.",
    run=_receipt, arguments=_arguments, connects=False,
)
