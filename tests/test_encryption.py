"""Encrypted payloads (``plangate.worker.encryption``, ``plangate codec-server``).

With ``PLANGATE_ENCRYPTION_KEYS`` set, the worker and every client encrypt each payload: a run
that reads a customer's e-mail address and sends it mail leaves nothing of that address in the
history Temporal stores (read with a client that has no codec), in a tool's result, an
activity's input, the report, or a failure's message; a client with the key reads all of it.
Keys rotate by id; the codec server decrypts for the Web UI, behind CORS and a bearer token.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ipaddress
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

import pytest
import pytest_asyncio
from google.protobuf import json_format
from google.protobuf.message import Message
from psycopg import sql
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import (
    Client,
    WorkflowFailureError,
    WorkflowHistory,
    WorkflowUpdateFailedError,
)
from temporalio.exceptions import ApplicationError
from temporalio.worker import Replayer

from plangate.cli import main
from plangate.client.api import Plangate
from plangate.client.connection import connect
from plangate.demo.schema import Account, seed_account
from plangate.records import seal
from plangate.records.approvals import ApprovalAnswer, ApprovalDecision
from plangate.records.run import CancelRequest
from plangate.servers.codec import CodecServer, CodecServerRefused, codec_server
from plangate.testing import console_script, history_events, running_worker, scheduled
from plangate.worker.assembly import PlangateWorkerPlugin, build_worker
from plangate.worker.compression import DATA_CONVERTER
from plangate.worker.encryption import (
    ENCODING,
    KEY_ID,
    REFUSED_TYPE,
    DecryptionError,
    EncryptionCodec,
    payload_codec,
)
from plangate.world.clients import World
from plangate.world.settings import (
    ENCRYPTION_KEYS_VAR,
    EncryptionSettings,
    Settings,
    parse_encryption_keys,
)
from tests.test_unreachable import closed_port

K1, K2 = os.urandom(32), os.urandom(32)
ORIGIN = "http://ui.example:8080"
TOKEN = "codec-token-" + uuid.uuid4().hex


def b64(key: bytes) -> str:
    return base64.b64encode(key).decode()


@dataclass
class Encrypted:
    settings: Settings
    client: Client


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def k1(settings: Settings) -> Encrypted:
    """The deployment with one key, ``k1``: its settings and a client made by ``connect``."""
    s = with_keys(settings, f"k1:{b64(K1)}")
    return Encrypted(s, await connect(s))


def with_keys(settings: Settings, raw: str) -> Settings:
    """``settings`` with ``PLANGATE_ENCRYPTION_KEYS=raw``."""
    keys = parse_encryption_keys(raw)
    return replace(settings, encryption=replace(settings.encryption, keys=keys))


async def bare_client(settings: Settings) -> Client:
    """A client with Temporal's default converter and no codec: what Temporal stores."""
    return await Client.connect(**settings.temporal.connect_config())


def payloads_in(message: Message) -> Iterator[Payload]:
    """Every Payload anywhere in a protobuf message (maps and repeated fields included)."""
    if isinstance(message, Payload):
        yield message
        return
    for field, value in message.ListFields():
        if field.message_type is None:  # scalars
            continue
        if isinstance(value, Message):
            values = [value]
        elif field.message_type.GetOptions().map_entry:
            values = list(value.values())
        else:  # repeated
            values = list(value)
        for v in values:
            if isinstance(v, Message):
                yield from payloads_in(v)


# The SDK's own records, in clear by design, holding no value of a run: a local activity's
# bookkeeping (its id, attempt and times) and the patches a run took (their markers, and the
# TemporalChangeVersion search attribute).
SDK_RECORDS = {"core_local_activity": "data", "core_patch": "patch-data"}


