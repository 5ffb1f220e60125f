"""Where in a policy the problem Cedar names is. ``cedarpy`` gives no positions (a parse error
is a bare message, a validation error a policy id and a message), so Cedar is asked again, about
less, and never is the place guessed from its message's words:

- a syntax error is at the first token after which the text can no longer be a policy (Cedar's
  parser on each prefix, ended with a ``;``, at the tokens of ``lexer``); a bracket or string
  that the policy's ``;`` (or a closer of another bracket) finds open is named at its opener; a
  policy followed by another without its ``;`` is named at its end;
- an error Cedar finds only in a whole policy (``=`` for ``==``, an invalid variable, a type,
  an attribute not found) is at each narrowest part of the policy (``shape``) that, standing
  alone as a policy, has the same error: an attribute at its name, an operator's misuse at its
  operator (a syntax error) or first operand (a type), a condition that is no ``Bool`` at its
  start, a variable missing from the scope at its ``)``. Where no part alone has it, the
  policy's start.
"""

from __future__ import annotations

from collections.abc import Callable

import cedarpy

from plangate.world.policies.lexer import CLOSERS, OPENERS, Chunk, Token
from plangate.world.policies.shape import CONDITION, VALUE, VARIABLES, Part, parts

EOF = "unexpected end of input"
_AT_THE_END = "unexpected token `;`"
MISSING_SEMICOLON = "a policy ends with ;"
NEUTRAL_SCOPE = ", ".join(VARIABLES)


def parse_error(s: str) -> str | None:
    """Cedar's parse error for ``s``, or ``None``."""
    try:
        cedarpy.PolicySet.from_str(s)
    except ValueError as e:
        return str(e)
    return None


def _grammar(message: str) -> bool:
    """Cedar's parser's own errors (the others come after, from what it parsed)."""
    return message in (EOF, "invalid token") or message.startswith(
        ("unexpected token", "extra token"))


def _cannot_go_on(prefix: str) -> str | None:
    """Cedar's syntax error in ``prefix`` when no text after it could make it a policy.

    Cedar's parser recovers from an error at the next ``;``, and names the first error it
    recovered from; without that ``;`` it names only the end of the input. So the prefix is
    ended with a ``;``: an error at that ``;`` means the prefix could go on."""
    said = parse_error(prefix + " ;")
    return said if said and _grammar(said) and said != _AT_THE_END else None


def syntax_error(text: str, chunk: Chunk, message: str) -> tuple[int, str, int | None]:
    """Where ``chunk`` (which Cedar refused with ``message``) goes wrong: (offset, message,
    the index of its token a next policy starts at when this one lacks its ``;``)."""
    toks, open_ = chunk.tokens, list[Token]()
    for k, t in enumerate(toks):
        if t.unclosed_string:
            return t.start, '`"` is never closed', None
        last = k == len(toks) - 1 and t.text == ";"
        said = message if last else _cannot_go_on(text[chunk.start:t.end])
        if said is None:
            if t.text in OPENERS:
                open_.append(t)
            elif open_ and t.text == OPENERS[open_[-1].text]:
                open_.pop()
            continue
        # the next policy: ``@``, or its effect (read as a condition's name until its ``(``)
        for j in (k, k - 1):
            if j > 0 and toks[j].text in ("permit", "forbid", "@") and parse_error(
                    text[chunk.start:toks[j - 1].end] + ";") is None:
                return toks[j - 1].end, MISSING_SEMICOLON, j
        if open_ and (t.text == ";" or (t.text in CLOSERS and t.text != OPENERS[open_[-1].text]
                                        and t.text in (OPENERS[o.text] for o in open_))):
            return open_[-1].start, f"`{open_[-1].text}` is never closed", None
        if last and not _grammar(said):  # found once the policy was read: which part has it
            found = places(text, chunk, lambda s: parse_error(s) == message, syntax=True)
            return (found[0] if found else chunk.start), said, None
        return t.start, said, None
    if open_:
        return open_[-1].start, f"`{open_[-1].text}` is never closed", None
    if parse_error(text[chunk.start:chunk.end] + ";") is None:
        return chunk.end, MISSING_SEMICOLON, None
    return chunk.end, message, None


def places(text: str, chunk: Chunk, has: Callable[[str], bool], *,
           syntax: bool = False) -> list[int]:
    """The offsets of the narrowest parts of ``chunk`` that alone have the error (``has``):
    one per place it is made, in the policy's order."""
    toks = chunk.tokens

    def source(p: Part) -> str:
        return text[toks[p.first].start:toks[p.last].end]

    found, scope = parts(toks, text)
    scope_text = NEUTRAL_SCOPE
    if scope and scope[0] <= scope[1] and not syntax:
        written = text[toks[scope[0]].start:toks[scope[1]].end]
        if not has(f"permit({written});"):
            scope_text = written  # conditions read in the policy's own scope

    def alone(p: Part, frame: str) -> bool:
        return has(frame.format(x=source(p), scope=scope_text))

    def down(p: Part) -> list[int]:
        if not syntax and p.frame == CONDITION and not alone(p, VALUE):
            return [toks[p.first].start]  # what is wrong is that it is no Bool
        inner = [at for c in p.children if alone(c, c.frame) for at in down(c)]
        return inner or [toks[p.op if syntax and p.op is not None else p.at].start]

    return [at for p in found if alone(p, p.frame) for at in down(p)]
