"""Configuration by environment (DESIGN.md section 7). Read once, at start.

The Temporal connection comes from ``temporalio.envconfig``, as every Temporal SDK and the
Temporal CLI read it: a profile from a TOML file (``TEMPORAL_CONFIG_FILE``, else the default
``~/.config/temporalio/temporal.toml``; ``TEMPORAL_PROFILE`` names the profile, else
``default``), overridden by the environment (``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``,
``TEMPORAL_API_KEY``, ``TEMPORAL_TLS``, ``TEMPORAL_TLS_*``, ``TEMPORAL_GRPC_META_*``). With
neither, plangate's defaults: ``localhost:7233``, namespace ``default``, no TLS. An API key turns
TLS on unless TLS is disabled. As for every plangate variable, an empty value counts as unset.

The API key, the TLS material and the gRPC metadata (which may carry credentials) never appear in
``repr(settings)`` nor in an error message; nor do the payload encryption keys
(``PLANGATE_ENCRYPTION_KEYS``, ``plangate.encryption``) and the codec server's token
(``PLANGATE_CODEC_TOKEN``): of a key, only its id is ever named.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from plangate.plans.model import Effect
from plangate.plans.scope import Scope
from plangate.records.proofs import Submitter
from plangate.records.signing import NAME, KeyProblem, SigningKey, public_entries

if TYPE_CHECKING:  # loaded where a connection is made: a plan check needs no Temporal client
    from temporalio.envconfig import ClientConfigProfile, ClientConfigTLS, ClientConnectConfig

Replanner = Literal["openai", "playbook"]

DEMO_SYSTEMS_VAR = "PLANGATE_DEMO_SYSTEMS"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def flag(env: Mapping[str, str], name: str, default: bool = False) -> bool:
    """A yes/no variable: ``1``/``true``/``yes``/``on`` or ``0``/``false``/``no``/``off``
    (any case); unset or empty: ``default``."""
    value = (env.get(name) or "").strip().lower()
    if not value:
        return default
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"{name} must be 1 or 0 (true/false, yes/no, on/off), not {value!r}")


POLICY_BUNDLE_VAR = "PLANGATE_POLICY_BUNDLE"
EXTENSIONS_VAR = "PLANGATE_EXTENSIONS"
_MODULE_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def _module_paths(raw: str) -> tuple[str, ...]:
    """``PLANGATE_EXTENSIONS``: module paths, separated by commas."""
    paths = tuple(p.strip() for p in raw.split(",") if p.strip())
    bad = [p for p in paths if not _MODULE_PATH.match(p)]
    if bad:
        raise ValueError(f"{EXTENSIONS_VAR}: not a module path: {', '.join(map(repr, bad))}")
    return paths


def _effects(raw: str) -> tuple[Effect, ...]:
    """``PLANGATE_APPROVE_EFFECTS``: effects, separated by commas (``money,external``)."""
    names = [n.strip().lower() for n in raw.split(",") if n.strip()]
    bad = [n for n in names if n not in {e.value for e in Effect}]
    if bad:
        known = ", ".join(e.value for e in Effect)
        raise ValueError(f"PLANGATE_APPROVE_EFFECTS: unknown effect {bad[0]!r} (known: {known})")
    return tuple(Effect(n) for n in names)


ENCRYPTION_KEYS_VAR = "PLANGATE_ENCRYPTION_KEYS"
CODEC_TOKEN_VAR = "PLANGATE_CODEC_TOKEN"
ENCRYPTION_KEY_BYTES = 32  # AES-256
_KEY_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


def parse_encryption_keys(raw: str) -> tuple[tuple[str, bytes], ...]:
    """``PLANGATE_ENCRYPTION_KEYS``: ``ID:BASE64`` entries separated by commas, the first the
    one that encrypts (``k2:...,k1:...``); each key 32 bytes (AES-256) in standard base64, each
    id 1-64 letters, digits, ``.``, ``_`` or ``-``, no id twice. An error names the variable and
    the entry (by its position, and by its id once the id is valid), never key material: a
    malformed entry may be a key pasted in the wrong place, so nothing of it is quoted."""
    keys: list[tuple[str, bytes]] = []
    for i, entry in enumerate((e.strip() for e in raw.split(",")), 1):
        if not entry:
            continue
        kid, colon, material = (part.strip() for part in entry.partition(":"))
        if not colon or not _KEY_ID.fullmatch(kid):
            raise ValueError(
                f"{ENCRYPTION_KEYS_VAR}: entry {i} is not ID:BASE64KEY with an id of 1-64 "
                "letters, digits, '.', '_' or '-' (e.g. k1:<44 base64 characters>)"
            )
        if any(kid == known for known, _ in keys):
            raise ValueError(f"{ENCRYPTION_KEYS_VAR}: key id {kid!r} is given twice")
        try:
            key = base64.b64decode(material, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(
                f"{ENCRYPTION_KEYS_VAR}: key {kid!r} is not standard base64"
            ) from None
        if len(key) != ENCRYPTION_KEY_BYTES:
            raise ValueError(
                f"{ENCRYPTION_KEYS_VAR}: key {kid!r} is {len(key)} bytes, not "
                f"{ENCRYPTION_KEY_BYTES} (AES-256)"
            )
        keys.append((kid, key))
    return tuple(keys)


APPROVERS_VAR = "PLANGATE_APPROVERS"
APPROVER_KEY_VAR = "PLANGATE_APPROVER_KEY"
SUBMITTERS_VAR = "PLANGATE_SUBMITTERS"
SUBMITTER_KEY_VAR = "PLANGATE_SUBMITTER_KEY"


def _key_text(entry: str, var: str) -> str:
    """A key given inline (``NAME:BASE64``) or as the path of a file that holds one."""
    if ":" in entry and not os.path.exists(entry):
        return entry
    try:
        return Path(entry).expanduser().read_text().strip()
    except OSError as e:
        raise ValueError(f"{var}: cannot read key file {entry}: {e.strerror}") from None


def signing_keys(raw: str, var: str) -> tuple[SigningKey, ...]:
    """Signing keys separated by commas, each ``NAME:BASE64`` or a key file's path; one key a
    name. Errors name the variable and the entry, never key material."""
    keys: list[SigningKey] = []
    for i, entry in enumerate((e.strip() for e in raw.split(",")), 1):
        if not entry:
            continue
        try:
            key = SigningKey.parse(_key_text(entry, var), f"{var} entry {i}")
        except KeyProblem as e:
            raise ValueError(str(e)) from None
        if any(k.name == key.name for k in keys):
            raise ValueError(f"{var}: two keys are named {key.name}")
        keys.append(key)
    return tuple(keys)


def _public_keys(raw: str, var: str) -> tuple[tuple[str, bytes], ...]:
    try:
        return public_entries(raw, var)
    except KeyProblem as e:
        raise ValueError(str(e)) from None


def parse_submitters(raw: str) -> tuple[Submitter, ...]:
    """``PLANGATE_SUBMITTERS``: ``NAME:BASE64PUBLICKEY:PRINCIPAL|PRINCIPAL`` entries separated
    by commas: who may submit runs, and the principals (``on_behalf_of``) each may act as."""
    var = SUBMITTERS_VAR
    out: list[Submitter] = []
    for i, entry in enumerate((e.strip() for e in raw.split(",")), 1):
        if not entry:
            continue
        head, colon, principals = entry.rpartition(":")
        names = tuple(p.strip() for p in principals.split("|") if p.strip())
        if not colon or head.count(":") != 1 or not names:
            raise ValueError(
                f"{var}: entry {i} is not NAME:BASE64PUBLICKEY:PRINCIPAL[|PRINCIPAL...]"
            )
        bad = [p for p in names if not NAME.match(p)]
        if bad:
            raise ValueError(f"{var}: entry {i}: {bad[0]!r} is not a principal name")
        ((name, public),) = _public_keys(head, f"{var} entry {i}")
        if any(s.name == name for s in out):
            raise ValueError(f"{var}: {name} is listed twice")
        out.append(Submitter(name, public, names))
    return tuple(out)


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNIT_S = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(raw: str, what: str) -> float:
    """Seconds from ``90``, ``90s``, ``15m``, ``8h`` or ``2d``; a clear error otherwise."""
    m = _DURATION.match(raw)
    if m is None or float(m.group(1)) <= 0:
        raise ValueError(f"{what}: {raw!r} is not a duration (90s, 15m, 8h, 2d)")
    return float(m.group(1)) * _UNIT_S[m.group(2)]


METRICS_ADDRESS_VAR = "PLANGATE_METRICS_ADDRESS"


def metrics_address(raw: str) -> str:
    """``PLANGATE_METRICS_ADDRESS``: where a worker serves its Prometheus endpoint, an IP
    address and a port (``127.0.0.1:9464``, ``0.0.0.0:9464``, ``[::]:9464``). Temporal's core
    binds it as a socket address: a host name is not resolved, and port 0 would hide the port
    it got, so both are refused here, in one line naming the variable."""
    text = raw.strip()
    host, sep, port = text.rpartition(":")
    try:
        if not sep or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise ValueError(port)
        if host.startswith("[") and host.endswith("]"):
            ipaddress.IPv6Address(host[1:-1])
        else:
            ipaddress.IPv4Address(host)
    except ValueError:
        raise ValueError(
            f"{METRICS_ADDRESS_VAR} must be an IP address and a port from 1 to 65535 "
            f"(127.0.0.1:9464, 0.0.0.0:9464, [::]:9464), not {raw!r}"
        ) from None
    return text


def extension_modules(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The modules ``PLANGATE_EXTENSIONS`` names (``os.environ`` by default)."""
    return _module_paths((os.environ if env is None else env).get(EXTENSIONS_VAR) or "")


