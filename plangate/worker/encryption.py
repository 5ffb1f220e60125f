"""Encrypted payloads. Temporal stores every payload of a run (its plan and arguments, each
tool's result, the report, an answer's text) in its database and shows it in the Web UI; a
billing contact or an e-mail address would sit there in clear. With keys configured
(``PLANGATE_ENCRYPTION_KEYS``, ``world.settings.encryption``), every plangate client
and worker encrypts each payload before it leaves the process; ``plangate codec-server``
(``plangate.servers.codec``) decrypts them again for an operator's Web UI.

The format of an encrypted payload:

- ``data``: a 12-byte random nonce, then AES-256-GCM's ciphertext and 16-byte tag of the whole
  serialized inner payload (its metadata, the encoding included, is hidden too);
- ``metadata``: ``encoding: binary/encrypted`` and ``encryption-key-id: <id>``, nothing else;
- associated data: the key id, so a payload whose key id was changed does not decrypt.

The first key encrypts; every key decrypts, found by the id the payload carries. Rotation: put
a new key first (``k2:...,k1:...``) on every worker and client, keep the old one for reading
what it wrote. For a client and a replayer, a payload that is not encrypted passes through
decoding unchanged: histories recorded before encryption was turned on still read and replay.

A worker with keys fails closed (``data_converter(encryption, refuse_plain=True)``, which
``plangate.worker.assembly.build_worker`` gives it): anyone who reaches Temporal could otherwise
start a plain run, or signal or update one, on an encrypting deployment, and AES-GCM's tag is what
proves a payload came from a holder of the key. Its codec turns a payload without plangate's
encryption into a marker holding nothing of it (``UNENCRYPTED``), and its payload converter
refuses the marker with a non-retryable ``ApplicationError`` (type ``REFUSED_TYPE``) where the
value is converted, so the SDK answers each kind in its own way, and nothing acts:

- a run's input: the run fails at its first workflow task, before any activity is scheduled;
- a signal: dropped, and the worker logs why;
- an update: rejected, the caller told why (no history event);
- an activity's input or a result: that activity, or the run, fails.

That refusal's message (it holds nothing of the payload) stays in clear in the history, so the
submitter without keys reads why. What else a worker decodes is its own (activity results,
heartbeats, failures, a continued run's input) or needs no refusal: search attributes and
headers (the tracing context) never pass through the codec (Temporal's defaults), and a memo,
which does, is read by the card list only (``records.cards``: a client without keys asks the
run instead). The codec server is not strict: it decodes what an
operator's UI shows, old plain payloads included.

The codecs run in order: compression (``plangate.worker.compression``, large payloads only), then
encryption; decoding undoes them in reverse. With keys, failure messages and stack traces are
moved into an encoded payload too (Temporal's ``DefaultFailureConverterWithEncodedAttributes``):
a tool's error names what it was doing ("send account_closed to ar@...").
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any, NoReturn

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.contrib.pydantic import PydanticPayloadConverter, pydantic_data_converter
from temporalio.converter import (
    DataConverter,
    DefaultFailureConverter,
    DefaultFailureConverterWithEncodedAttributes,
    EncodingPayloadConverter,
    FailureConverter,
    PayloadCodec,
    PayloadConverter,
)
from temporalio.exceptions import ApplicationError

from plangate.errors import PlangateError
from plangate.worker.compression import COMPRESS_FROM, CompressionCodec
from plangate.world.settings import ENCRYPTION_KEYS_VAR, EncryptionSettings

ENCODING = b"binary/encrypted"
KEY_ID = "encryption-key-id"
NONCE_BYTES = 12
TAG_BYTES = 16
# what a refusing codec hands on for a payload that is not encrypted: never stored or sent
UNENCRYPTED = b"binary/plangate-unencrypted"
_WAS = "unencrypted-encoding"
REFUSED_TYPE = "UnencryptedPayload"


class DecryptionError(PlangateError, ValueError):
    """An encrypted payload that cannot be decrypted here: its key is not configured, or the
    key of its id does not open it. Names the key id, never a key."""


class EncryptionCodec(PayloadCodec):
    """AES-256-GCM over whole payloads. ``keys``: (id, 32-byte key), the first encrypts, all
    decrypt. With no keys nothing is encrypted, and an encrypted payload is refused with a
    clear error rather than handed on as an encoding nobody knows. ``refuse_plain`` (a
    worker's, with keys): a payload that is not encrypted is decoded into an ``UNENCRYPTED``
    marker that ``RefusingPayloadConverter`` refuses, its content dropped."""

    def __init__(
        self, keys: Sequence[tuple[str, bytes]] = (), *, refuse_plain: bool = False
    ) -> None:
        self._ciphers = {kid: AESGCM(key) for kid, key in keys}
        self.key_ids = tuple(kid for kid, _ in keys)
        if refuse_plain and not keys:
            raise ValueError("only a codec with keys can refuse unencrypted payloads")
        self.refuse_plain = refuse_plain

    def __repr__(self) -> str:
        return f"EncryptionCodec(key_ids={self.key_ids!r})"

    @property
    def encrypts(self) -> bool:
        return bool(self.key_ids)

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.encrypt(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.decrypt(p) for p in payloads]

    def encrypt(self, p: Payload) -> Payload:
        if not self.key_ids:
            return p
        kid = self.key_ids[0]
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._ciphers[kid].encrypt(nonce, p.SerializeToString(), kid.encode())
        return Payload(metadata={"encoding": ENCODING, KEY_ID: kid.encode()}, data=nonce + sealed)

    def decrypt(self, p: Payload) -> Payload:
        if p.metadata.get("encoding") != ENCODING:
            if self.refuse_plain:
                return Payload(metadata={"encoding": UNENCRYPTED,
                                         _WAS: p.metadata.get("encoding", b"")[:64]})
            return p
        raw_id = p.metadata.get(KEY_ID)
        if raw_id is None:
            raise DecryptionError(f"an encrypted payload carries no {KEY_ID}")
        kid = raw_id.decode("utf-8", "replace")
        cipher = self._ciphers.get(kid)
        if cipher is None:
            held = (
                f"it holds {', '.join(self.key_ids)}" if self.key_ids else "it is not set"
            )
            raise DecryptionError(
                f"payload encrypted with key {kid!r}, which {ENCRYPTION_KEYS_VAR} does not "
                f"hold ({held})"
            )
        if len(p.data) < NONCE_BYTES + TAG_BYTES:
            raise DecryptionError(f"payload encrypted with key {kid!r} is truncated")
        nonce, sealed = p.data[:NONCE_BYTES], p.data[NONCE_BYTES:]
        try:
            inner = cipher.decrypt(nonce, sealed, raw_id)
        except InvalidTag:
            raise DecryptionError(
                f"payload encrypted with key {kid!r} does not decrypt with the key of that id "
                f"in {ENCRYPTION_KEYS_VAR}: another key under the same id, or an altered payload"
            ) from None
        return Payload.FromString(inner)


class CodecChain(PayloadCodec):
    """Codecs applied in order when encoding, in reverse when decoding."""

    def __init__(self, *codecs: PayloadCodec) -> None:
        self.codecs = codecs

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = list(payloads)
        for codec in self.codecs:
            out = await codec.encode(out)
        return out

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = list(payloads)
        for codec in reversed(self.codecs):
            out = await codec.decode(out)
        return out


def refusal(encoding: bytes) -> str:
    """Why a worker with keys refuses a payload that came with ``encoding``, unencrypted."""
    was = encoding.decode("utf-8", "replace") or "none"
    return (
        f"refused: a payload that is not encrypted (encoding {was!r}): this worker has "
        f"{ENCRYPTION_KEYS_VAR} and takes a run's input, signals and updates only encrypted "
        "with the deployment's key; send them through a plangate client with the same "
        f"{ENCRYPTION_KEYS_VAR}"
    )


class _RefusedPayloads(EncodingPayloadConverter):
    """The ``UNENCRYPTED`` marker, refused wherever it is to become a value."""

    @property
    def encoding(self) -> str:
        return UNENCRYPTED.decode()

    def to_payload(self, value: Any) -> Payload | None:
        return None  # never makes one: the other converters serialize every value

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> NoReturn:
        # a FailureError: the SDK fails the run (or rejects the update) rather than retrying
        # its workflow task forever
        raise ApplicationError(
            refusal(payload.metadata.get(_WAS, b"")), type=REFUSED_TYPE, non_retryable=True
        )


class RefusingPayloadConverter(PydanticPayloadConverter):
    """The pydantic payload converter that refuses the ``UNENCRYPTED`` marker."""

    def __init__(self) -> None:
        super().__init__()
        self._set_converters(*self.converters.values(), _RefusedPayloads())


class _FailureConverter(DefaultFailureConverterWithEncodedAttributes):
    """Failure messages and stack traces encoded (encrypted), but for the refusal of an
    unencrypted payload: it holds nothing of a run, and a submitter without keys must read it."""

    def __init__(self) -> None:
        super().__init__()
        self._clear = DefaultFailureConverter()

    def to_failure(
        self, exception: BaseException, payload_converter: PayloadConverter, failure: Failure
    ) -> None:
        if isinstance(exception, ApplicationError) and exception.type == REFUSED_TYPE:
            self._clear.to_failure(exception, payload_converter, failure)
        else:
            super().to_failure(exception, payload_converter, failure)


def payload_codec(
    encryption: EncryptionSettings, *, refuse_plain: bool = False,
    compress_from: int = COMPRESS_FROM,
) -> CodecChain:
    """The deployment's codec: payloads of ``compress_from`` bytes or more compressed, then
    every payload encrypted with ``encryption.keys`` (none: not encrypted). ``refuse_plain``
    (with keys): a payload that is not encrypted decodes to the ``UNENCRYPTED`` marker."""
    return CodecChain(
        CompressionCodec(compress_from),
        EncryptionCodec(encryption.keys, refuse_plain=refuse_plain),
    )


def data_converter(
    encryption: EncryptionSettings, *, refuse_plain: bool = False,
    compress_from: int = COMPRESS_FROM,
) -> DataConverter:
    """The pydantic data converter with the deployment's codec (``payload_codec``); with keys,
    failure messages and stack traces encoded (so encrypted) too. Every plangate client and
    worker is built with it (``plangate.client.connection.connect``). ``refuse_plain``, a
    worker's: with keys, every payload that is not encrypted is refused (the module's
    docstring). ``compress_from``: ``plangate.worker.compression``'s thresholds."""
    codec = payload_codec(encryption, refuse_plain=refuse_plain, compress_from=compress_from)
    if not encryption.keys:
        return dataclasses.replace(pydantic_data_converter, payload_codec=codec)
    failures: type[FailureConverter] = _FailureConverter
    return dataclasses.replace(
        pydantic_data_converter,
        payload_converter_class=(
            RefusingPayloadConverter if refuse_plain else PydanticPayloadConverter
        ),
        payload_codec=codec,
        failure_converter_class=failures,
    )


def encrypts_with(converter: DataConverter, encryption: EncryptionSettings) -> bool:
    """Whether ``converter`` encrypts with the key ``encryption`` names first (true of any
    converter when it names no keys)."""
    if not encryption.keys:
        return True
    codec = converter.payload_codec
    codecs = codec.codecs if isinstance(codec, CodecChain) else (codec,)
    return any(
        isinstance(c, EncryptionCodec) and c.key_ids[:1] == encryption.key_ids[:1]
        for c in codecs
    )