def run_payloads(e: HistoryEvent) -> Iterator[Payload]:
    """Every payload of an event but the SDK's own records."""
    if e.HasField("upsert_workflow_search_attributes_event_attributes"):
        return
    if e.HasField("workflow_execution_started_event_attributes"):
        # search attributes are indexed by Temporal, so never encoded (docs/encryption.md): only
        # plangate's status, goal and awaiting flag (this plan's goal holds no address)
        started = e.workflow_execution_started_event_attributes
        indexed = set(started.search_attributes.indexed_fields)
        assert indexed <= {"PlangateStatus", "PlangateGoal", "PlangateAwaitingApproval"}, indexed
        copy = type(e)()
        copy.CopyFrom(e)
        copy.workflow_execution_started_event_attributes.ClearField("search_attributes")
        yield from payloads_in(copy)
        return
    for field in ("activity_task_scheduled_event_attributes",
                  "start_child_workflow_execution_initiated_event_attributes"):
        if e.HasField(field):
            # the call seal (plangate.records.seal) is an HMAC of the call under the
            # deployment's key: it holds nothing of the call to hide, so it is sent as it is
            copy = type(e)()
            copy.CopyFrom(e)
            fields = getattr(copy, field).header.fields
            assert seal.HEADER in fields  # every call plangate schedules is sealed
            del fields[seal.HEADER]
            yield from payloads_in(copy)
            return
    if e.HasField("marker_recorded_event_attributes"):
        a = e.marker_recorded_event_attributes
        for key, ps in a.details.items():
            if key != SDK_RECORDS.get(a.marker_name):
                yield from ps.payloads
        if a.HasField("failure"):
            yield from payloads_in(a.failure)
        return
    yield from payloads_in(e)


async def seeded_account(world: World) -> tuple[str, str, str]:
    """An account whose billing contact is an address seen nowhere else: (account id, the
    address, the tag only the address holds)."""
    tag = uuid.uuid4().hex
    aid = f"acct_{uuid.uuid4().hex[:8]}"
    address = f"dana.{tag[:12]}@billing-{tag[12:24]}.example"
    await seed_account(world, Account(
        aid, address, invoices=((f"in_{aid[5:]}", Decimal("612.40"), "draft"),),
        subscriptions=((f"sub_{aid[5:]}", "active"),)))
    return aid, address, tag[:12]


def mail_plan(aid: str, on_behalf_of: str | None = None) -> dict[str, Any]:
    """Read the account's billing contact, then mail it."""
    plan: dict[str, Any] = {"goal": f"tell {aid} it is closed", "budget": {"replans_max": 0},
                            "steps": [
        {"n": 1, "tool": "billing.list_invoices", "effect": "read",
         "args": {"account_id": aid}, "binds": {"contact": "$.billing_contact"}},
        {"n": 2, "tool": "email.send", "effect": "external", "depends_on": [1],
         "args": {"to": "${contact}", "template": "account_closed", "account_id": aid}},
    ]}
    if on_behalf_of:
        plan["on_behalf_of"] = on_behalf_of
    return plan


async def assert_sealed(k1: Encrypted, run_id: str, address: str, tag: str) -> WorkflowHistory:
    """The history as Temporal holds it has no byte of the address and every payload of the
    run encrypted under k1; decrypted with k1, those payloads hold the address."""
    history = await (await bare_client(k1.settings)).get_workflow_handle(run_id).fetch_history()
    stored = b"".join(e.SerializeToString() for e in history.events)
    assert tag.encode() not in stored and address.encode() not in stored
    assert tag not in history.to_json()
    found = [p for e in history.events for p in run_payloads(e)]
    assert len(found) >= 5  # the input, the activities' inputs and results, the report
    assert {(p.metadata["encoding"], p.metadata[KEY_ID]) for p in found} == {(ENCODING, b"k1")}
    codec = k1.client.data_converter.payload_codec
    assert codec is not None
    opened = b"".join(p.data for p in await codec.decode(found))
    assert address.encode() in opened  # the same walk would have found it: the test can fail
    return history


