"""The settings that decided before Cedar, as Cedar policies of every bundle, so that there is one
decision path: ``PLANGATE_APPROVE_EFFECTS`` (a step of those effects waits for one approver),
what a plan or a tool asks (the same), the allowed buckets and schemas and plangate's own
(a call outside is forbidden, as ``plans.scope`` refuses it). Without ``PLANGATE_POLICIES``
one more permits every call, which is plangate before policies; with it, the deployment's
files must permit (default deny).

Approval policies are permits marked ``@approval_only``: they add people to a call another
policy permits and never permit one by themselves.
"""

from __future__ import annotations

from plangate.plans.scope import PROTECTED_SCHEMAS, Scope
from plangate.world.settings.policy import PolicySettings

PERMIT_ALL = "plangate:permit-all"
APPROVE_EFFECTS = "plangate:approve-effects"
APPROVAL_ASKED = "plangate:approval-asked"
PROTECTED = "plangate:protected-schemas"
ARTIFACTS = "plangate:artifacts-bucket"
ALLOWED_BUCKETS = "plangate:allowed-buckets"
ALLOWED_SCHEMAS = "plangate:allowed-schemas"


def cedar_string(s: str) -> str:
    """``s`` as a Cedar string literal."""
    out = []
    for c in s:
        if c in '"\\':
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\t":
            out.append("\\t")
        elif ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0:
            out.append(f"\\u{{{ord(c):x}}}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def _set(items: tuple[str, ...]) -> str:
    return "[" + ", ".join(cedar_string(i) for i in items) + "]"


def _action(effect: str) -> str:
    return f'Plangate::Action::"{effect}"'


def builtin_policies(policy: PolicySettings, scope: Scope) -> str:
    """The built-in policies for these settings, as Cedar text."""
    out = []
    if policy.policies is None:
        out.append(f'@id("{PERMIT_ALL}")\npermit(principal, action, resource);')
    if policy.approve_effects:
        actions = ", ".join(_action(e.value) for e in policy.approve_effects)
        out.append(f'@id("{APPROVE_EFFECTS}") @approvers("1") @approval_only\n'
                   f"permit(principal, action in [{actions}], resource);")
    out.append(f'@id("{APPROVAL_ASKED}") @approvers("1") @approval_only\n'
               "permit(principal, action, resource) when { context.approval_asked };")
    out.append(
        f'@id("{PROTECTED}")\nforbid(principal, action, resource) when {{\n'
        f'  resource.kind == "table" && ({_set(PROTECTED_SCHEMAS)}.contains('
        'resource.schema_lower) || resource.schema_lower like "pg_*")\n};'
    )
    if scope.protected_buckets:
        out.append(f'@id("{ARTIFACTS}")\nforbid(principal, action, resource) when {{\n'
                   f'  resource.kind == "bucket" && {_set(scope.protected_buckets)}.contains('
                   "resource.name)\n};")
    if scope.buckets is not None:
        out.append(f'@id("{ALLOWED_BUCKETS}")\nforbid(principal, action, resource) when {{\n'
                   f'  resource.kind == "bucket" && !{_set(scope.buckets)}.contains('
                   "resource.name)\n};")
    if scope.tables is not None:
        allowed = _set(scope.tables)
        out.append(f'@id("{ALLOWED_SCHEMAS}")\nforbid(principal, action, resource) when {{\n'
                   f'  resource.kind == "table" && !{allowed}.contains(resource.schema) && '
                   f"!{allowed}.contains(resource.name)\n}};")
    return "\n\n".join(out) + "\n"
