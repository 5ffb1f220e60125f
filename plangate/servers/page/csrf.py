"""A form is taken only from the page itself: the CSRF token of the session it is posted in
(``Session.csrf_matches``: a token or cookie anyone else chose matches nothing), and a request
that does not come from another site (``Origin``, ``Sec-Fetch-Site``). Either alone refuses."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit


def same_origin(headers: Mapping[str, str]) -> bool:
    site = headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return False
    origin = headers.get("origin")
    return origin is None or urlsplit(origin).netloc == headers.get("host", "")


def local_path(next_: str) -> str | None:
    """``next_`` when it is a path of this site (``/run?id=...``), else None: no scheme, no
    host (``//``), no backslash (which browsers read as ``/``), no control character."""
    if not next_.startswith("/") or next_.startswith("//") or "\\" in next_:
        return None
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in next_) or len(next_) > 2000:
        return None
    u = urlsplit(next_)
    return next_ if not (u.scheme or u.netloc) else None