async def test_a_run_that_mails_a_seeded_address_leaves_no_plaintext_of_it(k1, world, pg):
    aid, address, tag = await seeded_account(world)
    async with running_worker(k1.client, k1.settings) as h:
        rep = await h.run(mail_plan(aid))
    assert rep.status == "succeeded", rep.failure
    assert rep.step(1).binds == {"contact": address}  # the workflow read it decrypted
    cur = await pg.execute("SELECT to_address FROM demo.outbox WHERE account_id = %s", (aid,))
    assert await cur.fetchall() == [(address,)]
    history = await assert_sealed(k1, rep.run_id, address, tag)

    # rotation: a client and a replayer holding [k2, k1] read and replay what k1 wrote
    k2k1 = with_keys(k1.settings, f"k2:{b64(K2)},k1:{b64(K1)}")
    read = await Plangate(await connect(k2k1), k2k1).report(rep.run_id)
    assert read.step(1).binds == {"contact": address}
    replayed = await Replayer(workflows=[], plugins=[PlangateWorkerPlugin(k2k1.encryption)]
                              ).replay_workflow(history, raise_on_replay_failure=False)
    assert replayed.replay_failure is None
    # a client without k1 is told which key it lacks, never shown ciphertext as data
    k2 = with_keys(k1.settings, f"k2:{b64(K2)}")
    with pytest.raises(DecryptionError, match="key 'k1', which PLANGATE_ENCRYPTION_KEYS "
                       r"does not hold \(it holds k2\)"):
        await Plangate(await connect(k2), k2).report(rep.run_id)


async def test_a_failure_message_naming_the_address_is_encrypted_too(k1, world, pg):
    """A tool's error says what it was doing ("send account_closed to <address>: permission
    denied"): with keys, failure messages are encoded payloads, and the run still reads its
    own failure decrypted."""
    aid, address, tag = await seeded_account(world)
    role = f"mailless_{uuid.uuid4().hex[:8]}"
    r = sql.Identifier(role)
    await pg.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(r))
    try:
        await pg.execute(sql.SQL("GRANT USAGE ON SCHEMA demo TO {}").format(r))
        await pg.execute(sql.SQL("GRANT SELECT ON demo.customers, demo.invoices, "
                                 "demo.subscriptions TO {}").format(r))
        async with running_worker(k1.client, k1.settings) as h:
            rep = await h.run(mail_plan(aid, on_behalf_of=role))
    finally:
        await pg.execute(sql.SQL("DROP OWNED BY {}").format(r))
        await pg.execute(sql.SQL("DROP ROLE {}").format(r))
    assert rep.status == "halted" and rep.failure is not None, rep
    assert (rep.failure.step, rep.failure.code) == (2, "authority_revoked")
    assert f"send account_closed to {address}" in rep.failure.detail
    history = await assert_sealed(k1, rep.run_id, address, tag)
    failures = [e.activity_task_failed_event_attributes.failure for e in history.events
                if e.HasField("activity_task_failed_event_attributes")]
    assert failures and all(f.message == "Encoded failure" for f in failures)


async def test_build_worker_refuses_a_client_that_would_write_in_clear(client, k1):
    with pytest.raises(ValueError, match="does not encrypt with key 'k1'"):
        await build_worker(client, k1.settings, bootstrap=False)


REFUSED = ("refused: a payload that is not encrypted (encoding 'json/plain'): this worker has "
           "PLANGATE_ENCRYPTION_KEYS and takes a run's input, signals and updates only "
           "encrypted with the deployment's key")


async def plain_client(settings: Settings) -> Client:
    """A client with plangate's converter and no keys: anyone who reaches Temporal."""
    return await Client.connect(**settings.temporal.connect_config(), data_converter=DATA_CONVERTER)


