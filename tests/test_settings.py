"""Settings by concern (``plangate.world.settings``): each variable is read by exactly one part,
each part is handed only where it is needed, a variable that cannot be used is a
``ConfigurationError`` naming it, and nothing below the top of the house (the CLI, the Python
API's ``Plangate.connect``, the worker's assembly, the dev stack) reads the process's
environment: every layer under the worker's in the import-linter contract is scanned for it."""

from __future__ import annotations

import ast
import base64
import os
import re
import tomllib
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from plangate.errors import ConfigurationError
from plangate.plans.model import Effect
from plangate.records.signing import SigningKey
from plangate.world.settings import (
    CatalogueSettings,
    EncryptionSettings,
    Identity,
    ModelSettings,
    ObservabilitySettings,
    PolicySettings,
    RunSettings,
    Settings,
    TemporalSettings,
    WorldSettings,
)

ROOT = Path(__file__).resolve().parents[1]
APPROVER, SUBMITTER = SigningKey.generate("erin"), SigningKey.generate("agent")
RECEIPTS = SigningKey.generate("worker")
SECRETS = ("sk-model-secret-0001", "temporal-key-secret-0002", "codec-token-secret-0003")
AES = base64.b64encode(b"k" * 32).decode()

# Every plangate variable, set, and the part that reads it.
PARTS: dict[type[Any], dict[str, str]] = {
    TemporalSettings: {
        "TEMPORAL_ADDRESS": "temporal.internal:7233", "TEMPORAL_NAMESPACE": "plans",
        "TEMPORAL_API_KEY": SECRETS[1], "PLANGATE_TASK_QUEUE": "q",
        "PLANGATE_MAX_CACHED_RUNS": "300",
    },
    WorldSettings: {
        "PLANGATE_DATABASE_URL": "postgresql://w@db:5432/p",
        "PLANGATE_S3_ENDPOINT_URL": "http://s3:9000", "PLANGATE_WORKDIR": "/srv/plangate",
        "PLANGATE_ALLOWED_BUCKETS": "drops", "PLANGATE_ALLOWED_SCHEMAS": "staging",
        "PLANGATE_ARTIFACTS": "s3://art/p",
    },
    CatalogueSettings: {
        "PLANGATE_DEMO_SYSTEMS": "1", "PLANGATE_EXTENSIONS": "team.tools",
        "PLANGATE_MCP_SERVERS": "/etc/plangate/mcp.yaml",
    },
    ModelSettings: {
        "OPENAI_BASE_URL": "http://model:8000/v1", "OPENAI_API_KEY": SECRETS[0],
        "PLANGATE_MODEL": "m", "PLANGATE_REPLANNER": "playbook",
    },
    PolicySettings: {
        "PLANGATE_APPROVE_EFFECTS": "money", "PLANGATE_APPROVAL_TTL": "2h",
        "PLANGATE_POLICY_BUNDLE": "p-1", "PLANGATE_APPROVERS": APPROVER.public_entry(),
        "PLANGATE_SUBMITTERS": f"{SUBMITTER.public_entry()}:dana",
        "PLANGATE_POLICIES": "/etc/plangate/policies", "PLANGATE_POLICY_MODE": "shadow",
        "PLANGATE_RECEIPT_KEY": RECEIPTS.text(),
    },
    RunSettings: {
        "PLANGATE_HISTORY_EVENTS": "500", "PLANGATE_HISTORY_BYTES": "100000",
        "PLANGATE_OUTAGE_PATIENCE": "1m", "PLANGATE_TOOL_HEARTBEAT_TIMEOUT": "12s",
    },
    ObservabilitySettings: {
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://otel:4318/v1/traces",
        "PLANGATE_METRICS_ADDRESS": "127.0.0.1:9464",
    },
    EncryptionSettings: {
        "PLANGATE_ENCRYPTION_KEYS": f"k1:{AES}", "PLANGATE_CODEC_TOKEN": SECRETS[2],
    },
    Identity: {
        "PLANGATE_APPROVER_KEY": APPROVER.text(), "PLANGATE_SUBMITTER_KEY": SUBMITTER.text(),
    },
}
EVERY = {"TEMPORAL_CONFIG_FILE": os.devnull}
EVERY.update((k, v) for owned in PARTS.values() for k, v in owned.items())


