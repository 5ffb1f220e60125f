"""A policy's parts, from its tokens, each able to stand alone as a policy of its own: its
annotations, the three parts of its scope, its ``when``/``unless`` clauses, and within those
every expression down to its names and literals (Cedar's grammar, its precedence included).

``source`` asks Cedar about the parts, alone, to find the narrowest that has the problem
Cedar names for the whole policy. The parts are read leniently (as Cedar's parser reads them
before it checks what they mean: ``=`` as an operator, any method name): this module never
fails, a part it cannot read is one token.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from plangate.world.policies.lexer import CLOSERS, OPENERS, Token

# how a part stands alone: ``{x}`` its text, ``{scope}`` the scope its conditions are read in
CONDITION = "permit({scope}) when {{ {x} }};"
VALUE = "permit({scope}) when {{ ({x}) == ({x}) }};"
CLAUSE = "permit({scope}) {x};"
ANNOTATION = "{x} permit(principal, action, resource);"
VARIABLES = ("principal", "action", "resource")
_RELATIONS = frozenset({"<", "<=", ">", ">=", "==", "!=", "in", "=", "has", "like", "is"})


@dataclass
class Part:
    """Tokens ``first..last`` (indices into the policy's tokens); ``at`` the token a problem
    of this part is named at, ``op`` the one a syntax problem is (its operator)."""

    first: int
    last: int
    at: int
    frame: str
    op: int | None = None
    children: list[Part] = field(default_factory=list)


def literal(text: str) -> str:
    """``text`` as it is in a frame (``str.format``)."""
    return text.replace("{", "{{").replace("}", "}}")


def closing(toks: list[Token], i: int) -> int:
    """The index of the bracket closing ``toks[i]``; the last token if none does."""
    depth = 0
    for j in range(i, len(toks)):
        if toks[j].text in OPENERS:
            depth += 1
        elif toks[j].text in CLOSERS:
            depth -= 1
            if depth == 0:
                return j
    return len(toks) - 1


def commas(toks: list[Token], lo: int, hi: int) -> list[tuple[int, int]]:
    """``lo..hi-1`` split at its top-level commas: (first, last) of each, empty ones left out."""
    spans, start, j = [], lo, lo
    while j < hi:
        if toks[j].text in OPENERS:
            j = closing(toks, j)
        elif toks[j].text == ",":
            spans.append((start, j - 1))
            start = j + 1
        j += 1
    spans.append((start, hi - 1))
    return [(a, b) for a, b in spans if a <= b]


def parts(toks: list[Token], text: str) -> tuple[list[Part], tuple[int, int] | None]:
    """The parts of a policy and where its scope is (inside its parentheses)."""
    found: list[Part] = []
    i, n = 0, len(toks)
    while i < n and toks[i].text == "@":
        end = closing(toks, i + 2) if i + 2 < n and toks[i + 2].text == "(" else i + 1
        found.append(Part(i, min(end, n - 1), i, ANNOTATION))
        i = end + 1
    if i + 1 >= n or toks[i + 1].text != "(":
        return found, None
    end = closing(toks, i + 1)
    scope = (i + 2, end - 1)
    # the scope as a whole (a variable missing: named at its end), then each variable
    whole = Part(i + 1, end, end, "permit{x};")
    whole.children = [_scope_part(toks, text, k, a, b)
                      for k, (a, b) in enumerate(commas(toks, i + 2, end)[:3])]
    found.append(whole)
    i = end + 1
    while i + 1 < n and toks[i + 1].text == "{":
        end = closing(toks, i + 1)
        clause = Part(i, end, i, CLAUSE)
        if i + 2 < end:
            clause.children.append(_Expressions(toks, end).read(i + 2, CONDITION))
        found.append(clause)
        i = end + 1
    return found, scope


def _scope_part(toks: list[Token], text: str, k: int, a: int, b: int) -> Part:
    around = [*VARIABLES[:k], "{x}", *VARIABLES[k + 1:]]
    frame = f"permit({', '.join(around)});"
    part = Part(a, b, a + 2 if a + 2 <= b else a, frame)
    if a + 2 <= b and toks[a + 2].text == "[":
        lead = literal(text[toks[a].start:toks[a + 2].end])
        around[k] = lead + "{x}]"
        items = f"permit({', '.join(around)});"
        close = closing(toks, a + 2)
        part.children = [Part(x, y, x, items) for x, y in commas(toks, a + 3, close)]
    return part


class _Expressions:
    """Cedar's expressions over ``toks[..end-1]``, by precedence: ``if``, ``||``, ``&&``,
    relations, ``+ -``, ``*``, ``! -``, member access, primaries."""

    def __init__(self, toks: list[Token], end: int) -> None:
        self.toks, self.end, self.i = toks, end, 0

    def peek(self) -> str:
        return self.toks[self.i].text if self.i < self.end else ""

    def read(self, start: int, frame: str) -> Part:
        self.i = start
        return self.expression(frame)

    def expression(self, frame: str) -> Part:
        first = self.i
        if self.peek() == "if":
            self.i += 1
            parts = [self.expression(CONDITION)]
            for word in ("then", "else"):
                if self.peek() == word:
                    self.i += 1
                    parts.append(self.expression(VALUE))
            return Part(first, self.i - 1, first, frame, children=parts)
        return self.binary(frame, 0)

    _LEVELS = (({"||"}, CONDITION), ({"&&"}, CONDITION), (_RELATIONS, VALUE),
               ({"+", "-"}, VALUE), ({"*"}, VALUE))

    def binary(self, frame: str, level: int) -> Part:
        if level == len(self._LEVELS):
            return self.unary(frame)
        ops, inner = self._LEVELS[level]
        left = self.binary(inner, level + 1)
        if self.peek() not in ops:
            left.frame = frame  # no operator here: the operand stands where this one does
        while self.peek() in ops:
            op = self.i
            self.i += 1
            kids = [left]
            if self.toks[op].text in ("has", "like"):
                self.i += 1  # the attribute (``a.b.c`` too), the pattern
                while self.toks[op].text == "has" and self.peek() == ".":
                    self.i += 2
            elif self.toks[op].text == "is":
                self.i += 1  # the entity type's path
                while self.peek() == "::":
                    self.i += 2
                if self.peek() == "in":
                    self.i += 1
                    kids.append(self.binary(VALUE, level + 1))
            else:
                kids.append(self.binary(inner, level + 1))
            left = Part(left.first, self.i - 1, left.first, frame, op, kids)
        return left

    def unary(self, frame: str) -> Part:
        first = self.i
        if self.peek() in ("!", "-"):
            self.i += 1
            inner = self.unary(CONDITION if self.toks[first].text == "!" else VALUE)
            return Part(first, self.i - 1, first, frame, first, [inner])
        return self.member(frame)

    def member(self, frame: str) -> Part:
        part = self.primary(frame)
        while self.peek() in (".", "["):
            part.frame = VALUE
            kids = [part]
            name = self.i + 1
            if self.peek() == ".":
                self.i += 2
                if self.peek() == "(":
                    kids += self.items()
            else:
                self.i = closing(self.toks, self.i) + 1
            name = min(name, self.end - 1)
            part = Part(part.first, self.i - 1, name, frame, name, kids)
        return part

    def items(self) -> list[Part]:
        """The comma-separated expressions from the opener at ``self.i`` to its closer (a
        record's values)."""
        end = min(closing(self.toks, self.i), self.end)
        self.i += 1
        kids = []
        while self.i < end:
            kids.append(self.expression(VALUE))
            if self.peek() == ":":
                self.i += 1
                kids[-1] = self.expression(VALUE)
            if self.peek() == ",":
                self.i += 1
            elif self.i < end:
                self.i = end  # not read: the whole is one part
        self.i = end + 1
        return kids

    def primary(self, frame: str) -> Part:
        first, t = self.i, self.peek()
        if not t:
            return Part(self.end - 1, self.end - 1, self.end - 1, frame)
        if t == "(":
            kids = self.items()[:1]
            for kid in kids:
                kid.frame = frame
            return Part(first, self.i - 1, first + 1, frame, children=kids)
        if t in ("[", "{"):
            kids = self.items()
            return Part(first, self.i - 1, first, frame, children=kids)
        self.i += 1
        while self.peek() == "::":
            self.i += 2
        if self.peek() == "(":  # an extension function
            kids = self.items()
            return Part(first, self.i - 1, first, frame, children=kids)
        return Part(first, self.i - 1, first, frame)