async def test_an_encrypting_worker_refuses_a_plain_start(k1, s3):
    bucket, key = f"plain-{uuid.uuid4().hex[:8]}", "written.txt"
    s3.create_bucket(Bucket=bucket)
    plan = {"goal": "write without the key", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "s3.put", "args": {"bucket": bucket, "key": key, "body": "x"}}]}
    plain = await plain_client(k1.settings)
    async with running_worker(k1.client, k1.settings) as h:
        # the very input `plangate run` sends, only not encrypted
        handle = await Plangate(plain, h.settings).submit(plan)
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(handle.result(), 30)
        rep = await Plangate(k1.client, h.settings).report(handle.id)
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError), cause
    assert (cause.type, cause.non_retryable) == (REFUSED_TYPE, True)
    assert cause.message.startswith(REFUSED), cause.message  # read without the key
    events = await history_events(plain, handle.id)
    assert await scheduled(plain, handle.id) == {}  # no tool, no probe
    assert [e.event_type for e in events][-1] == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED
    assert not any(e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED for e in events)
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0
    assert rep.status == "failed" and rep.escalation is not None, rep
    assert REFUSED in rep.escalation and {s.state for s in rep.steps} == {"VOID"}


async def test_an_encrypting_worker_drops_plain_signals_and_refuses_plain_updates(
    k1, s3, caplog
):
    bucket, key = f"plain-{uuid.uuid4().hex[:8]}", "approved.txt"
    s3.create_bucket(Bucket=bucket)
    plan = {"goal": "write once approved", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "s3.put", "approval": "required",
         "args": {"bucket": bucket, "key": key, "body": "approved"}}]}
    plain = await plain_client(k1.settings)
    async with running_worker(k1.client, k1.settings) as h:
        api = Plangate(k1.client, h.settings)
        run_id = await api.start(plan)
        for _ in range(100):
            rep = await api.report(run_id)
            if rep.approvals:
                break
            await asyncio.sleep(0.1)
        (card,) = rep.approvals
        answer = ApprovalAnswer(step=1, digest=card.digest, decision=ApprovalDecision.APPROVE,
                                by="mallory")
        theirs = plain.get_workflow_handle(run_id)
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await theirs.execute_update("approve", answer)
        why = refused.value.cause
        assert isinstance(why, ApplicationError) and why.type == REFUSED_TYPE, why
        assert why.message.startswith(REFUSED), why.message
        for name, arg in (("answer", answer), ("cancel", CancelRequest(reason="plain"))):
            await theirs.signal(name, arg)
        # the run went on as if nothing came: still waiting, nothing recorded or cancelled
        await asyncio.sleep(1)
        rep = await api.report(run_id)
        assert rep.status == "awaiting_approval" and rep.cancellation is None, rep
        assert rep.refused_answers == [] and rep.approvals[0].answer is None
        assert (await scheduled(k1.client, run_id)).get("s3.put", 0) == 0
        # the key's holder answers: the step runs, once
        await api.approve(run_id, 1, card.digest, by="erin")
        rep = await asyncio.wait_for(api.result(run_id), 30)
    assert rep.status == "succeeded", rep.failure
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"approved"
    dropped = [r for r in caplog.records if "dropping the signal" in r.getMessage()]
    named = {re.search(r"signal input for (\w+) ", r.getMessage()) for r in dropped}
    assert {m.group(1) for m in named if m} == {"answer", "cancel"}, dropped
    assert all(REFUSED in str(r.exc_info[1]) for r in dropped if r.exc_info)


def keyring(*ids: str) -> EncryptionSettings:
    material = {"k1": K1, "k2": K2}
    return EncryptionSettings.from_env({ENCRYPTION_KEYS_VAR: ",".join(
        f"{i}:{b64(material[i])}" for i in ids)})


