"""Plan fuzzing (issue 12, part 2): hypothesis strategies for raw plans, from well-formed to
hostile, and the oracles every plan is judged by. ``tests/test_plan_fuzz.py`` runs a few hundred
examples in CI; ``python -m bench.fuzz`` runs the full count.

**What is drawn.** A plan starts well formed, from steps the fuzz world (:func:`seed_world`)
answers quickly: named statements, S3 gets and puts, loads, the demo billing, CRM and mail tools,
with conditions, bindings and references, dependencies, small waits and approvals. Then zero or
more mutations: any value replaced by a hostile one (wrong types, huge and tiny numbers, NaN and
infinity, odd unicode, path tricks, injection text), fields deleted or added, steps duplicated,
dependencies made dangling, circular or self-referential, references unbound or undepended,
JSON paths broken, waits and approvals and run-level fields at and past their limits, sizes at
and past the limits of ``plans.limits``. Or the plan is arbitrary JSON. It reaches plangate as a
file (JSON, YAML, or bytes corrupted on the way: NUL bytes, Latin-1, a BOM, truncation, NaN and
5,000-digit literals, duplicate keys, YAML tags and anchors) through ``plangate check`` and
``plangate run`` in-process, or as a Python mapping through the API (``plangate.client.api.check``).

**The oracles.** :func:`judge_check`: ``check`` exits 0 (valid) or 2 (rejected, one line per
problem, each naming the step and the field, the plan, or the file; no traceback) and the API
returns the plan or raises ``PlanError`` with problems of the same shape; nothing else, and no
problem line that is not one line. :func:`judge_run`: an accepted plan, started by ``plangate
run``, ends in a final state (cards answered by the drawn decisions), ``plangate status`` prints
it, its history holds no failed workflow task and its report no internal error. A rejected plan
is refused by ``run`` too, with the same problems, and no workflow exists.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import math
import re
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from plangate.cli import main
from plangate.client.api import Plangate, UnknownRun
from plangate.client.checked import check as api_check
from plangate.demo.schema import Account, ensure_demo_schema, seed_account
from plangate.plans.load import PlanError, shown
from plangate.plans.model import Plan
from plangate.records.approvals import CardStatus
from plangate.records.report import RunReport
from plangate.world.clients import World
from plangate.world.settings import Settings

# -- the world accepted plans run against --------------------------------------------------------
BUCKET = "fuzz-drops"
CSV = b"id,name\n1,a\n2,b\n3,c\n"
OBJECTS = {"in/rows.csv": CSV, "in/empty.csv": b"", "in/odd \u2713 name.csv": CSV}
KEYS = [*OBJECTS, "in/missing.csv"]
ACCOUNT = Account(
    account_id="acct_fuzz",
    billing_contact="ar@fuzz.example",
    invoices=(("in_fuzz1", Decimal("10.00"), "draft"),),
    subscriptions=(("sub_fuzz1", "active"),),
)
ACCOUNTS = [ACCOUNT.account_id, "acct_nobody"]
JOBS = ["fz-a", "fz-b", "fz-c"]
STATES = ["requested", "done"]
TABLES = ["fuzz.t1", "fuzz.t2", "fuzz_t3"]
DESTS = ["fz/a.csv", "fz/b.csv", "fz/sub/c.csv"]
MAX_RUN_WAIT_S = 3.0  # the longest wait an accepted plan of the run part may carry


async def seed_world(world: World) -> None:
    """The bucket and objects, the demo account (reset each time), the jobs."""

    def s3() -> None:
        with contextlib.suppress(Exception):
            world.s3.create_bucket(Bucket=BUCKET)
        for key, body in OBJECTS.items():
            world.s3.put_object(Bucket=BUCKET, Key=key, Body=body)

    await asyncio.to_thread(s3)
    await ensure_demo_schema(world)
    await seed_account(world, ACCOUNT)


# -- hostile values --------------------------------------------------------------------------------
HUGE_DIGITS = "9" * 5000  # past Python's 4,300-digit limit for int <-> str

ODD_STRINGS: list[str] = [
    "", " ", "\0", "a\nb", "a\r\nb", "\u2028", "\u2029", "\x85", "\x1c", "\x0b", "\u202e evil",
    "\ufeff", "\u200b", "\udcff", "\ud800x", "e\u0301", "\u00e9", "\U0001d518\U0001d52b",
    "\U0001f600", "${x}", "${", "${}", "${ x }", "$${x}", "pre ${missing} post", "$", "$.", "$[",
    "$.a[", "$['a']", '$["a"]', "$.a..b", "$[-1]", "$[99999999999999999999]", "..", "../x",
    "../../etc/passwd", "/etc/passwd", "/", ".", "./", "w/..", "w/", "w//x", "w/./x", "~",
    "~/x", "a" * 300, "a/" * 2100 + "x", "x" * 1025, "'; DROP TABLE x; --", "pg_catalog.pg_class",
    "plangate.loads", "information_schema.tables", "%s", "%(x)s", "{0}", "{x}", "\\", "*", "?",
    "NaN", "Infinity", "null", "true", "1e999", "0x10", "1_000", "required", "REQUIRED",
    "read", "money", "halt", "retry", "2026-03-01", "2026-03-01T00:00:00", "9999-12-31T23:59:59Z",
    "0001-01-01T00:00:00+00:00", "2026-02-30T00:00:00Z",
]
BIG_STRINGS = ["y" * (64 * 1024 - 2), "y" * (64 * 1024 - 1), "z" * (200 * 1024)]
ODD_NUMBERS: list[Any] = [
    0, -1, 1, 2, 7, 1000, 1001, 2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64, -(2**63) - 1, 10**30,
    0.0, -0.0, 0.5, 1.0, 1.5, 0.999999, 1e-300, 5e-324, 1e308, 604800.0, 604800.0001,
    604799.9999, math.nan, math.inf, -math.inf,
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from(ODD_NUMBERS),
    st.integers(),
    st.floats(),
    st.sampled_from(ODD_STRINGS),
    st.text(max_size=12),
    st.text(st.characters(codec="utf-8"), max_size=6),
)
hostile: st.SearchStrategy[Any] = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(st.sampled_from(ODD_STRINGS), st.text(max_size=5)), inner,
                        max_size=3),
    ),
    max_leaves=6,
)


def nested(depth: int) -> Any:
    """A value nesting ``depth`` levels of lists and objects."""
    v: Any = "deep"
    for i in range(depth):
        v = [v] if i % 2 else {"d": v}
    return v


# -- well-formed steps the world answers quickly ---------------------------------------------------
def _cond(draw: st.DrawFn, cheap: bool) -> dict[str, Any]:
    kind = draw(st.sampled_from([
        "job", "object", "rowcount", "column", "file", "loaded", "index", "content",
    ]))
    out: dict[str, Any]
    if kind == "job":
        out = {"probe": "job_state", "job_id": draw(st.sampled_from(JOBS)),
               "want": draw(st.sampled_from(STATES))}
    elif kind == "object":
        out = {"probe": "object_exists", "bucket": BUCKET, "key": draw(st.sampled_from(KEYS))}
    elif kind == "rowcount":
        out = {"probe": "table_rowcount", "table": draw(st.sampled_from(TABLES)),
               "min": draw(st.integers(0, 4))}
        if draw(st.booleans()):
            out["max"] = draw(st.integers(out["min"], 5))
    elif kind == "column":
        out = {"probe": "column_exists", "table": draw(st.sampled_from(TABLES)),
               "column": draw(st.sampled_from(["id", "name", "nope"]))}
    elif kind == "file":
        out = {"probe": "local_file_nonempty", "path": draw(st.sampled_from(DESTS))}
    elif kind == "loaded":
        out = {"probe": "table_loaded_from", "table": draw(st.sampled_from(TABLES)),
               "source": draw(st.sampled_from(DESTS))}
    elif kind == "index":
        out = {"probe": "index_valid", "name": draw(st.sampled_from(["fz_idx", "fuzz.fz_idx"]))}
    else:
        out = {"probe": "object_content_equals", "bucket": BUCKET,
               "key": draw(st.sampled_from(["out/1", "out/2", *KEYS])),
               "body": draw(st.sampled_from(["v1", "v2", ""]))}
    if draw(st.integers(0, 5)) == 0:
        most = MAX_RUN_WAIT_S if cheap else 7 * 24 * 3600.0
        timeout = draw(st.floats(1.0, most))
        out["wait"] = {"timeout_s": timeout, "interval_s": draw(st.floats(1.0, timeout))}
    return out


def _field_cond(draw: st.DrawFn) -> dict[str, Any]:
    probe = draw(st.sampled_from(["field_equals", "field_not_equals", "field_present",
                                  "effect_recorded"]))
    if probe == "effect_recorded":
        return {"probe": probe}
    out: dict[str, Any] = {"probe": probe, "path": draw(st.sampled_from(
        ["$.status", "$.archived", "$.account_id", "$.version", "$.nope", "$.invoices[0]"]))}
    if probe != "field_present":
        out["value"] = draw(st.sampled_from(["active", "closed", False, True, 1, None]))
    return out


TOOLS_WITH_READER = {"billing.list_invoices", "customer.get", "customer.update",
                     "customer.restore", "billing.void_invoice", "billing.cancel_subscription",
                     "billing.issue_credit", "email.send", "billing.get_invoice",
                     "billing.get_subscription"}


def _tool(draw: st.DrawFn, n: int, refs: Sequence[str]) -> dict[str, Any]:
    """One step's tool, arguments and bindings (``refs``: names bound by steps it depends on)."""
    kind = draw(st.sampled_from([
        "select_one", "set_job", "sample", "analyze", "index", "get", "put", "load",
        "list_invoices", "customer_get", "customer_update", "restore", "email", "credit",
        "void", "cancel_sub",
    ]))
    ref = (lambda: "${" + draw(st.sampled_from(list(refs))) + "}") if refs else None
    acct = draw(st.sampled_from(ACCOUNTS))
    out: dict[str, Any]
    if kind == "select_one":
        out = {"tool": "warehouse.run_sql", "args": {"statement": "select_one"}}
    elif kind == "set_job":
        job = ref() if ref and draw(st.booleans()) else draw(st.sampled_from(JOBS))
        out = {"tool": "warehouse.run_sql", "args": {
            "statement": "set_job_state",
            "params": {"job_id": job, "state": draw(st.sampled_from(STATES))}}}
    elif kind == "sample":
        out = {"tool": "warehouse.run_sql", "args": {
            "statement": "sample_rows",
            "params": {"table": draw(st.sampled_from(TABLES)), "limit": draw(st.integers(1, 5))}}}
    elif kind == "analyze":
        out = {"tool": "warehouse.run_sql", "args": {
            "statement": "analyze", "params": {"table": draw(st.sampled_from(TABLES))}}}
    elif kind == "index":
        out = {"tool": "warehouse.run_sql", "args": {
            "statement": "create_index",
            "params": {"name": "fz_idx", "table": draw(st.sampled_from(TABLES)),
                       "column": draw(st.sampled_from(["id", "name"]))}}}
    elif kind == "get":
        out = {"tool": "s3.get", "args": {"bucket": BUCKET, "key": draw(st.sampled_from(KEYS)),
                                          "dest": draw(st.sampled_from(DESTS))},
               "binds": {f"etag{n}": "$.etag", f"size{n}": "$.size"}}
    elif kind == "put":
        body = f"etag was {ref()}" if ref and draw(st.booleans()) else draw(
            st.sampled_from(["v1", "v2", "\u2713"]))
        out = {"tool": "s3.put", "args": {"bucket": BUCKET,
                                          "key": draw(st.sampled_from(["out/1", "out/2"])),
                                          "body": body}}
        if draw(st.integers(0, 3)) == 0:
            out["args"]["if_none_match"] = "*"
    elif kind == "load":
        out = {"tool": "warehouse.load", "args": {"target": draw(st.sampled_from(TABLES)),
                                                  "source": draw(st.sampled_from(DESTS))}}
        if draw(st.booleans()):
            out["args"]["min_rows"] = draw(st.integers(0, 5))
    elif kind == "list_invoices":
        out = {"tool": "billing.list_invoices", "args": {"account_id": acct},
               "binds": {f"invoice{n}": "$.invoice_id", f"sub{n}": "$.sub_id"}}
    elif kind == "customer_get":
        out = {"tool": "customer.get", "args": {"account_id": acct},
               "binds": {f"status{n}": "$.status"}}
    elif kind == "customer_update":
        out = {"tool": "customer.update", "args": {
            "account_id": acct, "status": draw(st.sampled_from(["active", "closed"]))}}
    elif kind == "restore":
        out = {"tool": "customer.restore", "args": {"account_id": acct}}
    elif kind == "email":
        out = {"tool": "email.send", "args": {"to": "ops@fuzz.example",
                                              "template": "account_closed", "account_id": acct}}
    elif kind == "credit":
        out = {"tool": "billing.issue_credit", "args": {
            "account_id": acct, "amount_eur": draw(st.sampled_from([0.01, 1.5, 612.4]))}}
    elif kind == "void":
        out = {"tool": "billing.void_invoice", "args": {"invoice_id": "in_fuzz1"}}
    else:
        out = {"tool": "billing.cancel_subscription", "args": {"sub_id": "sub_fuzz1"}}
    return out


