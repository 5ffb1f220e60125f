"""The Temporal connection through ``temporalio.envconfig``: a profile file and the ``TEMPORAL_*``
variables give the address, namespace, TLS, API key and gRPC metadata every plangate client
connects with (``plangate.client.connection.connect``); the API key never shows.

The unit tests build the connection from a given environment and connect nowhere; the last ones
connect to the session's real Temporal server (a profile file that names it, and TLS against a
server that does not speak it)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
from temporalio.service import TLSConfig

from plangate.cli import main
from plangate.cli.services import connect as connect_or_one_line
from plangate.client.connection import connect
from plangate.errors import ServiceUnreachable
from plangate.world.settings import Settings

SECRET = "sk-live-0123456789abcdef"


def settings(tmp_path: Path | None = None, file: str | None = None, **env: str) -> Settings:
    """Settings of exactly ``env`` (and a profile file with ``file`` as its text): nothing of
    this machine's own Temporal configuration."""
    config = str(tmp_path / "temporal.toml") if tmp_path and file is not None else None
    if config and file is not None:
        Path(config).write_text(file)
    return Settings.from_env({"TEMPORAL_CONFIG_FILE": config or "/dev/null", **env})


PROFILES = f"""
[profile.default]
address = "temporal.internal:7233"
namespace = "plans"

[profile.cloud]
address = "plangate-prod.a1b2c.tmprl.cloud:7233"
namespace = "plangate-prod.a1b2c"
api_key = "{SECRET}"

[profile.mtls]
address = "plangate-prod.a1b2c.tmprl.cloud:7233"
namespace = "plangate-prod.a1b2c"
[profile.mtls.tls]
client_cert_path = "CERT"
client_key_path = "KEY"
server_name = "plangate-prod.a1b2c.tmprl.cloud"

[profile.meta]
[profile.meta.grpc_meta]
x-team = "payments"
"""


def test_nothing_configured_is_the_local_default_without_tls():
    s = settings()
    assert (s.temporal.address, s.temporal.namespace) == ("localhost:7233", "default")
    assert s.temporal.connect_config() == {
        "target_host": "localhost:7233", "namespace": "default"
    }
    assert not s.temporal.tls_enabled


def test_environment_variables_give_address_namespace_and_api_key_with_tls():
    s = settings(
        TEMPORAL_ADDRESS="ns.acct.tmprl.cloud:7233",
        TEMPORAL_NAMESPACE="ns.acct",
        TEMPORAL_API_KEY=SECRET,
    )
    assert s.temporal.connect_config() == {
        "target_host": "ns.acct.tmprl.cloud:7233",
        "namespace": "ns.acct",
        "api_key": SECRET,
        "tls": True,  # an API key turns TLS on
    }
    assert s.temporal.tls_enabled


def test_tls_false_turns_tls_off_even_with_an_api_key():
    s = settings(TEMPORAL_API_KEY=SECRET, TEMPORAL_TLS="false")
    assert s.temporal.connect_config()["tls"] is False
    assert not s.temporal.tls_enabled


