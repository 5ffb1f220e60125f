"""The tokens a person sets for plangate's servers (``PLANGATE_CODEC_TOKEN``) are taken only
with real entropy: a server that holds keys must not be opened by a guess. (The approval page's
login tokens are derived from approver keys: ``records.signing.SigningKey.login_token``.)

The estimate is conservative (it may refuse a random token, never take a guessable one): the
least of three readings of the token itself, each an upper bound on what a guesser faces:

- its length times the entropy of its characters' frequencies (``aaaa...``: 0 bits);
- its length times the entropy of the steps between neighbouring characters
  (``abcdefgh...``: a handful of bits, though every character differs);
- eight bits per byte of its zlib-compressed form past zlib's own overhead (``Xy7#Xy7#...``).

``secrets.token_urlsafe(32)`` (256 random bits) reads at about 190-220 bits, always above
``MIN_BITS``; ``token_urlsafe(16)``, at about 90, is refused."""

from __future__ import annotations

import ipaddress
import itertools
import math
import socket
import zlib
from collections import Counter
from collections.abc import Hashable, Iterable

MIN_BITS = 128
MAKE_ONE = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
_ZLIB_OVERHEAD = 11  # bytes zlib adds to any input: header, block header, checksum


def _entropy(symbols: Iterable[Hashable]) -> float:
    counts = Counter(symbols)
    n = sum(counts.values())
    return -sum(c / n * math.log2(c / n) for c in counts.values()) if n else 0.0


def estimated_bits(token: str) -> int:
    """A conservative estimate of the token's entropy in bits (see the module's docstring)."""
    n = len(token)
    if n < 2:
        return 0
    chars = n * _entropy(token)
    steps = n * _entropy(ord(b) - ord(a) for a, b in itertools.pairwise(token))
    packed = 8 * max(0, len(zlib.compress(token.encode(), 9)) - _ZLIB_OVERHEAD)
    return int(min(chars, steps, packed))


def weakness(variable: str, token: str) -> str | None:
    """Why ``token`` (the value of ``variable``) is too weak to guard a server, in one line
    that says how to make a good one; None when it is strong enough."""
    bits = estimated_bits(token)
    if bits >= MIN_BITS:
        return None
    return (
        f"{variable} is too weak: about {bits} bits of entropy by a conservative estimate, "
        f"at least {MIN_BITS} are needed (a short or repetitive token can be guessed); make "
        f"one with: {MAKE_ONE}"
    )


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` names is a loopback address (``""``, all interfaces, is
    not; a name that does not resolve is not)."""
    if not host:
        return False
    try:
        found = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError:
        return False
    addresses = {str(info[4][0]).split("%", 1)[0] for info in found}
    return bool(addresses) and all(ipaddress.ip_address(a).is_loopback for a in addresses)


def access_refusal(
    server: str, variable: str, token: str | None, host: str, insecure_local: bool, harm: str
) -> str | None:
    """Why a server guarded by the token in ``variable`` must not start on ``host``, or None:
    a weak token; no token off loopback; no token on loopback unless ``insecure_local``.
    ``harm``: what anyone who reaches it could do ("decrypt ...")."""
    if token is not None:
        return weakness(variable, token)
    if not is_loopback(host):
        return (
            f"{server}: refusing to listen on {host or 'every address'} without {variable}: "
            f"anyone who reaches it could {harm}; set {variable} (make one with: {MAKE_ONE}), "
            "or serve this machine only with --host 127.0.0.1 --insecure-local"
        )
    if not insecure_local:
        return (
            f"{server}: {variable} is not set: every process on this machine could {harm}; "
            f"set it (make one with: {MAKE_ONE}), or pass --insecure-local to serve a loopback "
            "address without a token"
        )
    return None