def test_each_variable_is_read_by_exactly_its_part():
    """A variable unset among all the others, or set alone: the part it belongs to changes,
    and no other part does."""
    base = {"TEMPORAL_CONFIG_FILE": os.devnull}
    for var in EVERY.keys() - base.keys():
        without = {k: v for k, v in EVERY.items() if k != var}
        alone = {**base, var: EVERY[var]}
        changed = [part for part in PARTS if part.from_env(without) != part.from_env(EVERY)
                   or part.from_env(alone) != part.from_env(base)]
        (owner,) = [part for part, owned in PARTS.items() if var in owned]
        assert changed == [owner], (var, changed)


def test_the_whole_is_its_parts_parsed_once():
    whole = Settings.from_env(EVERY)
    by_field = {f.name: getattr(whole, f.name) for f in fields(Settings)}
    assert {type(part) for part in by_field.values()} == set(PARTS)
    for part in by_field.values():
        assert part == type(part).from_env(EVERY)
    assert whole.policy.approve_effects[0].value == "money"
    assert whole.catalogue == CatalogueSettings(
        demo_systems=True, extensions=("team.tools",), mcp_servers="/etc/plangate/mcp.yaml"
    )
    assert whole.identity.submitter_key == SUBMITTER
    shown = repr(whole)
    assert whole.policy.receipt_key == RECEIPTS
    assert not [s for s in (*SECRETS, AES, APPROVER.text(), SUBMITTER.text(), RECEIPTS.text())
                if s in shown]


@pytest.mark.parametrize(("var", "value"), [
    ("TEMPORAL_CONFIG_FILE", "/nonexistent/temporal.toml"),
    ("PLANGATE_ARTIFACTS", "bucket/prefix"),
    ("PLANGATE_DEMO_SYSTEMS", "maybe"),
    ("PLANGATE_EXTENSIONS", "not a module"),
    ("PLANGATE_REPLANNER", "gpt"),
    ("PLANGATE_APPROVE_EFFECTS", "lots"),
    ("PLANGATE_APPROVE_EFFECTS", "none,money"),
    ("PLANGATE_APPROVAL_TTL", "soon"),
    ("PLANGATE_POLICY_MODE", "log"),
    ("PLANGATE_APPROVERS", "erin"),
    ("PLANGATE_SUBMITTERS", "agent:dana"),
    ("PLANGATE_HISTORY_EVENTS", "5"),
    ("PLANGATE_MAX_CACHED_RUNS", "0"),
    ("PLANGATE_HISTORY_BYTES", "many"),
    ("PLANGATE_OUTAGE_PATIENCE", "0"),
    # past what plangate allows at all: Temporal ends a run at 51,200 events; a wait is 7 days
    ("PLANGATE_HISTORY_EVENTS", "1_000_000_000_000"),
    ("PLANGATE_HISTORY_BYTES", "104857600"),
    ("PLANGATE_OUTAGE_PATIENCE", "8d"),
    # a tool's heartbeat timeout: 5 s to 10 minutes (its call's start-to-close)
    ("PLANGATE_TOOL_HEARTBEAT_TIMEOUT", "4s"),
    ("PLANGATE_TOOL_HEARTBEAT_TIMEOUT", "11m"),
    ("PLANGATE_TOOL_HEARTBEAT_TIMEOUT", "soon"),
    ("PLANGATE_APPROVAL_TTL", "8d"),
    ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "ftp://otel"),
    ("PLANGATE_METRICS_ADDRESS", "localhost:9464"),
    ("PLANGATE_ENCRYPTION_KEYS", "k1"),
    ("PLANGATE_APPROVER_KEY", "/nonexistent/erin.key"),
    ("PLANGATE_RECEIPT_KEY", "/nonexistent/worker.key"),
    # an id of its own: the keys are made at import, and each xdist worker collects alike
    pytest.param("PLANGATE_SUBMITTER_KEY", f"{SUBMITTER.text()},{APPROVER.text()}",
                 id="PLANGATE_SUBMITTER_KEY-two keys"),
])
def test_a_value_that_cannot_be_used_is_a_configuration_error_naming_its_variable(var, value):
    with pytest.raises(ConfigurationError) as e:
        Settings.from_env({**EVERY, var: value})
    assert var in str(e.value) and "\n" not in str(e.value)


