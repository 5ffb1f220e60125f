"""Payloads compressed: a payload of the codec's threshold or more is stored zlib-compressed
(encoding ``binary/zlib``); smaller ones stay plain JSON. Every plangate client, worker,
replayer and the codec server (``plangate codec-server``, for the Temporal UI) decodes both
(``plangate.worker.assembly``).

Two thresholds. What plangate's worker writes into its own runs' histories (a step's call and
its result, the report, the memo, an Update's answer): ``WORKER_COMPRESS_FROM``, 256 bytes
(issue 39). A guarded step's call and result (its reads, timings and output: 0.45 and 0.8 KB
of JSON) are most of what a step adds to its history, and compress to about half in 7 us each;
a run's report (about 1.7 KB of JSON a step) to a tenth. What a client sends
(``COMPRESS_FROM``, 64 KiB: a plan, an answer, a cancel) can be bound for a team's own workflow
(``plangate.temporal``), whose worker decodes with the team's converter, not this codec; only
a payload near Temporal's limits (it warns at 512 KiB and refuses 2 MiB) is compressed there."""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Sequence

from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter, PayloadCodec

COMPRESS_FROM = 64 * 1024
WORKER_COMPRESS_FROM = 256
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
        return opened(p)


def opened(p: Payload) -> Payload:
    """The payload as it was before compression (one that was not compressed, as it is)."""
    if p.metadata.get("encoding") != ENCODING:
        return p
    return Payload.FromString(zlib.decompress(p.data))


DATA_CONVERTER: DataConverter = dataclasses.replace(
    pydantic_data_converter, payload_codec=CompressionCodec()
)
"""The pydantic data converter, with large payloads compressed."""
