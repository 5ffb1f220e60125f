"""One problem of a plan: the line ``plangate check`` prints, with the place it names kept
beside it, so no reader has to parse the line back (the MCP front door reads ``step`` and
``field``).

A ``Problem`` is a ``str`` (its line, byte for byte as before): every message, every join and
every comparison with a string stays as it was; JSON and pydantic see a plain string, and only
code in this process that asks for ``.step`` or ``.field`` sees more.
"""

from __future__ import annotations

from typing import Any


class Problem(str):
    """A problem's line, and the place it names:

    - ``step``: the step, by its ``n``; by its place in the list (``"#3"``: the third step)
      where its ``n`` is unusable; None: the plan (or its file) as a whole;
    - ``field``: the field as the plan spells it (``args.bucket``, ``pre[0].probe``), None
      where it names the step or the plan as a whole;
    - ``why``: the line without its place;
    - ``lint``: a lint warning refused as a problem (``--strict``, ``(strict)`` in front).

    Build one with ``at``, ``plan`` or ``of``; the line is derived from the place, never the
    other way round.
    """

    step: int | str | None
    field: str | None
    why: str
    lint: bool

    def __new__(
        cls, line: str, step: int | str | None = None, field: str | None = None,
        why: str | None = None, lint: bool = False,
    ) -> Problem:
        self = super().__new__(cls, line)
        self.step = step
        self.field = field
        self.why = line if why is None else why
        self.lint = lint
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        # str's own reduction would rebuild it from the line alone, losing the place
        return (type(self), (str(self), self.step, self.field, self.why, self.lint))

    @classmethod
    def at(cls, step: int | str | None, field: str | None, why: str) -> Problem:
        """``step 2, field args.bucket: why``; ``step 2: why`` (no field); ``plan, field goal:
        why`` (no step); ``plan: why`` (neither)."""
        where = "plan" if step is None else f"step {step}"
        if field is not None:
            where += f", field {field}"
        return cls(f"{where}: {why}", step, field, why)

    @classmethod
    def plan(cls, why: str, source: str = "plan") -> Problem:
        """A problem of the whole plan, or of what it was read from (``source``: a file name,
        ``model answer``): ``<source>: why``."""
        return cls(f"{source}: {why}", None, None, why)

    @classmethod
    def of(cls, line: str) -> Problem:
        """``line`` as a problem: a Problem as it is; a plain string (from outside the plan
        language) as a problem of the whole plan, its ``why`` the whole line."""
        return line if isinstance(line, Problem) else cls(line)

    def strict(self) -> Problem:
        """This lint warning as a problem under ``--strict``: ``(strict) `` in front."""
        return type(self)(f"(strict) {self}", self.step, self.field, self.why, lint=True)