async def test_rotation_new_payloads_carry_the_first_key_old_ones_still_open():
    value = Payload(metadata={"encoding": b"json/plain"}, data=b'{"to": "a@b.example"}')
    (old,) = await payload_codec(keyring("k1")).encode([value])
    rotated = payload_codec(keyring("k2", "k1"))
    assert await rotated.decode([old]) == [value]
    (new,) = await rotated.encode([value])
    assert new.metadata[KEY_ID] == b"k2" and new.data != old.data
    assert await payload_codec(keyring("k2")).decode([new]) == [value]
    with pytest.raises(DecryptionError, match=r"key 'k1', which .* does not hold \(it holds k2\)"):
        await payload_codec(keyring("k2")).decode([old])
    with pytest.raises(DecryptionError, match=r"key 'k1', which .* does not hold .*not set"):
        await payload_codec(EncryptionSettings()).decode([old])
    # another key under the same id, an altered byte, an id swapped for another: refused
    impostor = EncryptionSettings.from_env({ENCRYPTION_KEYS_VAR: f"k1:{b64(K2)}"})
    altered = Payload(metadata=old.metadata, data=old.data[:-1] + bytes([old.data[-1] ^ 1]))
    swapped = Payload(metadata={**old.metadata, KEY_ID: b"k2"}, data=old.data)
    for codec, p in ((payload_codec(impostor), old), (rotated, altered), (rotated, swapped)):
        with pytest.raises(DecryptionError, match="does not decrypt with the key of that id"):
            await codec.decode([p])
    # a payload never encrypted (a history from before) passes as it is
    assert await rotated.decode([value]) == [value]


@pytest.mark.parametrize(("raw", "message"), [
    ("k1:" + b64(b"x" * 16), "key 'k1' is 16 bytes, not 32"),
    ("k1:not base64!", "key 'k1' is not standard base64"),
    # ids of their own: the keys are random, and each xdist worker collects alike
    pytest.param(f"k1:{b64(K1)},k1:{b64(K2)}", "key id 'k1' is given twice", id="id twice"),
    pytest.param(f"bad id:{b64(K1)}", "entry 1 is not ID:BASE64KEY", id="bad id"),
    pytest.param(f"k1:{b64(K1)},{b64(K2)}", "entry 2 is not ID:BASE64KEY", id="no id"),
])
def test_bad_keys_are_refused_naming_the_variable_never_the_key(raw, message, monkeypatch,
                                                                 capsys):
    with pytest.raises(ValueError, match=message) as e:
        Settings.from_env({ENCRYPTION_KEYS_VAR: raw})
    assert str(e.value).startswith(ENCRYPTION_KEYS_VAR)
    monkeypatch.setenv(ENCRYPTION_KEYS_VAR, raw)
    assert main(["status", "any-run"]) == 2
    err = capsys.readouterr().err
    assert message in err
    for secret in (b64(K1), b64(K2), "not base64", b64(b"x" * 16)):
        assert secret not in str(e.value) and secret not in err


def test_keys_and_token_stay_out_of_repr():
    s = Settings.from_env({ENCRYPTION_KEYS_VAR: f"k2:{b64(K2)}, k1:{b64(K1)}",
                           "PLANGATE_CODEC_TOKEN": TOKEN})
    assert s.encryption.key_ids == ("k2", "k1") and s.encryption.codec_token == TOKEN
    shown = repr(s)
    for secret in (b64(K1), b64(K2), repr(K1), repr(K2), TOKEN):
        assert secret not in shown
    assert repr(EncryptionCodec(s.encryption.keys)) == "EncryptionCodec(key_ids=('k2', 'k1'))"


# --- the codec server -------------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[CodecServer]:
    s = Settings.from_env({ENCRYPTION_KEYS_VAR: f"k1:{b64(K1)}", "PLANGATE_CODEC_TOKEN": TOKEN})
    srv = codec_server(s.encryption, port=0, origins=[ORIGIN])
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join()


def http(url: str, method: str = "POST", body: bytes | None = None,
         **headers: str) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, data=body, method=method,
                                 headers={k.replace("_", "-"): v for k, v in headers.items()})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def as_json(payloads: list[Payload]) -> bytes:
    return json_format.MessageToJson(Payloads(payloads=payloads)).encode()


def from_json(body: bytes) -> list[Payload]:
    return list(json_format.Parse(body, Payloads()).payloads)


