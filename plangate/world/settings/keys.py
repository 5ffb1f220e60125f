"""The keys this process signs with (``Identity``): an approver's answers (``plangate
approve``, the approval page) and a submitter's runs, for the Python API and the page; and how
signing and public keys are read from a variable. Errors name the variable and the entry,
never key material; the private keys never appear in a repr."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from plangate.errors import ConfigurationError
from plangate.records.signing import SigningKey
from plangate.world.settings.parse import entries

APPROVER_KEY_VAR = "PLANGATE_APPROVER_KEY"
SUBMITTER_KEY_VAR = "PLANGATE_SUBMITTER_KEY"
# the worker's: it signs the receipt of each effect with it (``PolicySettings.receipt_key``)
RECEIPT_KEY_VAR = "PLANGATE_RECEIPT_KEY"


@dataclass(frozen=True)
class Identity:
    # the keys this process signs answers with (``plangate approve``: one; the approval page:
    # one per person it lets in)
    approver_keys: tuple[SigningKey, ...] = field(default=(), repr=False)
    # the key this process signs its submissions with
    submitter_key: SigningKey | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Identity:
        return cls(
            approver_keys=signing_keys(env.get(APPROVER_KEY_VAR) or "", APPROVER_KEY_VAR),
            submitter_key=one_key(env, SUBMITTER_KEY_VAR),
        )


def _key_text(entry: str, var: str) -> str:
    """A key given inline (``NAME:BASE64``) or as the path of a file that holds one."""
    if ":" in entry and not os.path.exists(entry):
        return entry
    try:
        return Path(entry).expanduser().read_text().strip()
    except OSError as e:
        raise ConfigurationError(f"{var}: cannot read key file {entry}: {e.strerror}") from None


def signing_keys(raw: str, var: str) -> tuple[SigningKey, ...]:
    """Signing keys separated by commas, each ``NAME:BASE64`` or a key file's path; one key a
    name. A key that cannot be used is a ``KeyProblem`` (a ``ConfigurationError``)."""
    keys: list[SigningKey] = []
    for i, entry in entries(raw):
        key = SigningKey.parse(_key_text(entry, var), f"{var} entry {i}")
        if any(k.name == key.name for k in keys):
            raise ConfigurationError(f"{var}: two keys are named {key.name}")
        keys.append(key)
    return tuple(keys)


def one_key(env: Mapping[str, str], var: str) -> SigningKey | None:
    keys = signing_keys(env.get(var) or "", var)
    if len(keys) > 1:
        raise ConfigurationError(f"{var}: one key, not {len(keys)}")
    return keys[0] if keys else None