def demo_systems_enabled(env: Mapping[str, str] | None = None) -> bool:
    """Whether ``PLANGATE_DEMO_SYSTEMS`` turns the demo systems on (``os.environ`` by default)."""
    return flag(os.environ if env is None else env, DEMO_SYSTEMS_VAR)


@dataclass(frozen=True)
class Settings:
    temporal_address: str = "localhost:7233"
    temporal_namespace: str = "default"
    # The rest of the Temporal connection (temporalio.envconfig): the profile it was read from
    # (None: "default", when the file has one), the API key, TLS (None: off, unless an API key
    # turns it on) and gRPC metadata. Secrets, all but the profile's name: kept out of repr.
    temporal_profile: str | None = None
    temporal_api_key: str | None = field(default=None, repr=False)
    temporal_tls: ClientConfigTLS | None = field(default=None, repr=False)
    temporal_rpc_metadata: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    task_queue: str = "plangate"
    database_url: str = "postgresql://postgres@localhost:5432/postgres"
    s3_endpoint_url: str | None = None
    workdir: Path = field(default_factory=lambda: Path(".plangate/work").resolve())
    openai_base_url: str | None = None
    openai_api_key: str | None = field(default=None, repr=False)
    model: str = "gpt-4o-mini"
    replanner: Replanner = "playbook"
    # where tools may write (plans.scope); None: anywhere but plangate's own schema
    allowed_buckets: str | None = None
    allowed_schemas: str | None = None
    # the demo systems (billing, CRM, e-mail tools and their schema ``demo``): registered by the
    # worker, known to ``check`` and the re-planner only when on (activities.extensions)
    demo_systems: bool = False
    # modules of the user's own tools and probes (activities.extensions), besides those of the
    # ``plangate.extensions`` entry-point group
    extensions: tuple[str, ...] = ()
    # steps of these effects wait for a person's approval of their card (besides those whose
    # plan says ``approval: required``), and how long a card stays valid
    approve_effects: tuple[Effect, ...] = ()
    approval_ttl_s: float = 24 * 3600.0
    # the policy bundle the deployment enforces now: a run decided under another one is refused
    # by every tool before it acts (``policy_superseded``, 412); None: not checked
    policy_bundle: str | None = None
    # the most a run's history holds before it continues as new (records.run.HistoryBound)
    history_events: int = 10_240
    history_bytes: int = 10 * 1024 * 1024
    # how long a step waits for a system that does not answer before it halts
    outage_patience_s: float = 900.0
    # where files passed between steps live when workers share no disk (world.files); None:
    # the work directory (one machine)
    artifacts_bucket: str | None = None
    artifacts_prefix: str = "runs"
    # where traces go over OTLP/HTTP (plangate.tracing); None: no traces
    otlp_traces_endpoint: str | None = None
    # where a worker serves its Prometheus endpoint (plangate.metrics); None: nowhere
    metrics_address: str | None = None
    # payload encryption (plangate.encryption): (key id, 32-byte AES key), the first encrypts,
    # all decrypt; (): payloads are not encrypted. Secrets: kept out of repr.
    encryption_keys: tuple[tuple[str, bytes], ...] = field(default=(), repr=False)
    # the bearer token ``plangate codec-server`` asks for; None: it starts only on loopback
    # with --insecure-local (plangate.codec_server)
    codec_token: str | None = field(default=None, repr=False)
    # who may answer approval cards (name, Ed25519 public key): a worker's setting; an answer
    # counts only with a proof signed by one of them (records.proofs)
    approvers: tuple[tuple[str, bytes], ...] = ()
    # the keys this process signs answers with (``plangate approve``: one; the approval page:
    # one per person it lets in). Secrets: kept out of repr.
    approver_keys: tuple[SigningKey, ...] = field(default=(), repr=False)
    # who may submit runs and as which principals; (): anyone who reaches Temporal may
    submitters: tuple[Submitter, ...] = ()
    # the key this process signs its submissions with. Secret: kept out of repr.
    submitter_key: SigningKey | None = field(default=None, repr=False)

    @property
    def approver_map(self) -> dict[str, bytes]:
        return dict(self.approvers)

    @property
    def submitter_map(self) -> dict[str, Submitter]:
        return {s.name: s for s in self.submitters}

    @property
    def encryption_key_ids(self) -> tuple[str, ...]:
        """The ids of the encryption keys, the one that encrypts first (never the keys)."""
        return tuple(kid for kid, _ in self.encryption_keys)

    @property
    def scope(self) -> Scope:
        scope = Scope.parse(self.allowed_buckets, self.allowed_schemas)
        if self.artifacts_bucket is None:
            return scope
        return replace(scope, protected_buckets=(self.artifacts_bucket,))

    @property
    def temporal_tls_enabled(self) -> bool:
        """Whether the client will speak TLS to Temporal (an API key turns it on by default)."""
        if self.temporal_tls is not None:
            return self.temporal_tls.disabled is not True
        return self.temporal_api_key is not None

    def temporal_connect_config(self) -> ClientConnectConfig:
        """The keyword arguments of ``temporalio.client.Client.connect`` for this deployment
        (``plangate.assembly.connect`` is the one place that connects with them). TLS
        certificates and keys given as paths are read here."""
        from temporalio.envconfig import ClientConfigProfile

        profile = ClientConfigProfile(
            address=self.temporal_address,
            namespace=self.temporal_namespace,
            api_key=self.temporal_api_key,
            tls=self.temporal_tls,
            grpc_meta=dict(self.temporal_rpc_metadata),
        )
        try:
            return profile.to_client_connect_config()
        except OSError as e:
            raise ValueError(
                f"Temporal TLS: cannot read {e.filename}: {e.strerror or type(e).__name__}"
            ) from None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        e = os.environ if env is None else env
        base_url = e.get("OPENAI_BASE_URL") or None
        api_key = e.get("OPENAI_API_KEY") or None
        replanner = e.get("PLANGATE_REPLANNER") or ("openai" if base_url or api_key else "playbook")
        if replanner not in ("openai", "playbook"):
            raise ValueError(
                f"PLANGATE_REPLANNER must be 'openai' or 'playbook', not {replanner!r}"
            )
        temporal = _temporal_profile(e)
        return cls(
            temporal_address=temporal.address or cls.temporal_address,
            temporal_namespace=temporal.namespace or cls.temporal_namespace,
            temporal_profile=e.get("TEMPORAL_PROFILE") or None,
            temporal_api_key=temporal.api_key or None,
            temporal_tls=temporal.tls,
            temporal_rpc_metadata=tuple(sorted(temporal.grpc_meta.items())),
            task_queue=e.get("PLANGATE_TASK_QUEUE") or cls.task_queue,
            database_url=e.get("PLANGATE_DATABASE_URL") or cls.database_url,
            s3_endpoint_url=e.get("PLANGATE_S3_ENDPOINT_URL") or None,
            workdir=Path(e.get("PLANGATE_WORKDIR") or ".plangate/work").resolve(),
            openai_base_url=base_url,
            openai_api_key=api_key,
            model=e.get("PLANGATE_MODEL") or cls.model,
            replanner=replanner,  # type: ignore[arg-type]
            allowed_buckets=e.get("PLANGATE_ALLOWED_BUCKETS") or None,
            allowed_schemas=e.get("PLANGATE_ALLOWED_SCHEMAS") or None,
            demo_systems=flag(e, DEMO_SYSTEMS_VAR),
            extensions=_module_paths(e.get(EXTENSIONS_VAR) or ""),
            approve_effects=_effects(e.get("PLANGATE_APPROVE_EFFECTS") or ""),
            approval_ttl_s=parse_duration(
                e.get("PLANGATE_APPROVAL_TTL") or "24h", "PLANGATE_APPROVAL_TTL"
            ),
            policy_bundle=(e.get(POLICY_BUNDLE_VAR) or "").strip() or None,
            history_events=_at_least(e, "PLANGATE_HISTORY_EVENTS", cls.history_events, 200),
            history_bytes=_at_least(e, "PLANGATE_HISTORY_BYTES", cls.history_bytes, 65_536),
            outage_patience_s=parse_duration(
                e.get("PLANGATE_OUTAGE_PATIENCE") or "15m", "PLANGATE_OUTAGE_PATIENCE"
            ),
            **_artifacts(e.get(ARTIFACTS_VAR) or ""),
            otlp_traces_endpoint=_otlp(e),
            metrics_address=_optional(e, METRICS_ADDRESS_VAR, metrics_address),
            encryption_keys=parse_encryption_keys(e.get(ENCRYPTION_KEYS_VAR) or ""),
            codec_token=(e.get(CODEC_TOKEN_VAR) or "").strip() or None,
            approvers=_public_keys(e.get(APPROVERS_VAR) or "", APPROVERS_VAR),
            approver_keys=signing_keys(e.get(APPROVER_KEY_VAR) or "", APPROVER_KEY_VAR),
            submitters=parse_submitters(e.get(SUBMITTERS_VAR) or ""),
            submitter_key=_one_key(e, SUBMITTER_KEY_VAR),
        )