@st.composite
def well_formed(draw: st.DrawFn, cheap: bool = True, most_steps: int = 5) -> dict[str, Any]:
    """A plan ``check`` accepts, of steps the fuzz world answers quickly."""
    count = draw(st.integers(1, most_steps))
    steps: list[dict[str, Any]] = []
    binds: dict[int, list[str]] = {}
    for n in range(1, count + 1):
        deps = draw(st.lists(st.integers(1, n - 1), max_size=2, unique=True)) if n > 1 else []
        refs = [name for d in deps for name in binds.get(d, [])]
        step: dict[str, Any] = {"n": n, **_tool(draw, n, refs)}
        binds[n] = list(step.get("binds", {}))
        if deps:
            step["depends_on"] = deps
        for phase in ("pre", "post"):
            conds = draw(st.lists(st.builds(lambda: None), max_size=2))
            if conds:
                step[phase] = [_cond(draw, cheap) for _ in conds]
        if step["tool"] in TOOLS_WITH_READER and draw(st.integers(0, 3)) == 0:
            step.setdefault("post", []).append(_field_cond(draw))
        if draw(st.integers(0, 3)) == 0:
            step["on_unmet"] = draw(st.sampled_from(["replan", "halt", "retry"]))
        if draw(st.integers(0, 5)) == 0:
            step["approval"] = "required"
        if draw(st.integers(0, 4)) == 0:
            step["effect"] = draw(st.sampled_from(["read", "write", "external", "money"]))
        steps.append(step)
    plan: dict[str, Any] = {"goal": draw(st.sampled_from(["fuzz", "reconcile \u2713", "g"])),
                            "steps": steps}
    if draw(st.booleans()):
        plan["budget"] = {"replans_max": draw(st.integers(0, 2))}
    if any("approval" in s for s in steps) and draw(st.booleans()):
        plan["approval_ttl_s"] = draw(st.sampled_from([0.5, 1.0, 2.0]))
    if draw(st.integers(0, 3)) == 0:
        plan["made_at"] = draw(st.sampled_from([
            "2026-03-01T00:00:00Z", "2026-03-01T00:00:00+05:30", "2026-03-01T00:00:00",
            "2026-03-01", 0, 1767225600, "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z",
        ]))
    if draw(st.integers(0, 5)) == 0:
        plan["on_behalf_of"] = draw(st.sampled_from(["postgres", "fuzz_nobody", "A.b@c"]))
    if draw(st.integers(0, 5)) == 0:
        plan["policy_bundle"] = draw(st.sampled_from(["p-1", "\u2713" * 200, "x"]))
    return plan