async def encrypted_report(address: str) -> list[Payload]:
    codec = payload_codec(keyring("k1"))
    plain = Payload(metadata={"encoding": b"json/plain"},
                    data=json.dumps({"binds": {"contact": address}}).encode())
    return await codec.encode([plain])


async def test_codec_server_decodes_for_the_web_ui(server):
    address = f"ops.{uuid.uuid4().hex[:8]}@example.com"
    sealed = await encrypted_report(address)
    auth = {"Authorization": f"Bearer {TOKEN}", "Content_Type": "application/json"}
    # the Web UI's request: a namespace in the path and the header, from its origin
    status, headers, body = await asyncio.to_thread(
        http, f"{server.url}/default/decode", body=as_json(sealed), Origin=ORIGIN,
        X_Namespace="default", **auth)
    assert status == 200, body
    assert headers["Access-Control-Allow-Origin"] == ORIGIN
    (opened,) = from_json(body)
    assert opened.metadata["encoding"] == b"json/plain"
    assert json.loads(opened.data) == {"binds": {"contact": address}}
    assert b'"encoding": "anNvbi9wbGFpbg=="' in body  # protobuf JSON: bytes are base64
    # encode, as the UI does for a signal's input, and back
    status, _, body = await asyncio.to_thread(
        http, f"{server.url}/encode", body=as_json([opened]), **auth)
    (again,) = from_json(body)
    assert status == 200 and again.metadata[KEY_ID] == b"k1" and address.encode() not in body
    assert from_json((await asyncio.to_thread(
        http, f"{server.url}/decode", body=as_json([again]), **auth))[2]) == [opened]


async def test_codec_server_cors_token_and_errors(server):
    url = f"{server.url}/decode"
    status, headers, _ = await asyncio.to_thread(
        http, url, "OPTIONS", Origin=ORIGIN, Access_Control_Request_Method="POST",
        Access_Control_Request_Headers="content-type,x-namespace,authorization")
    assert status == 204
    assert headers["Access-Control-Allow-Origin"] == ORIGIN
    assert "POST" in headers["Access-Control-Allow-Methods"]
    allowed = {h.strip().lower() for h in headers["Access-Control-Allow-Headers"].split(",")}
    assert {"content-type", "x-namespace", "authorization"} <= allowed
    other = "http://evil.example"
    assert (await asyncio.to_thread(http, url, "OPTIONS", Origin=other))[0] == 403
    body = as_json(await encrypted_report("x@example.com"))
    for auth in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
        status, headers, _ = await asyncio.to_thread(http, url, body=body, **auth)
        assert status == 401 and headers["WWW-Authenticate"] == "Bearer"
    ok = {"Authorization": f"Bearer {TOKEN}"}
    assert (await asyncio.to_thread(http, url, body=body, Origin=other, **ok))[0] == 403
    # a key it does not hold: 400, naming the key id
    foreign = Payload(metadata={"encoding": ENCODING, KEY_ID: b"k9"}, data=b"\0" * 40)
    status, _, text = await asyncio.to_thread(http, url, body=as_json([foreign]), **ok)
    assert status == 400 and b"key 'k9'" in text and b64(K1).encode() not in text
    for bad in (b"{not json", b'{"payloads": 3}'):
        assert (await asyncio.to_thread(http, url, body=bad, **ok))[0] == 400
    assert (await asyncio.to_thread(http, f"{server.url}/other", body=body, **ok))[0] == 404
    assert (await asyncio.to_thread(http, url, "GET"))[0] == 405