def _one_key(env: Mapping[str, str], var: str) -> SigningKey | None:
    keys = signing_keys(env.get(var) or "", var)
    if len(keys) > 1:
        raise ValueError(f"{var}: one key, not {len(keys)}")
    return keys[0] if keys else None


def _optional(
    env: Mapping[str, str], name: str, parse: Callable[[str], str]
) -> str | None:
    raw = (env.get(name) or "").strip()
    return parse(raw) if raw else None


def _otlp(env: Mapping[str, str]) -> str | None:
    """OpenTelemetry's own variables: the traces endpoint, else the base endpoint's."""
    name, url = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    suffix = ""
    if not url and env.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        name, url = "OTEL_EXPORTER_OTLP_ENDPOINT", env["OTEL_EXPORTER_OTLP_ENDPOINT"]
        suffix = "/v1/traces"
    if not url:
        return None
    if not re.match(r"^https?://[^/\s]+", url):
        raise ValueError(f"{name} must be an http:// or https:// URL, not {url!r}")
    return url.rstrip("/") + suffix if suffix else url


ARTIFACTS_VAR = "PLANGATE_ARTIFACTS"
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")


def _artifacts(raw: str) -> dict[str, str]:
    """``PLANGATE_ARTIFACTS``: ``s3://bucket`` or ``s3://bucket/prefix``."""
    raw = raw.strip()
    if not raw:
        return {}
    if not raw.startswith("s3://"):
        raise ValueError(f"{ARTIFACTS_VAR} must be s3://bucket[/prefix], not {raw!r}")
    bucket, _, prefix = raw.removeprefix("s3://").partition("/")
    if not _BUCKET.match(bucket):
        raise ValueError(f"{ARTIFACTS_VAR}: {bucket!r} is not an S3 bucket name")
    prefix = prefix.strip("/")
    if any(part in ("", ".", "..") for part in prefix.split("/")) and prefix:
        raise ValueError(f"{ARTIFACTS_VAR}: prefix {prefix!r} has an empty, . or .. segment")
    return {"artifacts_bucket": bucket, "artifacts_prefix": prefix or Settings.artifacts_prefix}