def test_tls_from_environment_variables(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_bytes(b"CA PEM")
    s = settings(
        TEMPORAL_TLS="true",
        TEMPORAL_TLS_SERVER_CA_CERT_PATH=str(ca),
        TEMPORAL_TLS_SERVER_NAME="temporal.internal",
    )
    tls = s.temporal.connect_config()["tls"]
    assert isinstance(tls, TLSConfig)
    assert (tls.server_root_ca_cert, tls.domain) == (b"CA PEM", "temporal.internal")
    assert tls.client_cert is None and tls.client_private_key is None


def test_the_default_profile_of_a_file(tmp_path):
    s = settings(tmp_path, PROFILES)
    assert s.temporal.connect_config() == {
        "target_host": "temporal.internal:7233", "namespace": "plans"
    }
    assert s.temporal.profile is None


def test_a_named_profile_with_an_api_key(tmp_path):
    s = settings(tmp_path, PROFILES, TEMPORAL_PROFILE="cloud")
    assert s.temporal.profile == "cloud"
    assert s.temporal.connect_config() == {
        "target_host": "plangate-prod.a1b2c.tmprl.cloud:7233",
        "namespace": "plangate-prod.a1b2c",
        "api_key": SECRET,
        "tls": True,
    }


def test_a_named_profile_with_mtls_reads_the_certificate_files(tmp_path):
    (tmp_path / "client.pem").write_bytes(b"CLIENT CERT")
    (tmp_path / "client.key").write_bytes(b"CLIENT KEY")
    text = PROFILES.replace('"CERT"', f'"{tmp_path / "client.pem"}"').replace(
        '"KEY"', f'"{tmp_path / "client.key"}"'
    )
    cfg = settings(tmp_path, text, TEMPORAL_PROFILE="mtls").temporal.connect_config()
    tls = cfg["tls"]
    assert isinstance(tls, TLSConfig)
    assert tls.client_cert == b"CLIENT CERT" and tls.client_private_key == b"CLIENT KEY"
    assert tls.domain == "plangate-prod.a1b2c.tmprl.cloud"
    assert "api_key" not in cfg


def test_environment_variables_override_the_profile_and_empty_ones_count_as_unset(tmp_path):
    s = settings(
        tmp_path, PROFILES, TEMPORAL_PROFILE="cloud",
        TEMPORAL_NAMESPACE="plangate-staging.a1b2c", TEMPORAL_ADDRESS="",
    )
    assert s.temporal.namespace == "plangate-staging.a1b2c"
    assert s.temporal.address == "plangate-prod.a1b2c.tmprl.cloud:7233"
    assert s.temporal.api_key == SECRET


def test_grpc_metadata_from_the_profile_and_the_environment(tmp_path):
    s = settings(tmp_path, PROFILES, TEMPORAL_PROFILE="meta", TEMPORAL_GRPC_META_X_REGION="eu")
    assert s.temporal.connect_config()["rpc_metadata"] == {"x-team": "payments", "x-region": "eu"}


@pytest.mark.parametrize(
    ("env", "file", "expected"),
    [
        ({"TEMPORAL_PROFILE": "nope"}, PROFILES, "Profile 'nope' not found"),
        ({}, f'[profile.default]\napi_key = "{SECRET}\n', "TOML parse error"),
        ({"TEMPORAL_TLS_CLIENT_CERT_PATH": "/nonexistent/client.pem"}, None,
         "/nonexistent/client.pem (TEMPORAL_TLS_CLIENT_CERT_PATH"),
    ],
    ids=["unknown profile", "file not TOML", "missing certificate"],
)
def test_a_configuration_that_cannot_work_is_one_line_without_the_secret(
    tmp_path, env, file, expected
):
    with pytest.raises(ValueError) as e:
        settings(tmp_path, file, **env) if file else settings(**env)
    message = str(e.value)
    assert expected in message and "\n" not in message and SECRET not in message


def test_a_config_file_that_does_not_exist_is_an_error_not_silently_no_file(tmp_path):
    with pytest.raises(ValueError, match=r"TEMPORAL_CONFIG_FILE names .* does not exist"):
        Settings.from_env({"TEMPORAL_CONFIG_FILE": str(tmp_path / "missing.toml")})


def test_the_cli_refuses_a_broken_configuration_with_exit_2(monkeypatch, capsys):
    monkeypatch.setenv("TEMPORAL_PROFILE", "nope")
    assert main(["status", "some-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("plangate: Temporal client configuration") and "\n" not in err


def test_secrets_are_not_in_the_settings_repr(tmp_path):
    s = settings(
        TEMPORAL_API_KEY=SECRET,
        TEMPORAL_TLS_CLIENT_KEY_DATA=f"-----BEGIN PRIVATE KEY----- {SECRET}",
        TEMPORAL_GRPC_META_AUTHORIZATION=f"Bearer {SECRET}",
        OPENAI_API_KEY=SECRET,
    )
    assert s.temporal.api_key == SECRET
    assert SECRET not in repr(s) and SECRET not in str(s)


# -- against the session's real Temporal server --------------------------------------------


async def test_a_profile_file_alone_connects_to_the_server_it_names(settings, tmp_path):
    file = tmp_path / "temporal.toml"
    file.write_text(
        f'[profile.tests]\naddress = "{settings.temporal.address}"\n'
        f'namespace = "{settings.temporal.namespace}"\n'
    )
    s = Settings.from_env({"TEMPORAL_CONFIG_FILE": str(file), "TEMPORAL_PROFILE": "tests"})
    client = await connect(s)
    assert client.namespace == settings.temporal.namespace
    info = await client.workflow_service.get_system_info(GetSystemInfoRequest())
    assert info.server_version


async def test_tls_against_a_server_without_it_is_one_line_without_the_api_key(
    settings, monkeypatch, capsys
):
    s = Settings.from_env({
        "TEMPORAL_CONFIG_FILE": "/dev/null",
        "TEMPORAL_ADDRESS": settings.temporal.address,
        "TEMPORAL_API_KEY": SECRET,
    })
    with pytest.raises(ServiceUnreachable) as e:
        await connect_or_one_line(s)
    assert f"cannot reach Temporal at {settings.temporal.address} over TLS" in str(e.value)
    assert SECRET not in str(e.value)

    # and through the command line: exit 1, one line, no key
    monkeypatch.setenv("TEMPORAL_ADDRESS", settings.temporal.address)
    monkeypatch.setenv("TEMPORAL_API_KEY", SECRET)
    assert await asyncio.to_thread(main, ["status", f"run-{uuid.uuid4().hex[:8]}"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("plangate: cannot reach Temporal") and err.count("\n") == 1
    assert SECRET not in err