# -- mutations ---------------------------------------------------------------------------------
Loc = tuple[Any, Any]  # (container, key or index)


def _locations(value: Any) -> list[Loc]:
    out: list[Loc] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            out += [(v, k) for k in v]
            stack += list(v.values())
        elif isinstance(v, list):
            out += [(v, i) for i in range(len(v))]
            stack += v
    return out


def _steps(plan: Any) -> list[dict[str, Any]]:
    steps = plan.get("steps") if isinstance(plan, dict) else None
    return [s for s in steps if isinstance(s, dict)] if isinstance(steps, list) else []


def _one_step(draw: st.DrawFn, plan: Any) -> dict[str, Any] | None:
    """One of the plan's steps (that is an object), or None when it has none."""
    steps = _steps(plan)
    return draw(st.sampled_from(steps)) if steps else None


def m_replace(draw: st.DrawFn, plan: Any, cheap: bool) -> Any:
    locs = _locations(plan)
    if not locs:
        return draw(hostile)
    c, k = draw(st.sampled_from(locs))
    c[k] = draw(st.one_of(hostile, st.sampled_from(BIG_STRINGS)) if not cheap else hostile)
    return plan


def m_same_type(draw: st.DrawFn, plan: Any, cheap: bool) -> Any:
    """A value replaced by another of its type: odd text for text, an odd number for a number
    (what validation may well accept, and a run then carries to the world)."""
    leaves = [(c, k) for c, k in _locations(plan) if isinstance(c[k], str | int | float)]
    if not leaves:
        return plan
    c, k = draw(st.sampled_from(leaves))
    v = c[k]
    if isinstance(v, str):
        c[k] = draw(st.one_of(st.sampled_from(ODD_STRINGS), st.text(min_size=1, max_size=8),
                              st.builds(lambda s: v + s, st.sampled_from(ODD_STRINGS))))
    elif isinstance(v, bool):
        c[k] = not v
    elif isinstance(v, int):
        c[k] = draw(st.one_of(st.sampled_from([0, 1, -1, 2**31, 2**53 + 1, 2**63 - 1, 2**63]),
                              st.integers(-10, 10)))
    else:
        c[k] = draw(st.sampled_from([0.0, -0.0, 1e-300, 5e-324, 0.5, 1.0, 1e308, math.nan]))
    return plan


def m_delete(draw: st.DrawFn, plan: Any, cheap: bool) -> Any:
    locs = _locations(plan)
    if locs:
        c, k = draw(st.sampled_from(locs))
        del c[k]
    return plan


def m_add(draw: st.DrawFn, plan: Any, cheap: bool) -> Any:
    dicts = [c for c, _ in _locations(plan) if isinstance(c, dict)] or (
        [plan] if isinstance(plan, dict) else [])
    if dicts:
        target = draw(st.sampled_from(dicts))
        name = draw(st.one_of(st.sampled_from([
            "n", "tool", "args", "wait", "probe", "pre", "post", "binds", "depends_on",
            "approval", "effect", "on_unmet", "budget", "goal", "steps", "made_at",
            "on_behalf_of", "policy_bundle", "approval_ttl_s", "stpes", "extra", "sql",
        ]), st.sampled_from(ODD_STRINGS), st.text(max_size=4)))
        target[name] = draw(hostile)
    return plan


def m_dependencies(draw: st.DrawFn, plan: Any, cheap: bool) -> Any:
    s = _one_step(draw, plan)
    if s is None:
        return plan
    steps = _steps(plan)
    ns = [t.get("n") for t in steps]
    how = draw(st.sampled_from(["self", "dangling", "cycle", "dup_n", "type", "later", "many"]))
    if how == "self":
        s["depends_on"] = [s.get("n")]
    elif how == "dangling":
        s["depends_on"] = [draw(st.sampled_from([0, -1, 99, 10**30, 2**63]))]
    elif how == "cycle" and len(steps) > 1:
        for a, b in zip(steps, steps[1:] + steps[:1], strict=True):
            a["depends_on"] = [b.get("n")]
    elif how == "dup_n":
        s["n"] = draw(st.sampled_from(ns))
    elif how == "type":
        s["depends_on"] = draw(st.sampled_from([1, "1", ["1"], [1.0], [True], None, {"1": 1},
                                                [[1]], [1.5]]))
    elif how == "later":
        s["depends_on"] = [n for n in ns if n != s.get("n")]
    else:
        s["depends_on"] = list(range(1, 300))
    return plan


