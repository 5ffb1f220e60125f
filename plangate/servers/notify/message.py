"""A card in words, for an e-mail and for a chat (a Slack-compatible message: ``text`` and
``blocks``). Everything a card holds comes from plans and models: each value is shown through
``visible`` (invisible and control characters as ``\\uXXXX``), and in the chat's markup ``&``,
``<`` and ``>`` are escaped, so a value cannot become a link, a mention or a line of its own."""

from __future__ import annotations

import json
from email.message import EmailMessage
from typing import Any
from urllib.parse import urlencode

from plangate.client.pending import PendingCard
from plangate.plans.model import Effect
from plangate.plans.visible import visible
from plangate.servers.notify.settings import Email
from plangate.servers.page.target import target

APPROVE, REJECT = "plangate_approve", "plangate_reject"  # the buttons' action ids
_IRREVERSIBLE = (Effect.MONEY, Effect.EXTERNAL)
_FIELD_MAX = 2900  # a Slack section's text is at most 3000 characters


def card_link(ui_url: str, p: PendingCard) -> str:
    """The card on the approval page (``/card``: shown to a logged-in approver)."""
    return ui_url + "card?" + urlencode({"run": p.run_id, "step": p.record.step,
                                          "digest": p.record.digest})


def button_value(p: PendingCard) -> str:
    """What a button carries back on a click: the run, the step and the card's digest."""
    return json.dumps({"run": p.run_id, "step": p.record.step, "digest": p.record.digest},
                      separators=(",", ":"))


def _stamp(p: PendingCard) -> str:
    return p.record.expires_at.strftime("%Y-%m-%d %H:%M:%S UTC")


def _values(values: dict[str, Any]) -> list[str]:
    return [f"{visible(k)} = {visible(json.dumps(v, ensure_ascii=False, sort_keys=True))}"
            for k, v in values.items()]


def words(p: PendingCard) -> list[tuple[str, list[str]]]:
    """The card in words: the call (tool, what it acts on, effect), the bound arguments, what
    the probes observed, who the run acts for, until when."""
    c, r = p.record.card, p.record
    where = target(c.args)
    effect = c.effect.value + (" (irreversible)" if c.effect in _IRREVERSIBLE else "")
    call = (f"Step {r.step} of run {visible(p.run_id)} will call {visible(c.tool)}"
            + (f" on {visible(where)}" if where is not None else "") + f"; effect {effect}")
    return [
        ("The call", [call, f"goal: {visible(p.goal)}"]),
        ("With these arguments (fully bound)", _values(c.args) or ["(none)"]),
        ("What its probes observed", _values(c.observed) or ["no pre condition: nothing was "
                                                             "observed"]),
        ("On behalf of", [visible(c.on_behalf_of or "-")
                          + f" (policy bundle {visible(c.policy_bundle or '-')})"]),
        ("Expires", [f"{_stamp(p)}; card digest {r.digest}"]),
    ]


def subject(p: PendingCard) -> str:
    c = p.record.card
    return visible(f"plangate: approve {c.tool} (step {p.record.step} of run {p.run_id})?")[:300]


def email(p: PendingCard, link: str, e: Email) -> EmailMessage:
    msg = EmailMessage()
    msg["Subject"] = subject(p)
    msg["From"] = e.sender
    msg["To"] = ", ".join(e.to)
    body = [f"A card waits for an approver.\n\nAnswer it on the approval page:\n{link}\n"]
    for title, lines in words(p):
        body.append(title + ":\n" + "\n".join("  " + line for line in lines) + "\n")
    body.append("Approving runs the step after it reads the world again; if what its probes "
                "observe has changed by then, a new card waits instead.\n")
    msg.set_content("\n".join(body))
    return msg


def _md(text: str) -> str:
    """Untrusted text inside a code span of the chat's markup: nothing in it links, mentions,
    formats or ends the span (a backtick is shown as ``\\u0060``)."""
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("`", "\\u0060"))


def _section(title: str, lines: list[str]) -> dict[str, Any]:
    text = f"*{title}*\n" + "\n".join(f"`{_md(line)}`" for line in lines)
    if len(text) > _FIELD_MAX:
        text = text[:_FIELD_MAX] + "... (the rest on the page)"
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def chat(p: PendingCard, link: str) -> dict[str, Any]:
    """A Slack-compatible message: the card in words, its link, Approve and Reject buttons
    whose value names the run, the step and the digest (a click comes back signed to the
    page's ``/chat/actions``)."""
    value = button_value(p)
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": subject(p)[:150]}},
        *(_section(title, lines) for title, lines in words(p)),
        {"type": "section", "text": {"type": "mrkdwn",
                                     "text": f"<{_md(link)}|Open the card on the approval page>"}},
        {"type": "actions", "elements": [
            {"type": "button", "action_id": APPROVE, "style": "primary", "value": value,
             "text": {"type": "plain_text", "text": "Approve"}},
            {"type": "button", "action_id": REJECT, "style": "danger", "value": value,
             "text": {"type": "plain_text", "text": "Reject"}},
        ]},
    ]
    return {"text": f"{subject(p)} {link}", "blocks": blocks}
