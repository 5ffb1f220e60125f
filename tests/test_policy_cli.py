"""``plangate policy check``, ``plangate policy explain`` and a worker's refusal of a bad policy
directory, run as users run them (``python -m plangate`` processes, a fresh environment):
exit codes 0 and 2, the exact lines, each problem at FILE:LINE:COLUMN. No service is needed for
any of them: a worker refuses a bad policy file before it connects."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

from plangate.activities.catalogue import catalogue
from plangate.records.signing import SigningKey
from plangate.world.policies import load_bundle
from plangate.world.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "policy.md").read_text()
BASE = '@id("base")\npermit(principal, action, resource);\n'
THRESHOLD = ('@id("person-over-100") @approvers("1")\n'
             'permit(principal, action == Plangate::Action::"money", resource)\n'
             "when { context.amount_cents > 10000 };\n")
BAD = '// limits\n@id("cap")\nforbid(principal, action, resource) when {\n' \
      "  context.amount > 100000\n};\n"


def fresh_env(**more: str) -> dict[str, str]:
    """A fresh shell's environment (none of this session's plangate or Temporal variables)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PLANGATE_", "TEMPORAL_", "AWS_"))}
    env["TEMPORAL_CONFIG_FILE"] = os.devnull
    env.update(more)
    return env


def plangate(*argv: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "plangate", *argv], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def directory(where: Path, **files: str) -> Path:
    where.mkdir()
    for name, text in files.items():
        (where / name).write_text(text)
    return where


def test_check_prints_the_bundle_and_every_policy_with_its_place(tmp_path):
    good = directory(tmp_path / "good", **{"base.cedar": BASE, "people.cedar": THRESHOLD})
    env = fresh_env()
    done = plangate("policy", "check", str(good), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    s = Settings.from_env({**env, "PLANGATE_POLICIES": str(good)}, connects=False)
    bundle = load_bundle(s.policy, s.world.scope, catalogue(s.catalogue)).bundle
    lines = done.stdout.splitlines()
    assert lines[0] == f"plangate: policies in {good} are valid: bundle {bundle} (enforce)"
    assert [line.split() for line in lines[1:]] == [
        ["plangate:approve-effects", "built-in"], ["plangate:approval-asked", "built-in"],
        ["plangate:protected-schemas", "built-in"], ["base", f"{good}/base.cedar:1:1"],
        ["person-over-100", f"{good}/people.cedar:1:1"],
    ]
    assert done.stderr == ""


def test_check_names_each_problem_at_file_line_column_and_exits_2(tmp_path):
    bad = directory(tmp_path / "bad", **{
        "base.cedar": BASE, "limits.cedar": BAD,
        "syntax.cedar": "permit(principal, action, resource) when { 1 + };\n",
        "twice.cedar": '\n\n@id("base")\nforbid(principal, action, resource);\n',
    })
    done = plangate("policy", "check", str(bad), env=fresh_env(), cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr.splitlines() == [
        f"{bad}/limits.cedar:4:11: attribute `amount` in context not found",
        f"{bad}/syntax.cedar:1:48: unexpected token `}}`",
        f"{bad}/twice.cedar:3:1: @id 'base' is taken by base.cedar:1:1",
    ]
    # the example of docs/policy.md is this very file and output
    assert BAD in PAGE
    assert "policies/limits.cedar:4:11: attribute `amount` in context not found" in PAGE
    missing = plangate("policy", "check", str(tmp_path / "nowhere"), env=fresh_env(),
                       cwd=tmp_path)
    assert (missing.returncode, missing.stderr) == (
        2, f"PLANGATE_POLICIES: {tmp_path / 'nowhere'} is not a directory\n")


def test_explain_decides_each_step_as_written(tmp_path):
    policies = directory(tmp_path / "p", **{"base.cedar": BASE, "people.cedar": THRESHOLD})
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"goal": "close out acct_7a01c", "on_behalf_of": "dana", "steps": [
        {"n": 1, "tool": "billing.list_invoices", "effect": "read",
         "args": {"account_id": "acct_7a01c"}, "binds": {"amount": "$.amount_eur"}},
        {"n": 2, "tool": "billing.issue_credit", "effect": "money", "depends_on": [1],
         "args": {"account_id": "acct_7a01c", "amount_eur": 500}},
        {"n": 3, "tool": "billing.issue_credit", "effect": "money", "depends_on": [1],
         "args": {"account_id": "acct_7a01c", "amount_eur": "${amount}"}},
    ]}))
    env = fresh_env(PLANGATE_DEMO_SYSTEMS="1", PLANGATE_APPROVE_EFFECTS="none")
    done = plangate("policy", "explain", str(plan), "--policies", str(policies), env=env,
                    cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    head, *steps = done.stdout.splitlines()
    assert head.startswith("plangate: bundle cedar:") and f"({policies}; enforce)" in head
    assert steps == [
        "step 1 billing.list_invoices (read): permit: permitted by base",
        '  args: {"account_id": "acct_7a01c"}',
        "step 2 billing.issue_credit (money): permit_with_people: 1 distinct approver "
        "(base, person-over-100)",
        '  args: {"account_id": "acct_7a01c", "amount_eur": 500}',
        "step 3 billing.issue_credit (money): permit: permitted by base",
        '  args: {"account_id": "acct_7a01c", "amount_eur": "${amount}"}',
        "  not bound until the run, so not seen by the policies here: amount_eur",
    ]
    # without --policies: the deployment's (unset: the built-ins, as before policies)
    done = plangate("policy", "explain", str(plan), env={**env, "PLANGATE_APPROVE_EFFECTS": ""},
                    cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[3] == (
        "step 2 billing.issue_credit (money): permit_with_people: 1 distinct approver "
        "(plangate:approve-effects, plangate:permit-all)")


def test_explain_explains_a_step_the_deployment_forbids(tmp_path):
    """With the deployment's policies in PLANGATE_POLICIES (which make plangate check refuse
    the plan), explain still says why, step by step: that is what it is for."""
    cap = ('@id("cap")\nforbid(principal, action == Plangate::Action::"money", resource)\n'
           "when { context.amount_cents > 100000 };\n")
    policies = directory(tmp_path / "p", **{"base.cedar": BASE, "cap.cedar": cap})
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"goal": "credit", "steps": [
        {"n": 1, "tool": "billing.issue_credit", "effect": "money",
         "args": {"account_id": "acct_7a01c", "amount_eur": 1500}}]}))
    env = fresh_env(PLANGATE_DEMO_SYSTEMS="1", PLANGATE_APPROVE_EFFECTS="none",
                    PLANGATE_POLICIES=str(policies))
    checked = plangate("check", str(plan), env=env, cwd=tmp_path)
    assert checked.returncode == 2
    assert "step 1: policy_denied (403): billing.issue_credit is forbidden by the " \
        "deployment's policy (cap, bundle cedar:" in checked.stderr
    done = plangate("policy", "explain", str(plan), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1] == \
        "step 1 billing.issue_credit (money): forbid: forbidden by cap"