def m_bindings(draw: st.DrawFn, plan: Any, cheap: bool) -> Any:
    s = _one_step(draw, plan)
    if s is None:
        return plan
    how = draw(st.sampled_from(["bad_path", "bad_name", "unbound", "undepended", "interp",
                                "in_condition", "type"]))
    if how == "bad_path":
        s["binds"] = {"x": draw(st.sampled_from(ODD_STRINGS))}
    elif how == "bad_name":
        s["binds"] = {draw(st.sampled_from(ODD_STRINGS)): "$.etag"}
    elif how == "type":
        s["binds"] = draw(hostile)
    else:
        name = "etag1" if how == "undepended" else draw(st.sampled_from(["nobody", "x", "etag1"]))
        args = s.setdefault("args", {})
        if isinstance(args, dict):
            key = draw(st.sampled_from([*list(args), "extra"]))
            args[key] = f"a ${{{name}}} b" if how == "interp" else "${" + name + "}"
        if how == "in_condition":
            s.setdefault("post", [])
            if isinstance(s["post"], list):
                s["post"].append({"probe": "job_state", "job_id": "${" + name + "}",
                                  "want": "done"})
    return plan


def m_conditions(draw: st.DrawFn, plan: Any, cheap: bool) -> Any:
    s = _one_step(draw, plan)
    if s is None:
        return plan
    phase = draw(st.sampled_from(["pre", "post"]))
    how = draw(st.sampled_from(["unknown", "single", "wait", "wait_type", "not_a_list",
                                "field_without_reader", "no_probe", "nested_args"]))
    cond: Any
    if how == "unknown":
        cond = {"probe": draw(st.sampled_from(["vibes_ok", "", "object_exists ", "Object_Exists",
                                               "\u2028"])), "x": 1}
    elif how == "single":
        s[phase] = _cond(draw, cheap)
        return plan
    elif how == "wait":
        cond = _cond(draw, cheap)
        numbers = st.sampled_from(ODD_NUMBERS) if not cheap else st.sampled_from(
            [0, -1, 0.5, 0.999, 1, 1.0, 2, math.nan, math.inf, 604800.0001, 10**30])
        wait: dict[str, Any] = {}
        if draw(st.booleans()):
            wait["timeout_s"] = draw(numbers)
        if draw(st.booleans()):
            wait["interval_s"] = draw(numbers)
        cond["wait"] = wait
    elif how == "wait_type":
        cond = {**_cond(draw, cheap), "wait": draw(hostile)}
    elif how == "not_a_list":
        s[phase] = draw(hostile)
        return plan
    elif how == "field_without_reader":
        cond = _field_cond(draw)
    elif how == "no_probe":
        cond = {"bucket": BUCKET, "key": "k"}
    else:
        cond = {"probe": "job_state", "args": {"job_id": "j", "want": "done"},
                "extra": draw(hostile)}
    conds = s.get(phase)
    s[phase] = [*(conds if isinstance(conds, list) else []), cond]
    return plan


def m_run_level(draw: st.DrawFn, plan: Any, cheap: bool) -> Any:
    if not isinstance(plan, dict):
        return plan
    name = draw(st.sampled_from(["made_at", "on_behalf_of", "policy_bundle", "approval_ttl_s",
                                 "budget", "goal"]))
    choices: dict[str, list[Any]] = {
        "made_at": ["2026-03-01T00:00:00", "2026-03-01", "2026-13-01", "0001-01-01T00:00:00",
                    "9999-12-31T23:59:59.999999", "now", 10**12, -1, 1e20, "2026-03-01T25:00Z"],
        "on_behalf_of": ["dana", "", "a" * 64, "a" * 63, "Ana.Lyst@corp", "x; RESET ROLE",
                         "\u00e9", "1abc", "postgres"],
        "policy_bundle": ["", "p", "x" * 200, "x" * 201, "\0", "\u202e"],
        "approval_ttl_s": [0, -1, 1e-300, 0.5, 604800, 604800.5, math.inf, "1h", True],
        "budget": [{"replans_max": v} for v in (-1, 0, 10, 11, "2", True, 2.0, 2.5, None)]
        + [{}, {"replans_max": 1, "x": 1}, [], "2"],
        "goal": ["", " ", "\0", "x" * 70000, "\u202e\u2028", ["a"], 1],
    }
    plan[name] = draw(st.sampled_from(choices[name]))
    return plan


def m_paths(draw: st.DrawFn, plan: Any, cheap: bool) -> Any:
    s = _one_step(draw, plan)
    if s is None:
        return plan
    trick = draw(st.sampled_from([
        "../x", "../../etc/passwd", "/etc/passwd", "/tmp/x", ".", "./", "w/..", "w/", "w//x",
        "w/./x", "~/x", "a" * 256, "a" * 255, "a/" * 2100 + "x", ("b" * 200 + "/") * 30 + "x",
        "w/a\0b", "w/\u202ex", "w/\udcffx", "fz", "fz/", "fz/sub", "", " ", "w\\..\\..\\x",
        "w/%2e%2e/x", "file:///etc/passwd", "w/" + "\u00e9" * 200, "fz/" + "a" * 240,
        "fz/" + "a" * 200, "fz/" + "\u00e9" * 101,
    ]))
    where = draw(st.sampled_from(["dest", "source", "path"]))
    args = s.get("args")
    if where == "path":
        s["post"] = [{"probe": "local_file_nonempty", "path": trick}]
    elif isinstance(args, dict):
        args[where] = trick
    return plan


