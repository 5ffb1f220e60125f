"""Text a plan, a model or a payload wrote, made safe to show: every character that could act on
a terminal or hide from a reader what is there is shown as an escape instead. An ESC starts a
terminal's control sequences (colours, moving the cursor, rewriting what was printed, setting the
window title), a CR overwrites a line, a right-to-left override (U+202E) reorders what follows,
and a zero-width character hides a difference between two names.

Shown escaped: every character of Unicode's category C (C0 and C1 controls and DEL, format
characters such as the bidi overrides and isolates and the zero-width ones, surrogates, private
use, unassigned code points) and the line and paragraph separators; as ``\\n``, ``\\r`` and
``\\t``, or ``\\x1b``, ``\\u202e``, ``\\U000e0001``. A backslash is left as it is: escaping what
is already escaped changes nothing (``visible(visible(s)) == visible(s)``).

The command line (``plangate.cli``, ``plangate.client.view``) prints every such text through
these, the approval page (``plangate.servers.page``) before it HTML-escapes, and
``plangate plan`` writes such a plan's YAML in its escaped form."""

from __future__ import annotations

import unicodedata

_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def hidden(ch: str) -> bool:
    """Whether ``ch`` (one character) must be shown escaped."""
    return unicodedata.category(ch)[0] == "C" or ch in "\u2028\u2029"


def _escape(ch: str) -> str:
    if ch in _SHORT:
        return _SHORT[ch]
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(text: object, *, lines: bool = False) -> str:
    """``str(text)`` with every hidden character escaped; with ``lines``, line feeds are kept
    (a text of several lines, each made visible)."""
    s = str(text)
    return "".join(
        _escape(ch) if hidden(ch) and not (lines and ch == "\n") else ch for ch in s
    )


def visible_json(document: str) -> str:
    """A JSON document with every hidden character its serializer left as it is (DEL, C1
    controls, bidi and other format characters, separators) written as a ``\\uXXXX`` escape:
    the same JSON value, safe on a terminal. Such characters can stand only inside strings
    (JSON's whitespace is ASCII, and serializers escape the C0 controls), where the escape
    means the character itself."""
    out = []
    for ch in document:
        if ch > "\x7e" and hidden(ch):
            code = ord(ch)
            if code >= 0x10000:  # a surrogate pair, as JSON spells characters beyond the BMP
                code -= 0x10000
                out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
            else:
                out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)