def test_a_worker_refuses_a_bad_policy_directory_naming_the_file_and_line(tmp_path):
    bad = directory(tmp_path / "bad", **{"base.cedar": BASE, "limits.cedar": BAD})
    # no Temporal, Postgres or S3 here: the policies are refused before any is reached
    env = fresh_env(PLANGATE_POLICIES=str(bad), TEMPORAL_ADDRESS="127.0.0.1:1",
                    PLANGATE_DATABASE_URL="postgresql://nobody@127.0.0.1:1/none")
    for argv in (("worker", "--check"), ("worker",)):
        done = plangate(*argv, env=env, cwd=tmp_path)
        assert (done.returncode, done.stdout) == (2, ""), (argv, done.stderr)
        assert done.stderr == (
            f"plangate: {bad}/limits.cedar:4:11: attribute `amount` in context not found\n")


def test_key_new_makes_the_folder_it_is_written_in(tmp_path):
    """``plangate key new NAME -o ~/.plangate/NAME.key`` in a fresh home: the folder is made
    (its owner's alone), the key written there (0600), its public line printed; a second time,
    refused, the key kept."""
    home = tmp_path / "home"
    home.mkdir()
    env = fresh_env(HOME=str(home))
    done = plangate("key", "new", "alice", "-o", "~/.plangate/alice.key", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    key = home / ".plangate" / "alice.key"
    assert key.stat().st_mode & 0o777 == 0o600
    assert (home / ".plangate").stat().st_mode & 0o777 == 0o700
    written = SigningKey.parse(key.read_text())
    assert written.name == "alice"
    assert f"public: alice:{base64.b64encode(written.public).decode()}" in done.stdout
    kept = key.read_text()
    again = plangate("key", "new", "alice", "-o", "~/.plangate/alice.key", env=env, cwd=tmp_path)
    assert again.returncode != 0 and "exists" in again.stderr
    assert key.read_text() == kept
