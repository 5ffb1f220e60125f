"""The call seal (``plangate.records.seal``) binds every part of a call it names: a seal made
for one call verifies for no other (another key, namespace, workflow, run, activity, argument
or vouched header), and arguments compare as JSON whatever their key order."""

from __future__ import annotations

import os

import pytest

from plangate.records import seal

KEY = os.urandom(seal.KEY_BYTES)
CALL = {"namespace": "default", "workflow_id": "plan-1", "run_id": "run-a",
        "activity": "billing.issue_credit"}
ARGS = [b'{"step":{"n":1,"args":{"account_id":"a","amount_eur":10.0}},"key":"k"}']


def made(**over: str) -> bytes:
    c = {**CALL, **over}
    return seal.seal(KEY, namespace=c["namespace"], workflow_id=c["workflow_id"],
                     run_id=c["run_id"], activity=c["activity"], args=seal.args_digest(ARGS))


def verifies(given: bytes, *, key: bytes = KEY, args: list[bytes] = ARGS, header: bytes = b"",
             over: dict[str, str] | None = None) -> bool:
    c = {**CALL, **(over or {})}
    return seal.verifies(key, given, namespace=c["namespace"], workflow_id=c["workflow_id"],
                         run_id=c["run_id"], activity=c["activity"],
                         args=seal.args_digest(args), header=header)


@pytest.mark.parametrize("part, value", [
    ("namespace", "other"), ("workflow_id", "plan-10"), ("run_id", "run-b"),
    ("activity", "email.send"),
])
def test_a_seal_verifies_for_its_own_call_only(part: str, value: str) -> None:
    given = made()
    assert verifies(given)
    assert not verifies(given, over={part: value})


def test_another_key_arguments_or_header_do_not_verify() -> None:
    given = made()
    changed = [ARGS[0].replace(b"10.0", b"99.0")]
    assert not verifies(given, key=os.urandom(seal.KEY_BYTES))
    assert not verifies(given, args=changed)
    assert not verifies(given, header=b'{"n":1}')
    # one argument split in two is another call (each argument is length-prefixed)
    assert seal.args_digest([b"ab", b"c"]) != seal.args_digest([b"a", b"bc"])


def test_arguments_compare_as_json() -> None:
    reordered = [b'{"key":"k","step":{"args":{"amount_eur":10.0,"account_id":"a"},"n":1}}']
    assert seal.args_digest(reordered) == seal.args_digest(ARGS)
    assert seal.args_digest([b'{"a":1}']) != seal.args_digest([b'{"a":1.5}'])
    assert seal.args_digest([b"\x00not json"]) == seal.args_digest([b"\x00not json"])


def test_a_short_key_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 32 bytes"):
        seal.seal(b"short", namespace="n", workflow_id="w", run_id="r", activity="a", args=b"")