def m_sizes(draw: st.DrawFn, plan: Any, cheap: bool) -> Any:
    if not isinstance(plan, dict):
        return plan
    how = draw(st.sampled_from(["steps", "arg", "plan", "nesting", "cond_arg"]))
    one = {"n": 1, "tool": "warehouse.run_sql", "effect": "read",
           "args": {"statement": "select_one"}}
    if how == "steps":
        count = draw(st.sampled_from([999, 1000, 1001, 5000]))
        plan["steps"] = [{**one, "n": n} for n in range(1, count + 1)]
    elif how in ("arg", "cond_arg"):
        size = draw(st.sampled_from([64 * 1024 - 2, 64 * 1024 - 1, 64 * 1024]))
        body = draw(st.sampled_from(["x", "\u00e9", "\U0001f600"]))
        text = body * (size // len(body.encode()))
        put: dict[str, Any] = {"n": 1, "tool": "s3.put", "args": {
            "bucket": BUCKET, "key": "out/1", "body": "v" if how == "cond_arg" else text}}
        if how == "cond_arg":
            put["post"] = [{"probe": "object_content_equals", "bucket": BUCKET, "key": "out/1",
                            "body": text}]
        plan["steps"] = [put]
    elif how == "plan":
        body = "x" * (draw(st.integers(50, 64)) * 1024 - 2)
        plan["steps"] = [{"n": n, "tool": "s3.put", "args": {
            "bucket": BUCKET, "key": f"out/{n}", "body": body}} for n in range(1, 6)]
    else:
        depth = draw(st.sampled_from([31, 32, 33, 200, 2000]))
        steps = _steps(plan)
        if steps:
            steps[0]["args"] = {"statement": "set_job_state",
                                "params": {"job_id": "j", "state": "s", "x": nested(depth)}}
    return plan


def m_types(draw: st.DrawFn, plan: Any, cheap: bool) -> Any:
    """A field of the language with a value of the wrong type, or at its edge."""
    s = _one_step(draw, plan)
    if s is None:
        return plan
    name = draw(st.sampled_from(["n", "tool", "effect", "on_unmet", "approval", "args",
                                 "binds", "pre", "post"]))
    s[name] = draw(st.one_of(hostile, st.sampled_from([
        True, False, 1.0, 1.5, "1", 0, -1, 2**63, 10**30, "write", "WRITE", "s3.get",
        "s3.GET", "s3.get ", "warehouse.run_sql\0", None, [], {},
    ])))
    return plan


def m_duplicate_step(draw: st.DrawFn, plan: Any, cheap: bool) -> Any:
    steps = plan.get("steps") if isinstance(plan, dict) else None
    if isinstance(steps, list) and steps:
        steps.append(json.loads(json.dumps(draw(st.sampled_from(steps)), allow_nan=True))
                     if _jsonable(steps) else steps[0])
    return plan


def _jsonable(v: Any) -> bool:
    try:
        json.dumps(v, allow_nan=True)
    except (TypeError, ValueError, RecursionError):  # not JSON, or nested past what it takes
        return False
    return True


MUTATIONS: list[Callable[[st.DrawFn, Any, bool], Any]] = [
    m_replace, m_replace, m_same_type, m_same_type, m_delete, m_add, m_dependencies,
    m_bindings, m_conditions, m_conditions, m_run_level, m_paths, m_sizes, m_types,
    m_duplicate_step,
]
CHEAP_MUTATIONS = [m for m in MUTATIONS if m is not m_sizes]


@st.composite
def raw_plans(draw: st.DrawFn, cheap: bool = False) -> Any:
    """A raw plan: well formed, mutated, or arbitrary JSON."""
    if not cheap and draw(st.integers(0, 9)) == 0:
        return draw(st.one_of(hostile, st.dictionaries(
            st.sampled_from(["goal", "steps", "budget", "x"]), hostile)))
    plan = draw(well_formed(cheap=cheap))
    # a quarter stays as drawn: those must be accepted and (in the run part) run
    count = draw(st.sampled_from([0, 0, 0, 1, 1, 2]) if cheap else st.integers(0, 4))
    ops = CHEAP_MUTATIONS if cheap else MUTATIONS
    for _ in range(count):
        plan = draw(st.sampled_from(ops))(draw, plan, cheap)
    return plan


# -- documents: how a plan reaches plangate ------------------------------------------------------
@dataclass(frozen=True)
class Document:
    """A plan as plangate receives it: ``data`` (bytes of a file, ``suffix`` .json or .yaml) or
    ``mapping`` (given to the Python API)."""

    form: str  # json, yaml, bytes, api
    data: bytes = b""
    suffix: str = ".json"
    mapping: Any = None

    def write(self, directory: Path, stem: str = "plan") -> Path:
        path = directory / f"{stem}{self.suffix}"
        path.write_bytes(self.data)
        return path


def _json_text(plan: Any, ensure_ascii: bool) -> str | None:
    try:
        return json.dumps(plan, ensure_ascii=ensure_ascii, allow_nan=True)
    except (ValueError, TypeError, RecursionError):
        return None


_NUMBER = re.compile(r"(?<=[:\[,] )-?\d+(\.\d+)?|(?<=[:\[,])-?\d+(\.\d+)?")


def _corrupt(draw: st.DrawFn, text: str) -> bytes:
    how = draw(st.sampled_from([
        "nul", "latin1", "bom", "truncate", "constant", "digits", "dup_key", "garbage",
        "crlf", "deep", "utf16", "surrogate_escape", "none",
    ]))
    data = text.encode("utf-8", "surrogatepass")
    if how == "nul":
        at = draw(st.integers(0, len(data)))
        return data[:at] + b"\0" + data[at:]
    if how == "latin1":
        return (text + "\u00e9").encode("latin-1", "replace")
    if how == "bom":
        return b"\xef\xbb\xbf" + data
    if how == "truncate":
        return data[: draw(st.integers(0, max(0, len(data) - 1)))]
    if how in ("constant", "digits"):
        numbers = list(_NUMBER.finditer(text))
        if not numbers:
            return data
        m = draw(st.sampled_from(numbers))
        literals = ["NaN", "Infinity", "-Infinity", "1e999", "-1e999"] if how == "constant" else [
            HUGE_DIGITS, "-" + HUGE_DIGITS, "1" + "0" * 400, "0." + "0" * 5000 + "1"]
        new = draw(st.sampled_from(literals))
        return (text[: m.start()] + new + text[m.end():]).encode("utf-8", "surrogatepass")
    if how == "dup_key":
        return text.replace('{"n": ', '{"n": 99, "n": ', 1).encode("utf-8", "surrogatepass")
    if how == "garbage":
        return data + draw(st.binary(max_size=8))
    if how == "crlf":
        return data.replace(b"\n", b"\r\n").replace(b", ", b",\r\n")
    if how == "deep":
        depth = draw(st.sampled_from([40, 1000, 100_000]))
        return b'{"goal": "g", "steps": ' + b"[" * depth + b"]" * depth + b"}"
    if how == "utf16":
        return text.encode("utf-16", "surrogatepass")
    if how == "surrogate_escape":
        return data.replace(b'"g', b'"\\udcffg', 1)
    return data


YAML_TRICKS = [
    "goal: g\nsteps: [{n: 1, tool: warehouse.run_sql, args: {statement: select_one}}]\n",
    "goal: g\nmade_at: 2026-03-01\nsteps: [{n: 1, tool: warehouse.run_sql, args: {statement: "
    "select_one}}]\n",
    "goal: g\nsteps: [{n: 1, tool: warehouse.run_sql, args: {statement: set_job_state, params: "
    "{job_id: 2026-03-01, state: done}}}]\n",
    "goal: g\nsteps: [{n: 1, tool: s3.put, args: {bucket: fuzz-drops, key: out/1, body: !!binary "
    "aGVsbG8=}}]\n",
    "goal: !!python/object/apply:os.system ['true']\nsteps: []\n",
    "goal: g\nsteps: [{n: 0x1, tool: warehouse.run_sql, args: {statement: select_one}}]\n",
    "goal: g\nsteps: [{n: 1, tool: warehouse.run_sql, args: {statement: select_one}, "
    "post: [{probe: table_rowcount, table: t, min: .nan}]}]\n",
    "goal: g\nsteps: [{n: " + HUGE_DIGITS + ", tool: warehouse.run_sql, args: "
    "{statement: select_one}}]\n",
    "goal: g\nsteps: [{n: 1, tool: warehouse.run_sql, args: {statement: set_job_state, "
    "params: {job_id: !!set {a, b}, state: done}}}]\n",
    "goal: g\nsteps:\n- n: 1\n  tool: warehouse.run_sql\n  args: {statement: select_one}\n  "
    "? [a, b]\n  : c\n",
    "goal: &a g\nsteps: *a\n",
    "goal: g\nsteps: [{n: 1, tool: warehouse.run_sql, args: {statement: select_one}, "
    "approval: yes}]\n",
    "goal: g\nsteps: [{n: 1, tool: warehouse.run_sql, args: {statement: select_one}, "
    "effect: on}]\n",
    "%YAML 1.1\n---\ngoal: g\n---\ngoal: h\n",
    "goal: g\nsteps: [{n: 1, tool: warehouse.run_sql, args: {statement: set_job_state, params: "
    "{job_id: 12:30:00, state: 1e3}}}]\n",
    "goal: g\nsteps: [{n: 1, tool: warehouse.run_sql, args: {statement: set_job_state, params: "
    "{job_id: ~, state: done}}}]\n",
    "goal: g\nsteps: [{n: 1, tool: warehouse.run_sql, args: {statement: select_one}}]\n"
    "made_at: 2026-03-01 10:00:00\n",
    "goal: g\nsteps: [{n: 1, tool: warehouse.run_sql, args: {statement: set_job_state, params: "
    "{job_id: !!timestamp 2026-03-01, state: !!float 1}}}]\n",
    "goal: g\nsteps: [{n: 1, tool: warehouse.run_sql, args: {statement: set_job_state, params: "
    "{job_id: {1: 2}, state: done}}}]\n",
    "goal: g\nsteps: [{n: 1, tool: warehouse.run_sql, args: {1: select_one}}]\n",
]

PYTHON_ODDITIES: list[Any] = [
    (1, 2), {1, 2}, b"bytes", Decimal("1.5"), Decimal("NaN"), frozenset(), object(),
    1 + 2j, bytearray(b"x"), range(3), 10**5000, float("nan"), {1: "int key"},
    {(1, 2): "tuple key"}, {None: 1}, {True: 1},
]


def _poison(draw: st.DrawFn, plan: Any) -> Any:
    """A mapping only Python can hand over: tuples, bytes, Decimals, huge ints, odd keys, a
    cycle."""
    how = draw(st.sampled_from(["value", "key", "cycle", "subclass"]))
    locs = _locations(plan)
    if how == "cycle" and isinstance(plan, dict):
        steps = _steps(plan)
        (steps[0] if steps else plan)["args" if steps else "x"] = plan
        return plan
    if how == "subclass" and isinstance(plan, dict):

        class Sneaky(dict):  # type: ignore[type-arg]
            def __getitem__(self, k: Any) -> Any:
                raise RuntimeError("a mapping that refuses to be read")

        return Sneaky(plan)
    if not locs:
        return draw(st.sampled_from(PYTHON_ODDITIES))
    c, k = draw(st.sampled_from(locs))
    if how == "key" and isinstance(c, dict):
        c[draw(st.sampled_from([1, None, (1, 2), 1.5, True]))] = c.pop(k)
    else:
        c[k] = draw(st.sampled_from(PYTHON_ODDITIES))
    return plan


@st.composite
def documents(draw: st.DrawFn, cheap: bool = False) -> Document:
    plan = draw(raw_plans(cheap=cheap))
    form = draw(st.sampled_from(["json", "json", "json", "yaml", "bytes", "api"])
                if not cheap else st.sampled_from(["json", "json", "yaml"]))
    if form == "api":
        if draw(st.integers(0, 3)) == 0:
            plan = _poison(draw, plan)
        return Document("api", mapping=plan)
    if form == "yaml":
        if not cheap and draw(st.integers(0, 4)) == 0:
            return Document("yaml", draw(st.sampled_from(YAML_TRICKS)).encode(), ".yaml")
        try:
            text = yaml.safe_dump(plan, allow_unicode=draw(st.booleans()))
        except (yaml.YAMLError, RecursionError, ValueError, TypeError):
            text = None
        if text is not None:
            return Document("yaml", text.encode("utf-8", "surrogatepass"), ".yaml")
    text = _json_text(plan, ensure_ascii=draw(st.booleans())) or json.dumps(
        {"goal": "g", "steps": "unserialisable"})
    if form == "bytes":
        return Document("bytes", _corrupt(draw, text), draw(st.sampled_from([".json", ".yaml"])))
    return Document("json", text.encode("utf-8", "surrogatepass"))


def drawn_runs(count: int, at: int | None = None) -> list[tuple[Document, list[bool]]]:
    """``count`` plans for the run part, each with the answers its approval cards get: from
    seed ``at``, or derandomized (the same on every machine); generated only, no example
    database."""
    drawn: list[tuple[Document, list[bool]]] = []

    @settings(max_examples=count, deadline=None, database=None, phases=[Phase.generate],
              derandomize=at is None, suppress_health_check=list(HealthCheck))
    @given(doc=documents(cheap=True), answers=st.lists(st.booleans(), max_size=3))
    def one(doc: Document, answers: list[bool]) -> None:
        drawn.append((doc, answers))

    (one if at is None else seed(at)(one))()
    return drawn


# -- oracles -----------------------------------------------------------------------------------
# Where a problem is: "step N, field X", "plan, field X", "plan" (a size), or the file itself.
_STEP_ID = r"(-?\d+|#\d+)"
PROBLEM = re.compile(rf"^(step {_STEP_ID}, field \S.*|step {_STEP_ID}|plan, field \S.*|plan): .+")
CRASH, HANG, WRONG = "crash", "hang", "wrong answer"


class Finding(AssertionError):
    """A plan plangate did not handle as it must (the message says how). ``kind``: a
    ``crash`` (an exception that is no ``PlanError``, an exit code that is neither 0 nor 2, a
    failed workflow task, an internal error in a run), a ``hang`` (a run that did not end), or
    a ``wrong answer`` (a problem that is not one line or names no step and field, ``check``
    and the API or ``run`` disagreeing, output where none belongs)."""

    def __init__(self, message: str, kind: str = WRONG) -> None:
        super().__init__(message)
        self.kind = kind


KINDS: list[tuple[str, re.Pattern[str]]] = [
    (kind, re.compile(pattern)) for kind, pattern in [
        ("circular waits", r"would wait for each other"),
        ("values no plan holds (beyond 64 bits, NaN, NUL, surrogates)",
         r"beyond 64 bits|4,300 digits|NaN and infinity|NUL byte|lone surrogate"),
        ("limits (steps, sizes, nesting)",
         r"steps; a plan has at most|bytes as JSON|nested too deeply|plan file is at most"),
        ("unreadable file (not JSON or YAML, binary, anchors, not an object)",
         r"^(?!step |plan, field )"),
        ("dependencies (cycles, dangling, duplicates)", r"field depends_on|field n: |duplicate"),
        ("references and bindings", r"is bound by|field binds"),
        ("local paths", r"work directory|a local path is|a file or directory name"),
        ("unknown tool, probe or statement",
         r"unknown tool|unknown probe|no registered statement|needs a tool with a reader"),
        ("scope", r"never a target|PLANGATE_ALLOWED"),
        ("waits", r"\.wait"),
        ("missing fields", r"Field required"),
        ("unknown fields", r"Extra inputs are not permitted"),
        ("wrong types or values", r""),
    ]
]


def problem_kind(problem: str) -> str:
    """What kind of problem a rejection names (for the figures)."""
    return next(kind for kind, pattern in KINDS if pattern.search(problem))


@dataclass
class Tally:
    """The figures of a fuzzing run."""

    checked: int = 0
    accepted: int = 0
    rejected: Counter[str] = field(default_factory=Counter)  # by the kind of its first problem
    errors: Counter[str] = field(default_factory=Counter)  # the class a rejection raised
    forms: Counter[str] = field(default_factory=Counter)
    ran: int = 0
    run_refused: int = 0  # refused by run as by check; no workflow
    statuses: Counter[str] = field(default_factory=Counter)
    findings: list[tuple[str, str]] = field(default_factory=list)  # (kind, what)

    def reject(self, problems: Sequence[str], error: str = "PlanError") -> None:
        self.errors[error] += 1
        self.rejected[problem_kind(problems[0]) if problems else "?"] += 1

    def crashes(self) -> int:
        return sum(kind == CRASH for kind, _ in self.findings)

    def line(self) -> str:
        return (f"{self.checked} checked ({self.rejected.total()} rejected, {self.accepted} "
                f"accepted); {self.ran} run to an end {dict(sorted(self.statuses.items()))}, "
                f"{self.run_refused} refused by run; {self.crashes()} crashes, "
                f"{len(self.findings)} findings")


_CLI_LOCK = threading.Lock()


def cli(argv: Sequence[str]) -> tuple[int, str, str]:
    """``plangate ARGV`` in-process: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with _CLI_LOCK, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _problems_of(stderr: str, path: str) -> list[str]:
    """The problems ``plangate`` printed for a rejected plan (one line each, or a header and one
    line each)."""
    lines = stderr.splitlines()
    one = f"plangate: plan {path} rejected: "
    if len(lines) == 1 and lines[0].startswith(one):
        return [lines[0].removeprefix(one)]
    header = lines[:1] == [f"plangate: plan {path} rejected:"]
    if header and len(lines) > 2 and all(x.startswith("  - ") for x in lines[1:]):
        return [x.removeprefix("  - ") for x in lines[1:]]
    raise Finding(f"rejected without one line per problem: {stderr[:2000]!r}")


def _judge_problems(problems: Sequence[str], path: str | None) -> None:
    if not problems:
        raise Finding("PlanError without a problem")
    for p in problems:
        if not isinstance(p, str) or len(p.splitlines()) != 1 or p != p.strip():
            raise Finding(f"a problem that is not one line: {p!r}")
        if "Traceback" in p:
            raise Finding(f"a traceback in a problem: {p!r}")
        names_file = path is not None and p.startswith(f"{path}: ")
        if not (names_file or PROBLEM.match(p)):
            raise Finding(f"a problem that names neither a step and field, nor the plan: {p!r}")


def _file_named(source: Any) -> str | None:
    """The file the API reads a plan from when handed ``source`` (a string that is not JSON text
    is a path), as its problems name it: quoted when it holds what a line cannot show."""
    if not isinstance(source, str) or source.lstrip().startswith("{"):
        return None
    name = str(Path(source))
    return name if name.isprintable() else shown(name, 200)


def judge_check(
    doc: Document, directory: Path, settings: Settings, problems: list[str] | None = None
) -> Plan | None:
    """Check ``doc`` the way it arrives (a file through the CLI, a mapping through the API):
    the plan when accepted, None when rejected as it must be (its problems appended to
    ``problems``); ``Finding`` otherwise."""
    found = problems if problems is not None else []
    if doc.form == "api":
        try:
            plan = api_check(doc.mapping, settings).plan
        except PlanError as e:
            _judge_problems(e.problems, _file_named(doc.mapping))
            found += e.problems
            return None
        except Exception as e:
            raise Finding(f"the API raised {type(e).__name__}: {e!s:.300}", CRASH) from e
        return plan
    path = doc.write(directory)
    code, out, err = cli(["check", str(path)])
    if code == 2:
        if out:
            raise Finding(f"a rejected plan printed on stdout: {out[:500]!r}")
        printed = _problems_of(err, str(path))
        # the CLI names the file once: the API's problems are the same, each naming it
        try:
            api_check(path, settings)
        except PlanError as e:
            _judge_problems(e.problems, str(path))
            if printed != [p.removeprefix(f"{path}: ") for p in e.problems]:
                raise Finding(f"check printed {printed!r}, the API said {e.problems!r}") from e
            found += printed
            return None
        except Exception as e:
            raise Finding(f"the API raised {type(e).__name__}: {e!s:.300}", CRASH) from e
        raise Finding("check refused a plan the API accepted")
    if code != 0:
        raise Finding(f"check exited {code}: {err[:1000]!r}", CRASH)
    if not out.startswith(f"plangate: plan {path} is valid"):
        raise Finding(f"check exited 0 without saying the plan is valid: {out!r}")
    if any(not line.startswith("plangate: warning: ") for line in err.splitlines()):
        raise Finding(f"check of a valid plan printed more than warnings: {err[:1000]!r}")
    # what check accepted, as the run will see it (a file is read the same way again)
    try:
        return api_check(path, settings).plan
    except PlanError as e:
        raise Finding(f"check accepted a plan the API then refused: {e!s:.300}") from e
    except Exception as e:
        raise Finding(f"the API raised {type(e).__name__}: {e!s:.300}", CRASH) from e


def run_cost_ok(plan: Plan) -> bool:
    """Cheap enough for the run part: every wait short (the drawn ones are; a mutation may have
    made one longer) and few steps."""
    waits = [c.wait for s in plan.steps for c in (*s.pre, *s.post) if c.wait is not None]
    return len(plan.steps) <= 12 and all(w.timeout_s <= MAX_RUN_WAIT_S for w in waits)


def _failed_tasks(events: Sequence[Any]) -> list[str]:
    out = []
    for e in events:
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            f = e.workflow_task_failed_event_attributes.failure
            out.append(f"{f.message[:300]} {f.stack_trace[-600:]}")
    return out


async def judge_run(
    doc: Document,
    directory: Path,
    client: Client,
    settings: Settings,
    answers: Sequence[bool] = (),
    timeout_s: float = 90.0,
    notes: Counter[str] | None = None,
) -> RunReport | None:
    """``plangate check`` then ``plangate run`` on ``doc``; for an accepted plan, answer its
    cards with ``answers`` (approve, reject; then approve), wait for its end, read it back with
    ``plangate status`` and its history. The final report, None when the plan was refused
    (by both commands alike); ``Finding`` otherwise. ``settings``: the worker's (its task
    queue, the CLI's environment must match). ``timeout_s`` only tells a hang from a run
    (the runs drawn wait 3 s at most). ``notes`` counts workflow tasks that timed out (a
    worker too busy to answer in time: Temporal hands the task out again, nothing fails)."""
    path = doc.write(directory)
    code, _, err = await asyncio.to_thread(cli, ["check", str(path)])
    run_id = f"fuzz-{uuid.uuid4().hex[:12]}"
    rcode, rout, rerr = await asyncio.to_thread(cli, ["run", str(path), "--id", run_id])
    if code == 2:
        if rcode != 2 or _problems_of(rerr, str(path)) != _problems_of(err, str(path)):
            kind = WRONG if rcode in (0, 2) else CRASH
            raise Finding(f"check refused, run said {rcode}: {rerr[:500]!r}", kind)
        if await _exists(client, run_id):
            raise Finding("a refused plan started a workflow")
        return None
    if code != 0 or rcode != 0 or rout.strip() != run_id:
        kind = CRASH if {code, rcode} - {0, 2} else WRONG
        raise Finding(f"check {code}, run {rcode}: {rout[:300]!r} {rerr[:1000]!r}", kind)
    api = Plangate(client, settings)
    try:
        rep = await asyncio.wait_for(_until_end(api, run_id, answers), timeout_s)
    except TimeoutError:
        with contextlib.suppress(Exception):
            await api.handle(run_id).terminate("fuzz: no end in time")
        raise Finding(f"run {run_id} did not end within {timeout_s:.0f} s", HANG) from None
    if not rep.status.final:
        raise Finding(f"run {run_id} ended {rep.status}")
    events = [e async for e in api.handle(run_id).fetch_history_events()]
    failed = _failed_tasks(events)
    if notes is not None:
        notes["workflow tasks timed out"] += sum(
            e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT for e in events
        )
    if failed:
        raise Finding(f"run {run_id}: {len(failed)} failed workflow tasks: {failed[0]}", CRASH)
    if rep.failure is not None and rep.failure.code == "internal":
        raise Finding(f"run {run_id}: internal error in step {rep.failure.step} "
                      f"{rep.failure.tool}: {rep.failure.detail[:600]}", CRASH)
    scode, sout, serr = await asyncio.to_thread(cli, ["status", run_id])
    want = 0 if rep.status == "succeeded" else 1
    if scode != want or serr or not sout.startswith(f"run {run_id}: {rep.status.value}"):
        kind = WRONG if scode in (0, 1) else CRASH
        raise Finding(f"status of {run_id} exited {scode}: {sout[:300]!r} {serr[:500]!r}", kind)
    jcode, jout, _ = await asyncio.to_thread(cli, ["status", run_id, "--json"])
    if jcode != want or RunReport.model_validate_json(jout).status != rep.status:
        raise Finding(f"status --json of {run_id} exited {jcode}")
    return rep


REFUSED, LEFT_OUT = "refused", "left out: waits too long"


async def check_then_run(
    doc: Document,
    directory: Path,
    client: Client,
    settings: Settings,
    answers: Sequence[bool] = (),
    notes: Counter[str] | None = None,
) -> str:
    """``doc`` judged by :func:`judge_check`, then (unless a mutation made its waits too long
    for the run part: ``LEFT_OUT``) by :func:`judge_run`: ``REFUSED``, or the run's final
    status; ``Finding`` otherwise."""
    plan = await asyncio.to_thread(judge_check, doc, directory, settings)
    if plan is not None and not run_cost_ok(plan):
        return LEFT_OUT
    rep = await judge_run(doc, directory, client, settings, answers, notes=notes)
    return REFUSED if rep is None else rep.status.value


async def _exists(client: Client, run_id: str) -> bool:
    try:
        await client.get_workflow_handle(run_id).describe()
    except Exception:
        return False
    return True


async def _until_end(api: Plangate, run_id: str, answers: Sequence[bool]) -> RunReport:
    """Wait for the run's end, answering every card that waits: approve or reject as drawn."""
    given = 0
    result = asyncio.ensure_future(api.result(run_id))
    try:
        while not result.done():
            await asyncio.wait([result], timeout=0.2)
            if result.done():
                break
            with contextlib.suppress(UnknownRun):
                rep = await api.report(run_id)
                for card in rep.approvals:
                    if card.status is not CardStatus.PENDING:
                        continue
                    ok = answers[given] if given < len(answers) else True
                    given += 1
                    with contextlib.suppress(Exception):  # expired meanwhile, answered twice
                        if ok:
                            await api.approve(run_id, card.step, card.digest, by="fuzz")
                        else:
                            await api.reject(run_id, card.step, card.digest, reason="fuzz",
                                             by="fuzz")
        return result.result()
    finally:
        result.cancel()
