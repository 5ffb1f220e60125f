"""Reading a plan from JSON or YAML text."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from plans.model import Plan


class PlanError(ValueError):
    """A plan that cannot run. ``problems`` name the step and the field of each one."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def _where(loc: tuple[int | str, ...], raw: Any) -> str:
    # Turn pydantic's ('steps', 2, 'args') into "step 3, field args" using the step's own n.
    if len(loc) >= 2 and loc[0] == "steps" and isinstance(loc[1], int):
        n: Any = loc[1] + 1
        with contextlib.suppress(KeyError, IndexError, TypeError):
            n = raw["steps"][loc[1]]["n"]
        field = ".".join(str(p) for p in loc[2:]) or "(step)"
        return f"step {n}, field {field}"
    return "plan, field " + (".".join(str(p) for p in loc) or "(root)")


def parse_plan(raw: Any) -> Plan:
    try:
        return Plan.model_validate(raw)
    except ValidationError as e:
        raise PlanError(
            [f"{_where(tuple(err['loc']), raw)}: {err['msg']}" for err in e.errors()]
        ) from None


def load_text(text: str, name: str = "plan") -> Plan:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError:
        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise PlanError([f"{name}: neither JSON nor YAML: {e}"]) from None
    if not isinstance(raw, dict):
        raise PlanError([f"{name}: a plan is an object with goal and steps"])
    return parse_plan(raw)


def load_file(path: str | Path) -> Plan:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise PlanError([f"{p}: cannot read: {e.strerror}"]) from None
    return load_text(text, str(p))
