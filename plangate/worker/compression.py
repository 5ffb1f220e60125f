"""Large payloads, compressed: a run's report and what it carries when it continues as new grow
with the plan (about 1.7 KB of JSON per step), and Temporal warns at 512 KiB per payload and
refuses 2 MiB. A payload of ``COMPRESS_FROM`` bytes or more is stored zlib-compressed
(encoding ``binary/zlib``); smaller ones stay plain JSON, readable in the Temporal UI as they
are. 64 KiB: a plan of a few hundred steps is compressed in the run's input (its guards,
derived by the worker, are in the history beside it). Every plangate client, worker and
replayer decodes both (``plangate.worker.assembly``)."""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Sequence

from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter, PayloadCodec

COMPRESS_FROM = 64 * 1024
ENCODING = b"binary/zlib"


class CompressionCodec(PayloadCodec):
    def __init__(self, compress_from: int = COMPRESS_FROM) -> None:
        self.compress_from = compress_from

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self._encode(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self._decode(p) for p in payloads]

    def _encode(self, p: Payload) -> Payload:
        if p.ByteSize() < self.compress_from:  # its size, without serializing it
            return p
        whole = p.SerializeToString()
        return Payload(metadata={"encoding": ENCODING}, data=zlib.compress(whole, 6))

    @staticmethod
    def _decode(p: Payload) -> Payload:
        if p.metadata.get("encoding") != ENCODING:
            return p
        return Payload.FromString(zlib.decompress(p.data))


DATA_CONVERTER: DataConverter = dataclasses.replace(
    pydantic_data_converter, payload_codec=CompressionCodec()
)
"""The pydantic data converter, with large payloads compressed."""