def test_unset_money_and_external_wait_for_a_person_and_none_turns_it_off():
    """The seeds' rule: an external or money effect holds for a person unless the deployment
    says otherwise, explicitly (``none``); a deployment that writes nothing gets it too."""
    money, external = Effect.MONEY, Effect.EXTERNAL
    for unset in ({}, {"PLANGATE_APPROVE_EFFECTS": ""}, {"PLANGATE_APPROVE_EFFECTS": " , "}):
        assert PolicySettings.from_env(unset).approve_effects == (money, external)
    assert PolicySettings().approve_effects == (money, external)  # in code, alike
    assert PolicySettings.from_env({"PLANGATE_APPROVE_EFFECTS": " None "}).approve_effects == ()
    assert PolicySettings.from_env({"PLANGATE_APPROVE_EFFECTS": "money"}).approve_effects == (
        money,)
    # what a worker says at its start
    assert PolicySettings().approval_rule() == (
        "money and external steps wait for a person (the default; "
        "PLANGATE_APPROVE_EFFECTS=none turns it off)")
    assert PolicySettings.from_env({"PLANGATE_APPROVE_EFFECTS": "none"}).approval_rule() == (
        "approval by effect off (PLANGATE_APPROVE_EFFECTS=none): a step waits for a person "
        "only when its plan or its tool asks")
    assert PolicySettings.from_env({"PLANGATE_APPROVE_EFFECTS": "write,money"}).approval_rule() \
        == ("write and money steps wait for a person (PLANGATE_APPROVE_EFFECTS=write,money; "
            "PLANGATE_APPROVE_EFFECTS=none turns it off)")


def test_a_card_lives_at_most_seven_days():
    assert PolicySettings.from_env({"PLANGATE_APPROVAL_TTL": "7d"}).approval_ttl_s == 604800
    with pytest.raises(ConfigurationError) as e:
        PolicySettings.from_env({"PLANGATE_APPROVAL_TTL": "8d"})
    assert str(e.value) == "PLANGATE_APPROVAL_TTL must be at most 7d, not 691,200"


@pytest.mark.parametrize("value", ["none,money", "money, none", "none,none"])
def test_none_listed_with_effects_is_refused_naming_both(value):
    with pytest.raises(ConfigurationError) as e:
        PolicySettings.from_env({"PLANGATE_APPROVE_EFFECTS": value})
    assert str(e.value) == (
        "PLANGATE_APPROVE_EFFECTS: 'none' turns approval by effect off and cannot be listed "
        f"with effects ({value!r})")


# -- nothing below the top reads the environment ------------------------------------------------

_ENV_NAMES = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}


def environment_reads(source: str) -> list[int]:
    """The lines of ``source`` that touch the process's environment through ``os``."""
    tree = ast.parse(source)
    aliases = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.Import)
               for a in n.names if a.name == "os"}
    found = []
    for node in ast.walk(tree):
        attribute = isinstance(node, ast.Attribute) and node.attr in _ENV_NAMES and (
            isinstance(node.value, ast.Name) and node.value.id in aliases
        )
        imported = isinstance(node, ast.ImportFrom) and node.module == "os" and bool(
            {a.name for a in node.names} & _ENV_NAMES
        )
        if attribute or imported:
            found.append(getattr(node, "lineno", 0))
    return found


def below_the_top() -> list[str]:
    """Every package of the import-linter layers under the worker's assembly: the top of the
    house (the CLI, plangate.testing, the demo, the dev stack, the servers, the client and the
    worker assembly) may read the environment, and hands everything below it what it read."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (layers,) = [c["layers"] for c in config["tool"]["importlinter"]["contracts"]
                 if c["type"] == "layers"]
    names = [[n.strip() for n in re.split(r"[:|]", layer)] for layer in layers]
    (worker,) = [i for i, layer in enumerate(names) if "worker" in layer]
    return [name for layer in names[worker + 1:] for name in layer]


def modules(package: str) -> Iterator[Path]:
    where = ROOT / "plangate" / package.replace(".", "/")  # a layer may be a subpackage
    yield from sorted(where.rglob("*.py")) if where.is_dir() else [where.with_suffix(".py")]


def test_the_scan_finds_what_it_looks_for():
    # the CLI (the top) reads the environment once: the scan must see that
    assert environment_reads((ROOT / "plangate" / "cli" / "commands.py").read_text())
    for text in ("import os\nos.environ.get('X')", "import os as o\no.getenv('X')",
                 "from os import environ", "import os\nos.environ['X'] = '1'"):
        assert environment_reads(text), text
    assert not environment_reads("import os\nos.path.exists('x')\nenv = {}\nenv.get('X')")


def test_nothing_below_the_cli_and_the_assembly_reads_os_environ():
    packages = below_the_top()
    assert {"replanner", "workflows", "activities", "probes", "world", "records",
            "plans"} <= set(packages)
    scanned = [p for pkg in packages for p in modules(pkg)]
    assert len(scanned) > 50
    reads = {str(p.relative_to(ROOT)): lines for p in scanned
             if (lines := environment_reads(p.read_text()))}
    assert reads == {}
