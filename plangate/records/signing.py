"""Proof of who answered a card and who submitted a run: Ed25519 signatures.

An approver or a submitter holds a signing key (``NAME:BASE64``, the 32-byte seed); the
deployment lists the public keys it trusts (``PLANGATE_APPROVERS``, ``PLANGATE_SUBMITTERS``).
A signature covers a domain (what is signed: an approval, a submission) and the fields it binds,
as canonical JSON, so a signature of one kind can never be taken for another, and a field that
changed is a signature that no longer verifies. Public keys are no secret: the workflow keeps
them in its history to verify answers in an Update's validator. Pure and deterministic: safe in
workflow code.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from plangate.errors import ConfigurationError

APPROVAL = "plangate/approval/v1"
SUBMISSION = "plangate/submission/v1"

KEY_BYTES = 32
# who signs: a name as a principal is spelled (plans.model), nothing a terminal could misread
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.@\-]{0,62}$")


class KeyProblem(ConfigurationError):
    """A key or a list of keys that cannot be used (the message never quotes key material)."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str, what: str) -> bytes:
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise KeyProblem(f"{what} is not standard base64") from None
    if len(raw) != KEY_BYTES:
        raise KeyProblem(f"{what} is {len(raw)} bytes, not {KEY_BYTES} (Ed25519)")
    return raw


def message(domain: str, fields: Mapping[str, Any]) -> bytes:
    """What is signed: the domain, a newline, the fields as canonical JSON."""
    body = json.dumps(dict(fields), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return f"{domain}\n{body}".encode()


@dataclass(frozen=True)
class SigningKey:
    """A person's (or an agent's) key: its name and the Ed25519 seed. Never printed."""

    name: str
    seed: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not NAME.match(self.name):
            raise KeyProblem(f"key name {self.name!r} is not a name (letters, digits, . _ @ -)")
        if len(self.seed) != KEY_BYTES:
            raise KeyProblem(f"the key of {self.name} is not {KEY_BYTES} bytes")

    @classmethod
    def generate(cls, name: str) -> SigningKey:
        from cryptography.hazmat.primitives.serialization import NoEncryption, PrivateFormat

        raw = Ed25519PrivateKey.generate().private_bytes(
            Encoding.Raw, PrivateFormat.Raw, NoEncryption()
        )
        return cls(name, raw)

    @classmethod
    def parse(cls, text: str, what: str = "key") -> SigningKey:
        """``NAME:BASE64`` (the form ``text`` writes)."""
        name, colon, material = text.strip().partition(":")
        if not colon or not NAME.match(name.strip()):
            raise KeyProblem(f"{what} is not NAME:BASE64 (a key file made by `plangate key new`)")
        return cls(name.strip(), _unb64(material, f"{what} of {name.strip()}"))

    def text(self) -> str:
        return f"{self.name}:{_b64(self.seed)}"

    def _private(self) -> Ed25519PrivateKey:
        return Ed25519PrivateKey.from_private_bytes(self.seed)

    @property
    def public(self) -> bytes:
        return self._private().public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)

    def public_entry(self) -> str:
        """``NAME:BASE64`` of the public key: the line a deployment lists."""
        return f"{self.name}:{_b64(self.public)}"

    def sign(self, domain: str, fields: Mapping[str, Any]) -> str:
        return _b64(self._private().sign(message(domain, fields)))

    def login_token(self) -> str:
        """The approval page's login token for this key's person: derived from the seed (256
        bits, one-way), so a page that holds the key knows it and nobody else can guess it."""
        mac = hmac.new(self.seed, b"plangate ui login v1", hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).decode().rstrip("=")


def verify(public: bytes, domain: str, fields: Mapping[str, Any], signature: str) -> bool:
    """Whether ``signature`` is ``public``'s over ``domain`` and ``fields``."""
    try:
        sig = base64.b64decode(signature, validate=True)
        Ed25519PublicKey.from_public_bytes(public).verify(sig, message(domain, fields))
    except (binascii.Error, ValueError, InvalidSignature):
        return False
    return True


def _warm() -> None:
    """Fail one verification now, at import. cryptography's Rust core imports the
    ``InvalidSignature`` type the first time it raises it; inside Temporal's workflow sandbox
    that import fails and aborts the process. Imported once here, outside any sandbox (workflow
    code imports this module passed through), the type is cached for every later raise."""
    key = Ed25519PrivateKey.from_private_bytes(bytes(KEY_BYTES)).public_key()
    try:
        key.verify(bytes(64), b"")
    except InvalidSignature:
        return


_warm()


def public_entries(raw: str, what: str) -> tuple[tuple[str, bytes], ...]:
    """``NAME:BASE64`` public keys separated by commas; each name once."""
    out: list[tuple[str, bytes]] = []
    for i, entry in enumerate((e.strip() for e in raw.split(",")), 1):
        if not entry:
            continue
        name, colon, material = (p.strip() for p in entry.partition(":"))
        if not colon or not NAME.match(name):
            raise KeyProblem(f"{what}: entry {i} is not NAME:BASE64PUBLICKEY")
        if any(name == known for known, _ in out):
            raise KeyProblem(f"{what}: {name} is listed twice")
        out.append((name, _unb64(material, f"{what}: the key of {name}")))
    return tuple(out)


def fingerprint(public: bytes) -> str:
    """A short, printable name of a public key (to compare two keys without showing them)."""
    return hashlib.sha256(public).hexdigest()[:16]
