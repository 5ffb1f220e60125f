"""``plangate ui``: a small web page of the approval cards waiting across runs (issue 14).

The page lists every pending card of the open runs on this deployment's task queue (through
``Plangate.pending_approvals``: Temporal visibility, then each run's report), each showing what
will happen to what (the tool, its fully bound arguments, the effect), the versions its probes
observed, who the run acts for, the digest and the time left. Its approve and reject buttons
post the card's digest, and the server answers through the same Temporal Updates as
``plangate approve`` / ``reject`` (``Plangate.approve`` / ``reject``): a card that changed,
expired or was already answered is refused by the workflow, and the page shows why (409).

The server is the standard library's ``ThreadingHTTPServer`` in a thread of its own; each
request hands its Temporal calls to the command's event loop and waits for them.

Access: the page serves the approvers whose keys it holds (``PLANGATE_APPROVER_KEY``, one or
more). Each person gives their own login token (``plangate key show``: 256 bits derived from
their key) once (the login form, or ``/?token=...``, which redirects at once); it is exchanged
for a session cookie (HttpOnly, SameSite=Strict) naming them, signed with a secret of this
process, so restarting the page logs everyone out. Every request checks the cookie (or the
token) with ``hmac.compare_digest`` (``Gate``). An answer is signed with the key of the person
the session names, and recorded under that name: whatever a form says, nobody answers as
anyone else. Wrong tokens are throttled per
client address (``Throttle``, outside the gate): after a few, every try is refused with 429 for
a delay that doubles with each further failure. A POST must also carry the CSRF token of its
form, equal to a second cookie (double submit), and must not come from another origin
(``Origin``, ``Sec-Fetch-Site``). Everything a card holds comes from plans and models, so it is
untrusted: every value is HTML-escaped, and invisible and direction-changing characters are
shown as ``\\uXXXX``. The page sends a strict Content Security Policy (scripts and styles only
with this response's nonce), no caching, no framing and no referrer.

The log never holds a token: it shows a request by its method and the page's route only; a
query string (``?token=``, ``?%74oken=``, ``?TOKEN=``, a bare value) and any other path are
written as placeholders, never as text a client sent, in whatever encoding.

An answer is taken only for a run of the page's own task queue (described first; any other is
refused as unknown, nothing applied), and an answer the workflow recorded is shown as recorded
even where its receipt does not read (``Plangate.approve``).

For a reader without help (issue 22): each card links its run's report, readable (``/run``) or
as JSON (``/run.json``), both for the page's own queue only and behind the session, and the
run's page in the Temporal Web UI (``--temporal-ui``, ``PLANGATE_TEMPORAL_UI``). Times are
served in UTC to the second and shown in the reader's time zone by the page's script, the ISO
value in their title. The script fetches the cards again every ``REFRESH_S`` (and on Refresh)
and swaps them in place, keeping a card whose reason is being typed (``connect-src 'self'``).
After an answer the page says what became of it (the step's state, or the run's), waiting a
moment for it to settle, and the cards page lists the answers given here with their outcome.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import html
import json
import re
import secrets
import socket
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.cookies import CookieError, SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar, cast
from urllib.parse import parse_qs, quote, urlsplit

from temporalio.service import RPCError

from plangate.client.api import (
    AnswerRefused,
    PendingApprovals,
    PendingCard,
    Plangate,
    RunEnded,
    UnknownRun,
)
from plangate.plans.model import Effect
from plangate.plans.visible import visible, visible_json
from plangate.records.approvals import ApprovalReceipt, Decision
from plangate.records.report import RunReport, StepReport
from plangate.records.signing import SigningKey
from plangate.world.settings import APPROVER_KEY_VAR, Identity

DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8765
SESSION_COOKIE, CSRF_COOKIE = "plangate_ui", "plangate_csrf"
MAX_BODY_BYTES = 32 * 1024  # a form: ids, a digest, a name, a reason of 2,000 characters
CALL_TIMEOUT_S = 60.0  # one page's Temporal calls
DEFAULT_TEMPORAL_UI = "http://localhost:8233"  # the dev server's Web UI
TEMPORAL_UI_VAR = "PLANGATE_TEMPORAL_UI"
REFRESH_S = 20  # the cards are fetched again this often (a half-typed reason is kept)
NEXT_WAIT_S = 5.0  # how long an answer's page waits to say what the step did next
RECENT_MAX = 10  # answers given here, listed with what became of them
_DIGEST = re.compile(r"^[0-9a-f]{64}$")
ROUTES = ("/", "/login", "/answer", "/run", "/run.json")
_METHODS = ("GET", "POST", "HEAD", "PUT", "DELETE", "OPTIONS", "PATCH")
_VERSION = re.compile(r"^HTTP/\d(\.\d)?$")

T = TypeVar("T")


def ui_keys(identity: Identity) -> tuple[SigningKey, ...]:
    """The keys of the people the page lets in (``PLANGATE_APPROVER_KEY``); a clear error when
    there are none."""
    if not identity.approver_keys:
        raise ValueError(
            f"plangate ui needs {APPROVER_KEY_VAR}: the key files of the people who answer "
            "cards here, separated by commas (`plangate key new NAME` makes one; each person "
            "logs in with the login token `plangate key show FILE` prints)"
        )
    return identity.approver_keys


class Gate:
    """Who may use the page: the people whose keys it holds, each by their login token once,
    then by a session cookie that names them, signed with a secret of this process; every
    comparison in constant time."""

    def __init__(self, keys: Sequence[SigningKey]) -> None:
        self._tokens = [(k.name, k.login_token().encode()) for k in keys]
        self._secret = secrets.token_bytes(32)

    def who(self, given: str) -> str | None:
        """The person whose login token this is, or None (every token compared)."""
        found = None
        for name, token in self._tokens:
            if hmac.compare_digest(given.encode(), token):
                found = name
        return found

    def session(self, name: str) -> str:
        tag = base64.urlsafe_b64encode(name.encode()).decode().rstrip("=")
        mac = hmac.new(self._secret, b"plangate ui session " + name.encode(), hashlib.sha256)
        return f"{tag}.{mac.hexdigest()}"

    def session_of(self, cookie: str | None) -> str | None:
        """The person a session cookie names, when this process signed it."""
        if not cookie or "." not in cookie:
            return None
        tag = cookie.split(".", 1)[0]
        try:
            name = base64.urlsafe_b64decode(tag + "=" * (-len(tag) % 4)).decode()
        except (ValueError, UnicodeDecodeError):
            return None
        if not hmac.compare_digest(cookie.encode(), self.session(name).encode()):
            return None
        return name if any(n == name for n, _ in self._tokens) else None


@dataclass
class Throttle:
    """Wrong tokens, counted per client address. The first ``free`` cost nothing; from then on
    each try waits ``first_s`` after the latest failure, doubled with every further failure (at
    most ``max_s``), and a try within the wait is refused unheard (429), the right token
    included, so a locked-out guesser learns nothing. A right token heard clears the count.
    Addresses behind one proxy share a count."""

    free: int = 5
    first_s: float = 1.0
    max_s: float = 600.0
    clock: Callable[[], float] = time.monotonic
    most_addresses: int = 10_000  # a flood of addresses forgets the oldest, never grows memory
    _failures: dict[str, tuple[int, float]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def wait_s(self, who: str) -> float:
        """How long ``who`` must wait before a token is heard again (0: now)."""
        with self._lock:
            count, last = self._failures.get(who, (0, 0.0))
            if count < self.free:
                return 0.0
            delay = min(self.max_s, self.first_s * 2.0 ** min(count - self.free, 40))
            return max(0.0, last + delay - self.clock())

    def failed(self, who: str) -> None:
        with self._lock:
            count, _ = self._failures.pop(who, (0, 0.0))
            self._failures[who] = (count + 1, self.clock())  # re-inserted: newest last
            while len(self._failures) > self.most_addresses:
                del self._failures[next(iter(self._failures))]

    def passed(self, who: str) -> None:
        with self._lock:
            self._failures.pop(who, None)


# -- rendering: every value from a card is untrusted ------------------------------------------
def _text(value: object) -> str:
    # invisible, control and direction-changing characters escaped (plans.visible): a reader
    # sees every character the tool will be given
    return html.escape(visible(value), quote=True)


def _json(value: object) -> str:
    return _text(json.dumps(value, ensure_ascii=False, sort_keys=True))


def span(seconds: float) -> str:
    """Time left, in its two largest units: ``4m 10s``, ``2h 05m``; ``expired`` at 0."""
    s = int(seconds)
    if s <= 0:
        return "expired"
    d, rest = divmod(s, 86400)
    h, rest = divmod(rest, 3600)
    m, sec = divmod(rest, 60)
    if d:
        return f"{d}d {h:02d}h"
    if h:
        return f"{h}h {m:02d}m"
    if m:
        return f"{m}m {sec:02d}s"
    return f"{sec}s"


_STYLE = """
body{font:15px/1.4 system-ui,sans-serif;margin:2em auto;max-width:60em;padding:0 1em;color:#222}
h1{font-size:1.4em}.card{border:1px solid #bbb;border-radius:6px;padding:1em;margin:1em 0}
.card.irreversible{border:2px solid #b00}.effect{font-weight:bold}.irreversible .effect{color:#b00}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;vertical-align:top;padding:.2em .5em;border-bottom:1px solid #eee}
th{width:12em;font-weight:600}table.list th{width:auto;background:#f3f3f3}
table.list code{white-space:nowrap;word-break:normal}table.list time{white-space:normal}
.wide{overflow-x:auto}
code,pre{font-family:ui-monospace,monospace;white-space:pre-wrap;word-break:break-all}
.cell{max-height:12em;overflow:auto;display:block}.digest{font-size:.9em}
.left{font-weight:bold}.note{color:#555}form.answer{margin-top:.8em;display:flex;gap:.5em;
flex-wrap:wrap;align-items:end}label{display:flex;flex-direction:column;font-size:.9em}
button{padding:.4em 1.2em;font-size:1em}.approve{background:#1a7f37;color:#fff}
.reject{background:#fff;color:#b00;border:1px solid #b00}
.outcome{font-size:1.1em;padding:1em;border-radius:6px}.refused{background:#fdecea}
.accepted{background:#e6f4ea}.links a{margin-right:1em}.bar{display:flex;gap:1em;
align-items:center}.bar form{margin:0}.card.gone{opacity:.7;border-style:dashed}
#answered li{margin:.3em 0}.next{font-weight:600}time{white-space:nowrap}
"""

# the time left of each card, once a second; every <time> in the reader's own time zone; the
# cards fetched again every REFRESH_S (and by the Refresh button) without reloading the page,
# keeping any card whose reason is being typed
_SCRIPT = """
const p=n=>String(n).padStart(2,"0");
function span(s){if(s<=0)return"expired";const d=Math.floor(s/86400),h=Math.floor(s%86400/3600),
m=Math.floor(s%3600/60),x=s%60;
return d?d+"d "+p(h)+"h":h?h+"h "+p(m)+"m":m?m+"m "+p(x)+"s":x+"s"}
function tick(){for(const el of document.querySelectorAll("[data-expires]")){
el.textContent=span(Math.floor((Date.parse(el.dataset.expires)-Date.now())/1000))}}
function local(){for(const el of document.querySelectorAll("time[datetime]")){
const d=new Date(el.getAttribute("datetime"));if(isNaN(d))continue;
const z=new Intl.DateTimeFormat(undefined,{timeZoneName:"short"}).formatToParts(d)
.find(x=>x.type==="timeZoneName");
el.textContent=d.getFullYear()+"-"+p(d.getMonth()+1)+"-"+p(d.getDate())+" "+p(d.getHours())+":"
+p(d.getMinutes())+":"+p(d.getSeconds())+(z?" "+z.value:"")}}
function typed(c){const r=c.querySelector("input[name=reason]");return !!(r&&r.value)}
async function refresh(){
const cards=document.getElementById("cards"),said=document.getElementById("refresh-problem");
if(!cards)return;let r;
try{r=await fetch("/",{credentials:"same-origin",cache:"no-store"})}
catch(e){said.textContent="refresh failed: "+e.message;return}
if(r.status!==200){said.textContent="refresh failed (HTTP "+r.status+"): reload the page";return}
said.textContent="";const doc=new DOMParser().parseFromString(await r.text(),"text/html");
for(const id of["summary","notes","answered"]){const a=document.getElementById(id),
b=doc.getElementById(id);if(a&&b)a.replaceWith(document.importNode(b,true))}
const kept=new Map();for(const c of cards.querySelectorAll("section.card"))
if(typed(c))kept.set(c.dataset.digest,c);
const items=[];for(const c of doc.querySelectorAll("#cards > *")){
const k=c.dataset?kept.get(c.dataset.digest):undefined;
if(k){kept.delete(c.dataset.digest);items.push(k)}else items.push(document.importNode(c,true))}
for(const k of kept.values()){if(!k.classList.contains("gone")){k.classList.add("gone");
const n=document.createElement("p");n.className="note";n.textContent="No longer listed "+
"(answered, expired or changed): an answer will say which.";k.prepend(n)}items.push(k)}
cards.replaceChildren(...items);local();tick()}
const form=document.getElementById("refresh-form");
if(form)form.addEventListener("submit",e=>{e.preventDefault();refresh()});
const every=Number(document.body.dataset.refresh||0);
if(every>0)setInterval(()=>{const a=document.activeElement;
if(!(a&&a.name==="reason"))refresh()},every*1000);
local();setInterval(tick,1000);
"""


def _document(title: str, body: str, nonce: str, script: bool = False,
              refresh_s: int = 0) -> str:
    js = f'<script nonce="{nonce}">{_SCRIPT}</script>' if script else ""
    every = f' data-refresh="{refresh_s}"' if refresh_s else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{_text(title)}</title><style nonce=\"{nonce}\">{_STYLE}</style></head>"
        f"<body{every}>{body}{js}</body></html>"
    )


def when(at: datetime) -> str:
    """A time to the second: UTC as served, the reader's own time zone once the page's script
    runs, the ISO value in its title."""
    utc = at.astimezone(UTC)
    iso = utc.isoformat(timespec="seconds")
    return (f'<time datetime="{iso}" title="{iso}">'
            f'{utc.strftime("%Y-%m-%d %H:%M:%S")} UTC</time>')


@dataclass(frozen=True)
class Links:
    """Where a run can be read: its report on this page, and the Temporal Web UI."""

    temporal_ui: str = DEFAULT_TEMPORAL_UI
    namespace: str = "default"

    def report(self, run_id: str) -> str:
        return "/run?id=" + quote(run_id, safe="")

    def json(self, run_id: str) -> str:
        return "/run.json?id=" + quote(run_id, safe="")

    def temporal(self, run_id: str) -> str:
        return (f"{self.temporal_ui.rstrip('/')}/namespaces/{quote(self.namespace, safe='')}"
                f"/workflows/{quote(run_id, safe='')}")

    def html(self, run_id: str, report: bool = True) -> str:
        # the Web UI in a tab of its own; same-origin referrer policy: it learns nothing
        return (
            '<p class="links">'
            + (f'<a class="run" href="{_text(self.report(run_id))}">the run&rsquo;s report</a>'
               if report else "")
            + f'<a class="json" href="{_text(self.json(run_id))}">report as JSON</a>'
            f'<a class="temporal" href="{_text(self.temporal(run_id))}" target="_blank" '
            'rel="noopener noreferrer">in the Temporal Web UI</a></p>'
        )


def temporal_ui_arg(raw: str) -> str:
    """The Temporal Web UI's address, checked: an http(s) URL (``ValueError`` otherwise)."""
    u = urlsplit(raw.strip())
    if u.scheme not in ("http", "https") or not u.netloc or u.query or u.fragment:
        raise ValueError(f"the Temporal Web UI's address {raw!r} (--temporal-ui, "
                         f"{TEMPORAL_UI_VAR}) is not an http(s) URL: give one such as "
                         f"{DEFAULT_TEMPORAL_UI}")
    return raw.strip().rstrip("/")


def login_page(nonce: str, problem: str | None = None) -> str:
    said = f'<p class="outcome refused" id="problem">{_text(problem)}</p>' if problem else ""
    body = (
        "<h1>plangate: approval cards</h1>"
        f"{said}<p>Give your login token (<code>plangate key show YOUR.key</code> prints it) "
        "to see the cards that wait for a person.</p>"
        '<form method="post" action="/login"><label>token '
        '<input type="password" name="token" autocomplete="current-password" required></label>'
        ' <button type="submit">Log in</button></form>'
    )
    return _document("plangate: log in", body, nonce)


def _target(args: Mapping[str, Any]) -> str:
    """The object a call acts on, where its arguments name one plainly."""
    bucket, key = args.get("bucket"), args.get("key")
    if isinstance(bucket, str) and isinstance(key, str):
        return f" on <code class=\"target\">s3://{_text(bucket)}/{_text(key)}</code>"
    for name in ("target", "table", "account_id", "invoice_id", "sub_id", "ticket_id", "to"):
        if isinstance(args.get(name), str):
            return f' on <code class="target">{_text(args[name])}</code>'
    return ""


def _rows(values: Mapping[str, Any]) -> str:
    return "".join(
        f'<tr><th><code>{_text(k)}</code></th><td><code class="cell">{_json(v)}</code></td></tr>'
        for k, v in values.items()
    )


def card_html(pending: PendingCard, csrf: str, now: datetime, links: Links | None = None) -> str:
    r = pending.record
    c = r.card
    links = links or Links()
    irreversible = c.effect in (Effect.MONEY, Effect.EXTERNAL)
    observed = (
        f"<table>{_rows(c.observed)}</table>" if c.observed
        else '<p class="note">no pre condition: nothing was observed</p>'
    )
    left = (r.expires_at - now).total_seconds()
    expires = r.expires_at.astimezone(UTC).isoformat()
    hidden = "".join(
        f'<input type="hidden" name="{name}" value="{_text(value)}">'
        for name, value in (("run_id", pending.run_id), ("step", r.step), ("digest", r.digest),
                            ("csrf", csrf))
    )
    return (
        f'<section class="card{" irreversible" if irreversible else ""}" '
        f'data-run="{_text(pending.run_id)}" data-step="{r.step}" data-digest="{_text(r.digest)}">'
        f"<h2>Step {r.step} of run <code>{_text(pending.run_id)}</code> "
        f"(plan version {r.plan_version})</h2>"
        f'<p class="note">goal: {_text(pending.goal)}</p>'
        f"{links.html(pending.run_id)}"
        f'<p class="what">Will call <code class="tool">{_text(c.tool)}</code>{_target(c.args)} '
        f'&mdash; effect <span class="effect">{_text(c.effect.value)}'
        f'{" (irreversible)" if irreversible else ""}</span></p>'
        f"<h3>With these arguments (fully bound)</h3><table>{_rows(c.args)}</table>"
        f"<h3>What its probes observed</h3>{observed}"
        "<h3>Under whose authority, until when</h3><table>"
        f"<tr><th>on behalf of</th><td>{_text(c.on_behalf_of or '-')}</td></tr>"
        f"<tr><th>policy bundle</th><td>{_text(c.policy_bundle or '-')}</td></tr>"
        f'<tr><th>issued</th><td class="issued">{when(c.issued_at)}</td></tr>'
        f'<tr><th>expires</th><td class="expires">{when(r.expires_at)} &mdash; time left '
        f'<span class="left" data-expires="{_text(expires)}">{span(left)}</span></td></tr>'
        f'<tr><th>digest</th><td><code class="digest">{_text(r.digest)}</code></td></tr>'
        "</table>"
        f'<form class="answer" method="post" action="/answer">{hidden}'
        '<label>reason (to reject) <input name="reason" maxlength="2000"></label>'
        '<button class="approve" name="decision" value="approve">Approve</button>'
        '<button class="reject" name="decision" value="reject">Reject</button>'
        "</form></section>"
    )


@dataclass(frozen=True)
class Given:
    """An answer given on this page, to say later what became of it."""

    run_id: str
    step: int
    digest: str
    decision: Decision
    by: str
    at: datetime


def _step_of(rep: RunReport, given: Given) -> StepReport | None:
    version = next((a.plan_version for a in rep.approvals if a.digest == given.digest),
                   rep.plan_version)
    try:
        return rep.step(given.step, version)
    except KeyError:
        return None


def what_next(rep: RunReport, given: Given) -> tuple[str, bool]:
    """What became of an answer, in a sentence (approved: the step's state first; rejected:
    the run's), and whether it has settled (nothing more will happen to it by itself)."""
    step = _step_of(rep, given)
    state = step.state if step is not None else None
    run = f"the run is {rep.status}"
    if rep.failure is not None:
        run += f" ({rep.failure.code}{': ' + rep.failure.detail if rep.failure.detail else ''})"
    newer = any(a.step == given.step and a.digest != given.digest and a.answer is None
                and a.status == "pending" for a in rep.approvals)
    if step is None:
        text = f"step {given.step} is not in the run's report; {run}"
    else:
        said = f"step {step.n} ({step.tool}) is {state}"
        if step.reason and state is not None and state.final and state != "DONE":
            said += f": {step.reason}"
        if newer:
            said += " (what its probes observe changed: a new card waits)"
        text = (f"{said}; {run}" if given.decision is Decision.APPROVE
                else f"{run}; {said}")
    settled = rep.status.final or newer or (state is not None and state.final)
    return text, settled


def _answered_html(recent: Sequence[tuple[Given, str]], links: Links) -> str:
    if not recent:
        return '<section id="answered"></section>'
    items = "".join(
        f'<li data-run="{_text(g.run_id)}" data-step="{g.step}">{_text(g.decision)} of step '
        f"{g.step} of run <code>{_text(g.run_id)}</code> by {_text(g.by)} at {when(g.at)}: "
        f'<span class="next">{_text(became)}</span> '
        f'<a href="{_text(links.report(g.run_id))}">the run&rsquo;s report</a></li>'
        for g, became in recent
    )
    return f'<section id="answered"><h2>Answered here recently</h2><ul>{items}</ul></section>'


def cards_page(pending: PendingApprovals, queue: str, csrf: str, now: datetime,
               nonce: str, by: str = "", links: Links | None = None,
               recent: Sequence[tuple[Given, str]] = ()) -> str:
    """``by``: who is logged in, and answers what they approve or reject here; ``recent``:
    the answers given here lately, each with what became of it."""
    links = links or Links()
    n = len(pending.cards)
    notes = []
    if pending.unanswered:
        ids = ", ".join(pending.unanswered[:20]) + (" ..." if len(pending.unanswered) > 20 else "")
        notes.append(f"{len(pending.unanswered)} open runs did not answer (is a worker polling "
                     f"{queue}?): {ids}")
    if pending.truncated:
        notes.append(f"only the first {pending.runs} open runs were read")
    cards = "".join(card_html(c, csrf, now, links) for c in pending.cards)
    body = (
        "<h1>plangate: approval cards</h1>"
        + (f'<p id="who">You answer as <b>{_text(by)}</b>: each answer is signed with your key '
           "and recorded under your name.</p>" if by else "")
        + '<div class="bar"><form id="refresh-form" method="get" action="/">'
        '<button id="refresh">Refresh</button></form>'
        f'<span class="note">the cards are read again every {REFRESH_S} s; a reason being '
        'typed is kept</span><span id="refresh-problem" class="refused"></span></div>'
        + f'<p id="summary">{n} card{"s" if n != 1 else ""} waiting in {pending.runs} open '
        f"run{'s' if pending.runs != 1 else ''} of task queue <code>{_text(queue)}</code>, "
        f"read at {when(now)}. Approving runs the step after it reads the world again; "
        "a card that changed, expired or was answered is refused.</p>"
        + '<div id="notes">' + "".join(f'<p class="note">{_text(x)}</p>' for x in notes)
        + "</div>"
        + _answered_html(recent, links)
        + f'<div id="cards">{cards}</div>'
    )
    return _document(f"plangate: {n} approval cards", body, nonce, script=True,
                     refresh_s=REFRESH_S)


def outcome_page(nonce: str, accepted: bool, headline: str, detail: str,
                 extra: str = "") -> str:
    """``extra``: markup the caller escaped (what happened next, links)."""
    cls = "accepted" if accepted else "refused"
    body = (
        f"<h1>{_text(headline)}</h1>"
        f'<p class="outcome {cls}" id="outcome" data-outcome="{cls}">{_text(detail)}</p>'
        f"{extra}"
        '<p><a href="/">back to the cards</a></p>'
    )
    return _document(f"plangate: {headline}", body, nonce, script=bool(extra))


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], id_: str) -> str:
    """Cells are markup their caller escaped."""
    return (f'<div class="wide"><table class="list" id="{id_}"><thead><tr>'
            + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead><tbody>"
            + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
            + "</tbody></table></div>")


def run_page(rep: RunReport, links: Links, nonce: str) -> str:
    """A run's report, for a person: its state, its steps, its failure, its approvals."""
    def at(t: datetime | None) -> str:
        return when(t) if t is not None else "-"

    head = (
        f"<h1>Run <code>{_text(rep.run_id)}</code>: "
        f'<span id="status">{_text(rep.status)}</span></h1>'
        f"{links.html(rep.run_id, report=False)}"
        f'<table><tr><th>goal</th><td>{_text(rep.goal)}</td></tr>'
        f"<tr><th>plan version</th><td>{rep.plan_version} (re-plans used {rep.replans_used} "
        f"of {rep.replans_max})</td></tr>"
        f"<tr><th>submitted</th><td>{at(rep.submitted_at)}</td></tr>"
        f"<tr><th>begun</th><td>{at(rep.begun_at)}</td></tr></table>"
    )
    failure = ""
    if (f := rep.failure) is not None:
        failure = (
            '<h2>Failure</h2><table id="failure">'
            f"<tr><th>step</th><td>{f.step} ({_text(f.tool)}, plan version {f.plan_version})"
            "</td></tr>"
            f"<tr><th>code</th><td><code>{_text(f.code)}</code>"
            f"{f' (HTTP {f.status})' if f.status else ''}</td></tr>"
            f"<tr><th>detail</th><td>{_text(f.detail or '-')}</td></tr>"
            f"<tr><th>answer</th><td>{_text(f.answer or '-')}</td></tr></table>"
        )
    if (c := rep.cancellation) is not None:
        failure += (f'<h2>Cancelled</h2><p id="cancelled">at {when(c.at)} by '
                    f"{_text(c.requester or '-')}: {_text(c.reason or 'no reason given')}</p>")
    steps = _table(
        ("step", "version", "tool", "effect", "state", "attempts", "tool started",
         "tool finished", "why"),
        [(str(s.n), str(s.plan_version), f"<code>{_text(s.tool)}</code>", _text(s.effect),
          f'<b class="state">{_text(s.state)}</b>', str(s.attempts),
          at(s.timings.tool_started_at), at(s.timings.tool_finished_at), _text(s.reason or ""))
         for s in rep.steps], "steps")
    approvals = _table(
        ("step", "version", "tool", "card", "issued", "expires", "answer"),
        [(str(a.step), str(a.plan_version), f"<code>{_text(a.card.tool)}</code>",
          _text(a.status), when(a.card.issued_at), when(a.expires_at),
          (f"{_text(a.answer.decision)} by {_text(a.answer.by or '-')} at {when(a.answer.at)}"
           + (f": {_text(a.answer.reason)}" if a.answer.reason else ""))
          if a.answer else "-")
         for a in rep.approvals], "approvals") if rep.approvals else (
        '<p class="note">no card was issued</p>')
    body = (head + failure + "<h2>Steps</h2>" + steps + "<h2>Approvals</h2>" + approvals
            + '<p><a href="/">back to the cards</a></p>')
    return _document(f"plangate: run {rep.run_id}", body, nonce, script=True)


# -- the server -----------------------------------------------------------------------------
@dataclass(eq=False)
class _Reply(Exception):
    """A response, raised from anywhere in a request's handling."""

    status: int
    body: str
    cookies: Sequence[str] = ()
    location: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "text/html; charset=utf-8"


@dataclass
class ApprovalPage:
    api: Plangate
    gate: Gate
    loop: asyncio.AbstractEventLoop
    throttle: Throttle = field(default_factory=Throttle)
    links: Links = field(default_factory=Links)
    # answers given here, newest first: the cards page says what became of each
    recent: deque[Given] = field(default_factory=lambda: deque(maxlen=RECENT_MAX))

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a Temporal call on the command's event loop, from a request's thread."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(CALL_TIMEOUT_S)
        except TimeoutError:
            future.cancel()
            raise

    async def became(self, given: Given, wait_s: float = 0.0) -> str:
        """What became of an answer; waits up to ``wait_s`` for it to settle."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                rep = await asyncio.wait_for(self.api.report(given.run_id), 5)
            except Exception as e:  # one unreadable run never hides the cards
                return f"the run's report could not be read ({type(e).__name__})"
            text, settled = what_next(rep, given)
            if settled or time.monotonic() >= deadline:
                return text
            await asyncio.sleep(0.25)

    async def listing(self) -> tuple[PendingApprovals, list[tuple[Given, str]]]:
        """The cards waiting, and the answers given here with what became of them."""
        given = list(self.recent)
        pending, *became = await asyncio.gather(self.api.pending_approvals(),
                                                *(self.became(g) for g in given))
        return cast(PendingApprovals, pending), list(zip(given, cast(list[str], became),
                                                         strict=True))


def _cookie(name: str, value: str, clear: bool = False) -> str:
    age = "; Max-Age=0" if clear else ""
    return f"{name}={value}; Path=/; HttpOnly; SameSite=Strict{age}"


class _Handler(BaseHTTPRequestHandler):
    server_version = "plangate-ui"
    sys_version = ""
    timeout = 15  # seconds to send a request: a stalled client does not hold a thread
    nonce = ""  # this response's CSP nonce

    # -- plumbing ---------------------------------------------------------------------------
    @property
    def page(self) -> ApprovalPage:
        return cast(_Server, self.server).page

    def _shown_request(self) -> str:
        """The request as the log shows it: nothing a client typed into a URL (a token in a
        query, in any encoding, or in a path) is ever written."""
        method = getattr(self, "command", None)
        path, query, _ = getattr(self, "path", "").partition("?")
        version = getattr(self, "request_version", "")
        return " ".join((
            method if method in _METHODS else "-",
            (path if path in ROUTES else "<other path>") + ("?<query>" if query else ""),
            version if _VERSION.match(version or "") else "-",
        ))

    def _log(self, what: str) -> None:
        sys.stderr.write(f"plangate ui: {self.address_string()} {self._shown_request()} {what}\n")

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        self._log(str(int(code)) if isinstance(code, int) else "-")

    def log_error(self, format: str, *args: Any) -> None:
        # the standard library's messages quote the raw request line: only a code is kept
        code = next((a for a in args if isinstance(a, int)), None)
        self._log("error" + (f" {code}" if code is not None else ""))

    def log_message(self, format: str, *args: Any) -> None:
        self._log(format.split("%", 1)[0].strip())  # the message, none of its values

    def _cookies(self) -> dict[str, str]:
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(self.headers.get("Cookie", ""))
        except CookieError:
            return {}
        return {k: m.value for k, m in jar.items()}

    def _send(self, reply: _Reply) -> None:
        data = reply.body.encode()
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", "DENY")
        # same-origin, not no-referrer: with no referrer, a browser sends `Origin: null`
        self.send_header("Referrer-Policy", "same-origin")
        self.send_header("Cross-Origin-Opener-Policy", "same-origin")
        self.send_header(
            "Content-Security-Policy",
            f"default-src 'none'; style-src 'nonce-{self.nonce}'; "
            f"script-src 'nonce-{self.nonce}'; connect-src 'self'; form-action 'self'; "
            "frame-ancestors 'none'; "
            "base-uri 'none'",
        )
        for c in reply.cookies:
            self.send_header("Set-Cookie", c)
        if reply.location is not None:
            self.send_header("Location", reply.location)
        for k, v in reply.headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _serve(self, method: str) -> None:
        self.nonce = secrets.token_urlsafe(16)
        try:
            reply = self._get() if method == "GET" else self._post()
        except _Reply as r:
            reply = r
        except TimeoutError:
            reply = self._error(504, "Temporal did not answer in time",
                                "An answer sent may still be recorded: reload the cards "
                                "before you answer again.")
        except RPCError as e:
            reply = self._error(502, "Temporal refused the call", e.message)
        except Exception as e:
            traceback.print_exc()
            reply = self._error(500, "Internal error", f"{type(e).__name__} (see the log)")
        self._send(reply)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def _error(self, status: int, headline: str, detail: str) -> _Reply:
        return _Reply(status, outcome_page(self.nonce, False, headline, detail))

    def _login_reply(self, problem: str | None = None) -> _Reply:
        return _Reply(401, login_page(self.nonce, problem),
                      headers={"WWW-Authenticate": 'Cookie realm="plangate ui"'})

    def _logged_in(self, name: str) -> _Reply:
        """The token was ``name``'s: a session cookie naming them, a CSRF cookie, and to the
        cards."""
        cookies = [_cookie(SESSION_COOKIE, self.page.gate.session(name)),
                   _cookie(CSRF_COOKIE, secrets.token_urlsafe(32))]
        return _Reply(303, outcome_page(self.nonce, True, "Logged in", "To the cards."),
                      cookies=cookies, location="/")

    def _token_given(self, given: str) -> _Reply:
        """A token tried: heard only when the client's address is not throttled."""
        who, throttle = self.client_address[0], self.page.throttle
        wait = throttle.wait_s(who)
        if wait > 0:
            seconds = max(1, int(wait + 0.999))
            return _Reply(429, outcome_page(self.nonce, False, "Too many wrong tokens",
                                            f"Try again in {seconds} s."),
                          headers={"Retry-After": str(seconds)})
        name = self.page.gate.who(given)
        if name is not None:
            throttle.passed(who)
            return self._logged_in(name)
        throttle.failed(who)
        return self._login_reply("That is not the login token of anyone this page serves.")

    def _authorised(self) -> str | None:
        """Who the request's session names, or None."""
        return self.page.gate.session_of(self._cookies().get(SESSION_COOKIE))

    def _same_origin(self) -> bool:
        site = self.headers.get("Sec-Fetch-Site")
        if site is not None and site not in ("same-origin", "none"):
            return False
        origin = self.headers.get("Origin")
        return origin is None or urlsplit(origin).netloc == self.headers.get("Host", "")

    def _form(self) -> dict[str, str]:
        if self.headers.get_content_type() != "application/x-www-form-urlencoded":
            raise self._error(415, "Not a form", "The page only takes its own forms.")
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            raise self._error(411, "No length", "A form needs its Content-Length.") from None
        if not 0 <= length <= MAX_BODY_BYTES:
            raise self._error(413, "Too large", f"A form is at most {MAX_BODY_BYTES} bytes.")
        raw = self.rfile.read(length)
        try:
            fields = parse_qs(raw.decode("ascii"), max_num_fields=12, errors="strict")
        except (UnicodeDecodeError, ValueError):
            raise self._error(400, "Bad form", "The form could not be read.") from None
        if any(len(v) != 1 for v in fields.values()):
            raise self._error(400, "Bad form", "A field was given more than once.")
        return {k: v[0] for k, v in fields.items()}

    # -- routes -----------------------------------------------------------------------------
    def _get(self) -> _Reply:
        url = urlsplit(self.path)
        if url.path not in ("/", "/run", "/run.json"):
            raise self._error(404, "Not found", "The cards are at /.")
        query = parse_qs(url.query, max_num_fields=8)
        given = query.get("token")
        if given is not None and url.path == "/":
            return self._token_given(given[0])
        by = self._authorised()
        if by is None:
            return self._login_reply()
        if url.path != "/":
            return self._run(url.path, query.get("id", [""])[0])
        cookies: list[str] = []
        csrf = self._cookies().get(CSRF_COOKIE) or ""
        if len(csrf) < 32:
            csrf = secrets.token_urlsafe(32)
            cookies.append(_cookie(CSRF_COOKIE, csrf))
        pending, recent = self.page.call(self.page.listing())
        body = cards_page(pending, self.page.api.settings.temporal.task_queue, csrf,
                          datetime.now(UTC), self.nonce, by, self.page.links, recent)
        return _Reply(200, body, cookies=cookies)

    def _own_run(self, run_id: str, what: str) -> None:
        """Refuses (404) a run that is not on the page's task queue: not this page's to show
        or answer."""
        api = self.page.api
        queue = api.settings.temporal.task_queue
        try:
            ours: bool = self.page.call(api.of_this_deployment(run_id))  # or a catalogue queue
        except UnknownRun:
            ours = False
        if not ours:
            raise self._error(404, what, f"no run {run_id} waits on task queue {queue}: this "
                              "page answers only the cards it lists")

    def _run(self, path: str, run_id: str) -> _Reply:
        """A run of the page's queue: its report readably (``/run``) or as JSON."""
        if not 0 < len(run_id) <= 1000:
            raise self._error(400, "Which run?", "Give the run as ?id=RUN_ID.")
        self._own_run(run_id, "Not found")
        rep: RunReport = self.page.call(self.page.api.report(run_id))
        if path == "/run.json":
            return _Reply(200, visible_json(rep.model_dump_json(indent=2)),
                          content_type="application/json; charset=utf-8")
        return _Reply(200, run_page(rep, self.page.links, self.nonce))

    def _post(self) -> _Reply:
        path = urlsplit(self.path).path
        if path not in ("/login", "/answer"):
            raise self._error(404, "Not found", "Nothing to post here.")
        if not self._same_origin():
            raise self._error(403, "Forbidden", "A form from another site is not taken.")
        if path == "/login":
            return self._token_given(self._form().get("token", ""))
        by = self._authorised()
        if by is None:
            return self._login_reply("Log in first.")
        form = self._form()
        csrf = self._cookies().get(CSRF_COOKIE, "")
        if not csrf or not hmac.compare_digest(form.get("csrf", "").encode(), csrf.encode()):
            raise self._error(403, "Forbidden", "The form's CSRF token does not match: reload "
                              "the page and answer again.")
        return self._answer(form, by)

    def _answer(self, form: Mapping[str, str], by: str) -> _Reply:
        """``by``: the person the session names; the answer is signed with their key."""
        run_id, step, digest = form.get("run_id", ""), form.get("step", ""), form.get("digest", "")
        decision, reason = form.get("decision", ""), form.get("reason", "")
        if not (0 < len(run_id) <= 1000 and step.isdigit() and len(step) <= 9
                and _DIGEST.match(digest) and decision in ("approve", "reject")):
            raise self._error(400, "Bad form", "The card's run, step, digest or decision is "
                              "missing or malformed.")
        if len(reason) > 2000:
            raise self._error(400, "Reason too long", "A reason is at most 2000 characters.")
        api, n = self.page.api, int(step)
        self._own_run(run_id, f"Refused: {decision} of step {n}")
        try:
            receipt: ApprovalReceipt = self.page.call(
                api.approve(run_id, n, digest, by=by) if decision == "approve"
                else api.reject(run_id, n, digest, reason=reason, by=by)
            )
        except (AnswerRefused, RunEnded) as e:
            raise self._error(409, f"Refused: {decision} of step {n}", str(e)) from None
        except UnknownRun as e:
            raise self._error(404, f"Refused: {decision} of step {n}", str(e)) from None
        if receipt.decision is Decision.APPROVE:
            then = ("The step reads the world again right before it acts; if what its probes "
                    "observe has changed, a new card will wait here.")
        else:
            then = "The step follows its on_unmet."
        stamp = receipt.at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        detail = (f"{receipt.decision} of step {receipt.step} of run {run_id} (card "
                  f"{receipt.digest}) recorded at {stamp} by {by}. {then}")
        given = Given(run_id, receipt.step, receipt.digest, receipt.decision, by, receipt.at)
        self.page.recent.appendleft(given)
        became = self.page.call(self.page.became(given, NEXT_WAIT_S))
        extra = (f'<p id="next">Recorded at {when(receipt.at)}. Then: '
                 f'<span class="next">{_text(became)}</span></p>'
                 f"{self.page.links.html(run_id)}")
        word = "Approved" if receipt.decision is Decision.APPROVE else "Rejected"
        return _Reply(200, outcome_page(self.nonce, True, word, detail, extra))


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str, port: int, page: ApprovalPage) -> None:
        self.page = page
        if ":" in host:
            self.address_family = socket.AF_INET6
        super().__init__((host, port), _Handler)


@asynccontextmanager
async def serving(
    api: Plangate, keys: Sequence[SigningKey], host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT, throttle: Throttle | None = None,
    temporal_ui: str = DEFAULT_TEMPORAL_UI,
) -> AsyncIterator[str]:
    """The page for the people whose ``keys`` it holds, served from a thread until the block
    ends; yields its URL. ``port`` 0: a free port. ``OSError`` when the address cannot be
    listened on. ``temporal_ui``: the Temporal Web UI's address, for the runs' links."""
    links = Links(temporal_ui, api.settings.temporal.namespace)
    page = ApprovalPage(api, Gate(keys), asyncio.get_running_loop(), throttle or Throttle(),
                        links)
    server = _Server(host, port, page)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.2}, name="plangate-ui",
        daemon=True,
    )
    thread.start()
    bound = server.server_address[1]
    shown = f"[{host}]" if ":" in host else host
    try:
        yield f"http://{shown}:{bound}/"
    finally:
        await asyncio.to_thread(server.shutdown)
        server.server_close()


async def run_ui(api: Plangate, keys: Sequence[SigningKey], host: str, port: int,
                 temporal_ui: str = DEFAULT_TEMPORAL_UI) -> int:
    """Serve the page until interrupted."""
    async with serving(api, keys, host, port, temporal_ui=temporal_ui) as url:
        s = api.settings.temporal
        names = ", ".join(k.name for k in keys)
        print(f"plangate ui: serving {url} (cards of task queue {s.task_queue} in namespace "
              f"{s.namespace}) for {names}; each logs in with their key's login "
              "token (plangate key show FILE)", flush=True)
        if host not in ("127.0.0.1", "localhost", "::1"):
            print(f"plangate ui: warning: listening on {host} over plain HTTP: the token and "
                  "the session cross the network in clear; put a TLS proxy in front",
                  file=sys.stderr, flush=True)
        await asyncio.Event().wait()
    return 0