async def test_plangate_codec_server_command():
    """Without a token: on loopback, and only when told so."""
    env = {**os.environ, ENCRYPTION_KEYS_VAR: f"k2:{b64(K2)},k1:{b64(K1)}"}
    env.pop("PLANGATE_CODEC_TOKEN", None)
    proc = await asyncio.create_subprocess_exec(
        console_script("plangate"), "codec-server", "--port", "0", "--origin", ORIGIN,
        "--insecure-local", env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        assert "keys k2, k1" in line and ORIGIN in line and b64(K1) not in line, line
        assert "no token: any process on this machine may use it" in line, line
        url = line.split(" on ", 1)[1].split()[0]
        sealed = await encrypted_report("cli@example.com")  # written under k1, before rotation
        status, _, body = await asyncio.to_thread(http, f"{url}/decode", body=as_json(sealed))
        assert status == 200 and b"cli@example.com" in base64.b64decode(
            json.loads(body)["payloads"][0]["data"])
    finally:
        proc.send_signal(signal.SIGINT)
        code = await asyncio.wait_for(proc.wait(), 10)
    assert code == 130  # interrupted, as every command



def non_loopback_hosts() -> list[str]:
    """Every interface, and this machine's own address on its network when it has one."""
    hosts = ["0.0.0.0"]
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))  # a UDP connect sends nothing: it only picks the route
        own = s.getsockname()[0]
        if not ipaddress.ip_address(own).is_loopback:
            hosts.append(own)
    return hosts


async def codec_server_command(*argv: str, **env: str) -> tuple[int, str, str]:
    """``plangate codec-server ARGV`` with the keys and ``env``, which must end by itself."""
    run_env = {k: v for k, v in os.environ.items() if k != "PLANGATE_CODEC_TOKEN"}
    run_env.update({ENCRYPTION_KEYS_VAR: f"k1:{b64(K1)}", **env})
    proc = await asyncio.create_subprocess_exec(
        console_script("plangate"), "codec-server", *argv, env=run_env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        if proc.returncode is None:  # it serves: the refusal this test expects did not come
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def listening(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex((host, port)) == 0


@pytest.mark.parametrize("host", non_loopback_hosts())
async def test_codec_server_without_a_token_off_loopback_refuses_to_start(host):
    port = closed_port()
    for flags in ((), ("--insecure-local",)):  # the local flag does not open other addresses
        code, out, err = await codec_server_command("--host", host, "--port", str(port),
                                                    *flags)
        assert (code, out) == (2, ""), (code, out, err)
        assert err.splitlines() == [
            f"plangate: codec-server: refusing to listen on {host} without "
            "PLANGATE_CODEC_TOKEN: anyone who reaches it could decrypt the deployment's "
            "payloads; set PLANGATE_CODEC_TOKEN (make one with: python3 -c 'import secrets; "
            "print(secrets.token_urlsafe(32))'), or serve this machine only with --host "
            "127.0.0.1 --insecure-local"], err
        assert not listening(host, port) and not listening("127.0.0.1", port)
    # the refusal is the token's: with one, the same address is served (in-process, port 0)
    s = Settings.from_env({ENCRYPTION_KEYS_VAR: f"k1:{b64(K1)}", "PLANGATE_CODEC_TOKEN": TOKEN})
    srv = codec_server(s.encryption, host=host, port=0)
    try:
        assert listening(host, srv.server_address[1])
    finally:
        srv.server_close()


async def test_codec_server_on_loopback_needs_the_local_flag_or_a_strong_token():
    port = closed_port()
    code, _, err = await codec_server_command("--port", str(port))
    assert code == 2 and err.startswith(
        "plangate: codec-server: PLANGATE_CODEC_TOKEN is not set: every process on this "
        "machine could decrypt the deployment's payloads;"), err
    assert "pass --insecure-local to serve a loopback address without a token" in err
    for weak in ("tiny-1", "x" * 64, "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ",
                 secrets.token_urlsafe(12)):
        code, _, err = await codec_server_command("--port", str(port), "--insecure-local",
                                                  PLANGATE_CODEC_TOKEN=weak)
        assert code == 2 and "PLANGATE_CODEC_TOKEN is too weak: about " in err, err
        assert "at least 128 are needed" in err and "secrets.token_urlsafe(32)" in err
        assert weak not in err
    assert not listening("127.0.0.1", port)
    with pytest.raises(CodecServerRefused, match="PLANGATE_CODEC_TOKEN is not set"):
        codec_server(EncryptionSettings(), port=0)
