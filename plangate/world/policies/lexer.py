"""Cedar's tokens, as its grammar has them (docs.cedarpolicy.com, "Grammar"): identifiers,
integers, strings (with ``\\`` escapes, over lines), slots (``?principal``), the two-character
operators ``:: && || == != <= >=`` and every other character alone; blanks and ``//`` comments
between them (Cedar has no block comments). Each token keeps its offsets in the file, so a
problem is named at the token it is about.

A policy ends at a ``;``: outside a string Cedar has no other ``;``, so a policy left open (an
unclosed ``(``) never swallows the next.
"""

from __future__ import annotations

from dataclasses import dataclass

TWO_CHARACTERS = frozenset({"::", "&&", "||", "==", "!=", "<=", ">="})
OPENERS = {"(": ")", "[": "]", "{": "}"}
CLOSERS = frozenset(OPENERS.values())


@dataclass(frozen=True)
class Token:
    start: int
    end: int
    text: str
    unclosed_string: bool = False  # the file ends before its closing ``"``


def _digit(c: str) -> bool:
    return "0" <= c <= "9"


def _start(c: str) -> bool:
    """What an identifier starts with: ``[_a-zA-Z]``."""
    return c.isascii() and (c.isalpha() or c == "_")


def tokens(text: str) -> list[Token]:
    found: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        j, unclosed = i + 1, False
        if c == '"':
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            unclosed = j >= n
            j = min(j + 1, n)
        elif _digit(c):
            while j < n and _digit(text[j]):
                j += 1
        elif _start(c) or (c == "?" and j < n and _start(text[j])):
            while j < n and (_start(text[j]) or _digit(text[j])):
                j += 1
        elif text[i:i + 2] in TWO_CHARACTERS:
            j = i + 2
        found.append(Token(i, j, text[i:j], unclosed))
        i = j
    return found


@dataclass
class Chunk:
    """One policy of a file as written: its tokens, to its ``;`` (if it has one)."""

    tokens: list[Token]

    @property
    def start(self) -> int:
        return self.tokens[0].start

    @property
    def end(self) -> int:
        return self.tokens[-1].end


def split(found: list[Token]) -> list[Chunk]:
    """The policies of a file: each ends with a ``;`` (or the file's end)."""
    chunks: list[Chunk] = []
    current: list[Token] = []
    for t in found:
        current.append(t)
        if t.text == ";":
            chunks.append(Chunk(current))
            current = []
    if current:
        chunks.append(Chunk(current))
    return chunks


def line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1
