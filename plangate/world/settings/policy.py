"""What the deployment decides centrally and the worker enforces (``PolicySettings``): which
steps wait for a person and for how long, the policy bundle in force, who may answer cards and
who may submit runs. For the worker's guards (``activities.guarding``), its tools' checks at
the call (``activities.guarded_call``), the review of a re-plan, and a client that refuses
early what the worker would refuse."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import get_args

from plangate.errors import ConfigurationError
from plangate.plans.limits import MAX_WAIT_TIMEOUT_S
from plangate.plans.model import Effect
from plangate.records.policy import PolicyMode
from plangate.records.proofs import Submitter
from plangate.records.signing import NAME, SigningKey, public_entries
from plangate.world.settings.keys import RECEIPT_KEY_VAR, one_key
from plangate.world.settings.parse import duration, entries, stripped

APPROVE_EFFECTS_VAR = "PLANGATE_APPROVE_EFFECTS"
APPROVAL_TTL_VAR = "PLANGATE_APPROVAL_TTL"
POLICY_BUNDLE_VAR = "PLANGATE_POLICY_BUNDLE"
APPROVERS_VAR = "PLANGATE_APPROVERS"
SUBMITTERS_VAR = "PLANGATE_SUBMITTERS"
POLICIES_VAR = "PLANGATE_POLICIES"
POLICY_MODE_VAR = "PLANGATE_POLICY_MODE"
# an effect that leaves the organisation or moves money, and cannot be made tolerant of a world
# that moved, holds for a person unless the deployment says otherwise (``none``)
DEFAULT_APPROVE_EFFECTS = (Effect.MONEY, Effect.EXTERNAL)
APPROVE_NONE = "none"


@dataclass(frozen=True)
class PolicySettings:
    # steps of these effects wait for a person's approval of their card (besides those whose
    # plan says ``approval: required``), and how long a card stays valid
    approve_effects: tuple[Effect, ...] = DEFAULT_APPROVE_EFFECTS
    approval_ttl_s: float = 24 * 3600.0
    # the policy bundle the deployment enforces now: a run decided under another one is refused
    # by every tool before it acts (``policy_superseded``, 412); None: not checked
    policy_bundle: str | None = None
    # who may answer approval cards (name, Ed25519 public key): an answer counts only with a
    # proof signed by one of them (records.proofs)
    approvers: tuple[tuple[str, bytes], ...] = ()
    # who may submit runs and as which principals; (): anyone who reaches Temporal may
    submitters: tuple[Submitter, ...] = ()
    # a directory of Cedar policies (``*.cedar``) that decide each call (plangate.world.policies,
    # docs/policy.md); None: the built-in policies alone (these settings), as before
    policies: Path | None = None
    # shadow: every decision made and recorded, nothing refused for it
    policy_mode: PolicyMode = "enforce"
    # the worker's key for the receipt of each ledgered effect (``records.receipts``); None:
    # no receipts are made
    receipt_key: SigningKey | None = field(default=None, repr=False)

    @property
    def approver_map(self) -> dict[str, bytes]:
        return dict(self.approvers)

    @property
    def submitter_map(self) -> dict[str, Submitter]:
        return {s.name: s for s in self.submitters}

    def approval_rule(self) -> str:
        """The rule in force, as a worker says it at its start."""
        if not self.approve_effects:
            return (f"approval by effect off ({APPROVE_EFFECTS_VAR}={APPROVE_NONE}): a step "
                    "waits for a person only when its plan or its tool asks")
        names = [e.value for e in self.approve_effects]
        said = " and ".join(names) if len(names) <= 2 else ", ".join(names)
        how = ("the default" if self.approve_effects == DEFAULT_APPROVE_EFFECTS
               else f"{APPROVE_EFFECTS_VAR}={','.join(names)}")
        return (f"{said} steps wait for a person ({how}; {APPROVE_EFFECTS_VAR}={APPROVE_NONE} "
                "turns it off)")

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> PolicySettings:
        return cls(
            approve_effects=_effects(env.get(APPROVE_EFFECTS_VAR) or ""),
            approval_ttl_s=_ttl(duration(env, APPROVAL_TTL_VAR, "24h")),
            policy_bundle=stripped(env, POLICY_BUNDLE_VAR),
            approvers=public_entries(env.get(APPROVERS_VAR) or "", APPROVERS_VAR),
            submitters=parse_submitters(env.get(SUBMITTERS_VAR) or ""),
            policies=_directory(stripped(env, POLICIES_VAR)),
            policy_mode=_mode(stripped(env, POLICY_MODE_VAR)),
            receipt_key=one_key(env, RECEIPT_KEY_VAR),
        )


def _directory(raw: str | None) -> Path | None:
    """``PLANGATE_POLICIES``: the directory's path (read and validated when a worker or
    ``plangate policy`` loads it, not here)."""
    return Path(raw).expanduser() if raw else None


def _mode(raw: str | None) -> PolicyMode:
    modes: tuple[PolicyMode, ...] = get_args(PolicyMode)
    value = (raw or "enforce").lower()
    for mode in modes:
        if mode == value:
            return mode
    raise ConfigurationError(
        f"{POLICY_MODE_VAR} must be {' or '.join(modes)}, not {raw!r}"
    )


def _ttl(seconds: float) -> float:
    """A card lives at most as long as the plan language lets anything wait (7 days)."""
    if seconds > MAX_WAIT_TIMEOUT_S:
        raise ConfigurationError(f"{APPROVAL_TTL_VAR} must be at most 7d, not {seconds:,.0f}")
    return seconds


def _effects(raw: str) -> tuple[Effect, ...]:
    """``PLANGATE_APPROVE_EFFECTS``: effects, separated by commas (``money,external``); unset
    or empty: money and external; ``none``: no step waits for its effect alone."""
    names = [n.strip().lower() for n in raw.split(",") if n.strip()]
    if not names:
        return DEFAULT_APPROVE_EFFECTS
    if APPROVE_NONE in names:
        if len(names) > 1:
            raise ConfigurationError(
                f"{APPROVE_EFFECTS_VAR}: {APPROVE_NONE!r} turns approval by effect off and "
                f"cannot be listed with effects ({raw.strip()!r})"
            )
        return ()
    bad = [n for n in names if n not in {e.value for e in Effect}]
    if bad:
        known = ", ".join([*(e.value for e in Effect), APPROVE_NONE])
        raise ConfigurationError(
            f"{APPROVE_EFFECTS_VAR}: unknown effect {bad[0]!r} (known: {known})"
        )
    return tuple(Effect(n) for n in names)


def parse_submitters(raw: str) -> tuple[Submitter, ...]:
    """``PLANGATE_SUBMITTERS``: ``NAME:BASE64PUBLICKEY:PRINCIPAL|PRINCIPAL`` entries separated
    by commas: who may submit runs, and the principals (``on_behalf_of``) each may act as."""
    var = SUBMITTERS_VAR
    out: list[Submitter] = []
    for i, entry in entries(raw):
        head, colon, principals = entry.rpartition(":")
        names = tuple(p.strip() for p in principals.split("|") if p.strip())
        if not colon or head.count(":") != 1 or not names:
            raise ConfigurationError(
                f"{var}: entry {i} is not NAME:BASE64PUBLICKEY:PRINCIPAL[|PRINCIPAL...]"
            )
        bad = [p for p in names if not NAME.match(p)]
        if bad:
            raise ConfigurationError(f"{var}: entry {i}: {bad[0]!r} is not a principal name")
        ((name, public),) = public_entries(head, f"{var} entry {i}")
        if any(s.name == name for s in out):
            raise ConfigurationError(f"{var}: {name} is listed twice")
        out.append(Submitter(name, public, names))
    return tuple(out)
