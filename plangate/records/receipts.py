"""Receipts: one signed record per ledgered effect, for anyone outside plangate to check.

A receipt says what the worker knew when the call concluded: the call (its tool, the SHA-256 of
its canonical arguments, whom it acted for, its run, step and idempotency key), who approved it
(the approvers whose proofs verified, the card's digest; or a standing grant), what the
deployment's policies decided and under which bundle, what the probes saw before the act (the
check at the call) and after it (the read after), and the outcome (done with the result's
digest, or failed/unknown with the error's code). The worker signs it with its receipt key
(Ed25519, ``records.signing``) over the domain ``plangate/receipt/v1`` and the receipt's fields
as canonical JSON; the signature is the one field it does not cover.

A receipt is one line of JSON. ``verify_receipt`` checks one against a public key with nothing but
this module: no Temporal, no Postgres. Pure and deterministic.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import JsonValue

from plangate.records.signing import KEY_BYTES, SigningKey, fingerprint, verify

DOMAIN = "plangate/receipt/v1"
SIGNATURE = "signature"
# a probe's arguments or observed value kept whole up to this many bytes of canonical JSON;
# past it, its digest alone
OBSERVED_MAX = 512


class ReceiptProblem(ValueError):
    """A receipt that does not verify, or a line that is no receipt: the message says why."""


def canonical(value: Any) -> str:
    """JSON as plangate digests it: keys sorted, no spaces, UTF-8 as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_of(value: Any) -> str:
    return hashlib.sha256(canonical(value).encode()).hexdigest()


def _small(value: JsonValue) -> tuple[JsonValue, str]:
    """A value whole when its canonical JSON is small (``OBSERVED_MAX``), else None; and its
    SHA-256 always (a probe's arguments may hold a whole body to compare)."""
    data = canonical(value).encode()
    return (value if len(data) <= OBSERVED_MAX else None), hashlib.sha256(data).hexdigest()


def seen(results: Iterable[tuple[str, dict[str, JsonValue], str, JsonValue]]
         ) -> list[dict[str, JsonValue]]:
    """What a read saw, condition by condition (probe, its arguments, its outcome, what it
    observed): the arguments and the observed value whole when small, their digests always."""
    out: list[dict[str, JsonValue]] = []
    for probe, args, outcome, observed in results:
        kept_args, args_sha256 = _small(args)
        kept, observed_sha256 = _small(observed)
        out.append({"probe": probe, "args": kept_args, "args_sha256": args_sha256,
                    "outcome": outcome, "observed": kept, "observed_sha256": observed_sha256})
    return out


def sign(key: SigningKey, fields: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """``fields`` with the signer named (its key's name, public key and fingerprint) and signed."""
    body: dict[str, JsonValue] = json.loads(canonical(fields))  # signed as a reader will read it
    public = key.public
    body["signer"] = {"name": key.name, "public_key": base64.b64encode(public).decode(),
                      "fingerprint": fingerprint(public)}
    body[SIGNATURE] = key.sign(DOMAIN, body)
    return body


def line(receipt: dict[str, JsonValue]) -> str:
    """A receipt as one line of JSON (what ``plangate receipt RUN`` prints)."""
    return canonical(receipt)


def public_key(text: str) -> bytes:
    """A public key as given to the verifier: ``NAME:BASE64`` (``plangate key show``'s
    ``public:`` line, with or without its label), or the bare base64."""
    entry = text.strip().removeprefix("public:").strip()
    material = entry.rpartition(":")[2].strip()
    try:
        raw = base64.b64decode(material, validate=True)
    except (binascii.Error, ValueError):
        raise ReceiptProblem("the public key is not NAME:BASE64 nor base64") from None
    if len(raw) != KEY_BYTES:
        raise ReceiptProblem(f"the public key is {len(raw)} bytes, not {KEY_BYTES} (Ed25519)")
    return raw


@dataclass(frozen=True)
class Verified:
    """A receipt whose signature holds under the trusted key: its fields as signed."""

    receipt: dict[str, Any]

    @property
    def effect(self) -> str:
        return str(self.receipt.get("effect", ""))

    def summary(self) -> str:
        call = self.receipt.get("call") or {}
        out = self.receipt.get("outcome") or {}
        return (f"{self.effect}: {call.get('tool')} step {call.get('step')} of run "
                f"{call.get('run_id')}: {out.get('state')}")


def verify_receipt(text: str, trusted: bytes) -> Verified:
    """One receipt line checked against ``trusted`` (the deployment's public receipt key):
    a ``ReceiptProblem`` saying why it does not verify."""
    try:
        receipt = json.loads(text)
    except json.JSONDecodeError as e:
        raise ReceiptProblem(f"not JSON: {e.msg} at column {e.colno}") from None
    if not isinstance(receipt, dict):
        raise ReceiptProblem("not a receipt: a JSON object is expected")
    if receipt.get("receipt") != DOMAIN:
        raise ReceiptProblem(f"not a receipt of {DOMAIN}")
    signature = receipt.pop(SIGNATURE, None)
    if not isinstance(signature, str):
        raise ReceiptProblem("it has no signature")
    signer = receipt.get("signer")
    named = signer.get("public_key") if isinstance(signer, dict) else None
    if named != base64.b64encode(trusted).decode():
        raise ReceiptProblem(
            f"signed by the key {_fingerprint_of(named)}, not the given key "
            f"{fingerprint(trusted)}")
    if not verify(trusted, DOMAIN, receipt, signature):
        raise ReceiptProblem("the signature does not verify: the receipt was altered, or "
                             "signed by another key")
    return Verified(receipt)


def _fingerprint_of(named: object) -> str:
    if not isinstance(named, str):
        return "(none named)"
    try:
        return fingerprint(base64.b64decode(named, validate=True))
    except (binascii.Error, ValueError):
        return "(not base64)"


@dataclass(frozen=True)
class Checked:
    """One line's verdict: its number (from 1), and the receipt or what is wrong with it."""

    n: int
    verified: Verified | None
    problem: str = ""


def verify_receipts(lines: Iterable[str], trusted: bytes) -> Iterator[Checked]:
    """Each non-blank line of a receipts file, checked (``verify_receipt``)."""
    for n, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            yield Checked(n, verify_receipt(text, trusted))
        except ReceiptProblem as e:
            yield Checked(n, None, str(e))
