"""Payload encryption (``EncryptionSettings``): the keys every plangate client and worker
encrypts and decrypts with (``plangate.worker.encryption``) and the bearer token of ``plangate
codec-server``. Neither a key nor the token ever appears in a repr or an error: of a key, only
its id is ever named."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from plangate.errors import ConfigurationError
from plangate.world.settings.parse import entries, stripped

ENCRYPTION_KEYS_VAR = "PLANGATE_ENCRYPTION_KEYS"
CODEC_TOKEN_VAR = "PLANGATE_CODEC_TOKEN"
ENCRYPTION_KEY_BYTES = 32  # AES-256
_KEY_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


@dataclass(frozen=True)
class EncryptionSettings:
    # (key id, 32-byte AES key): the first encrypts, all decrypt; (): payloads are not encrypted
    keys: tuple[tuple[str, bytes], ...] = field(default=(), repr=False)
    # the bearer token ``plangate codec-server`` asks for; None: it starts only on loopback
    # with --insecure-local (plangate.servers.codec)
    codec_token: str | None = field(default=None, repr=False)

    @property
    def key_ids(self) -> tuple[str, ...]:
        """The ids of the keys, the one that encrypts first (never the keys)."""
        return tuple(kid for kid, _ in self.keys)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> EncryptionSettings:
        return cls(
            keys=parse_encryption_keys(env.get(ENCRYPTION_KEYS_VAR) or ""),
            codec_token=stripped(env, CODEC_TOKEN_VAR),
        )


def parse_encryption_keys(raw: str) -> tuple[tuple[str, bytes], ...]:
    """``PLANGATE_ENCRYPTION_KEYS``: ``ID:BASE64`` entries separated by commas, the first the
    one that encrypts (``k2:...,k1:...``); each key 32 bytes (AES-256) in standard base64, each
    id 1-64 letters, digits, ``.``, ``_`` or ``-``, no id twice. An error names the variable and
    the entry (by its position, and by its id once the id is valid), never key material: a
    malformed entry may be a key pasted in the wrong place, so nothing of it is quoted."""
    keys: list[tuple[str, bytes]] = []
    for i, entry in entries(raw):
        kid, colon, material = (part.strip() for part in entry.partition(":"))
        if not colon or not _KEY_ID.fullmatch(kid):
            raise ConfigurationError(
                f"{ENCRYPTION_KEYS_VAR}: entry {i} is not ID:BASE64KEY with an id of 1-64 "
                "letters, digits, '.', '_' or '-' (e.g. k1:<44 base64 characters>)"
            )
        if any(kid == known for known, _ in keys):
            raise ConfigurationError(f"{ENCRYPTION_KEYS_VAR}: key id {kid!r} is given twice")
        try:
            key = base64.b64decode(material, validate=True)
        except (binascii.Error, ValueError):
            raise ConfigurationError(
                f"{ENCRYPTION_KEYS_VAR}: key {kid!r} is not standard base64"
            ) from None
        if len(key) != ENCRYPTION_KEY_BYTES:
            raise ConfigurationError(
                f"{ENCRYPTION_KEYS_VAR}: key {kid!r} is {len(key)} bytes, not "
                f"{ENCRYPTION_KEY_BYTES} (AES-256)"
            )
        keys.append((kid, key))
    return tuple(keys)