def _at_least(env: Mapping[str, str], name: str, default: int, least: int) -> int:
    raw = (env.get(name) or "").strip().replace("_", "")
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < least:
        raise ValueError(f"{name} must be a whole number of at least {least:,}, not {raw!r}")
    return int(raw)


_TLS_FILES = (
    ("server_root_ca_cert", "TEMPORAL_TLS_SERVER_CA_CERT_PATH", "tls.server_ca_cert_path"),
    ("client_cert", "TEMPORAL_TLS_CLIENT_CERT_PATH", "tls.client_cert_path"),
    ("client_private_key", "TEMPORAL_TLS_CLIENT_KEY_PATH", "tls.client_key_path"),
)


def _temporal_profile(env: Mapping[str, str]) -> ClientConfigProfile:
    """The Temporal client profile of ``env`` through ``temporalio.envconfig``; a configuration
    that cannot be used is a ``ValueError`` of one line that names what to fix (never a
    secret: a TOML error's quoted line is left out)."""
    from temporalio.envconfig import ClientConfigProfile

    # empty means unset, as for every plangate variable
    given = {k: v for k, v in env.items() if v}
    config_file = given.get("TEMPORAL_CONFIG_FILE")
    if config_file and not os.path.exists(config_file):
        # the SDK would silently use no file at all, and connect somewhere else
        raise ValueError(f"TEMPORAL_CONFIG_FILE names {config_file}, which does not exist")
    try:
        profile = ClientConfigProfile.load(override_env_vars=given)
    except RuntimeError as e:  # the SDK's ConfigError: an unknown profile, a file not TOML
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        where = f" ({config_file})" if config_file else ""
        raise ValueError(f"Temporal client configuration{where}: {first}") from None
    tls = profile.tls
    if tls is not None and tls.disabled is not True:
        for attr, var, key in _TLS_FILES:
            source = getattr(tls, attr)
            if isinstance(source, Path) and not source.is_file():
                raise ValueError(
                    f"Temporal TLS: {source} ({var} or the profile's {key}) is not a file"
                )
    return profile
