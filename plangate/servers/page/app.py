"""The page's routes on Starlette. Every request but the static files goes through a session:
without one, the login form (401) that leads back to the page asked for. A form is taken only
with its session's CSRF token and from this site (``csrf``). An answer is taken only for a run
of the page's own task queue (described first; any other is refused as unknown, nothing
applied), and an answer the workflow recorded is shown as recorded even where its receipt does
not read (``Plangate.approve``)."""

from __future__ import annotations

import asyncio
import re
import traceback
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import parse_qs, quote, urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from temporalio.service import RPCError

from plangate.client.api import AnswerRefused, Plangate, RunEnded, UnknownRun
from plangate.client.grants import BadGrant
from plangate.plans.visible import visible_json
from plangate.records.approvals import ApprovalDecision, ApprovalReceipt
from plangate.records.report import RunReport
from plangate.servers.page import views
from plangate.servers.page.answers import Answers, Given
from plangate.servers.page.chat import ChatActions
from plangate.servers.page.csrf import local_path, same_origin
from plangate.servers.page.gate import Gate, Throttle
from plangate.servers.page.sessions import Session, Sessions

SESSION_COOKIE = "plangate_ui"
MAX_BODY_BYTES = 32 * 1024  # a form: ids, a digest, a name, a reason of 2,000 characters
CALL_TIMEOUT_S = 60.0  # one page's Temporal calls
NEXT_WAIT_S = 5.0  # how long an answer's page waits to say what the step did next
_DIGEST = re.compile(r"^[0-9a-f]{64}$")
T = TypeVar("T")


class Refusal(Exception):
    """A response other than the page asked for, raised from anywhere in a request."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


def refused(status: int, headline: str, detail: str, session: Session | None = None,
            headers: Mapping[str, str] | None = None) -> Refusal:
    body = views.outcome_page(False, headline, detail, session.csrf if session else None)
    return Refusal(HTMLResponse(body, status, headers=headers))


@dataclass
class Page:
    api: Plangate
    gate: Gate
    sessions: Sessions
    throttle: Throttle
    links: views.Links
    answers: Answers
    chat: ChatActions | None = None  # a chat's signed callback, where the deployment has one

    # -- plumbing ---------------------------------------------------------------------------
    async def call(self, coro: Coroutine[Any, Any, T]) -> T:
        return await asyncio.wait_for(coro, CALL_TIMEOUT_S)

    def login(self, request: Request, problem: str | None = None,
              clear: bool = False) -> Response:
        """The login form, leading back to the run asked for (no other query is kept: a
        token in a URL is never written back into a page)."""
        run_id = request.query_params.get("id", "")
        next_ = (f"{request.url.path}?id={quote(run_id, safe='')}"
                 if request.url.path in ("/run", "/run.json") and run_id else "/")
        if request.url.path == "/card":  # a notice's link: the card, once logged in
            q = request.query_params
            next_ = "/card?" + urlencode({k: q.get(k, "") for k in ("run", "step", "digest")})
        response = HTMLResponse(views.login_page(problem, next_), 401,
                                headers={"WWW-Authenticate": 'Cookie realm="plangate ui"'})
        if clear:
            _session_cookie(response, "", 0)
        return response

    def session(self, request: Request) -> Session:
        """The request's session; else the login form (401), saying when it has expired."""
        found, expired = self.sessions.find(request.cookies.get(SESSION_COOKIE))
        if found is not None:
            return found
        problem = "Your session has expired: log in again." if expired else None
        raise Refusal(self.login(request, problem, clear=expired))

    async def form(self, request: Request) -> dict[str, str]:
        """A form posted from this site (else 403), of the page's size and shape."""
        if not same_origin(request.headers):
            raise refused(403, "Forbidden", "A form from another site is not taken.")
        if request.headers.get("content-type", "").split(";")[0].strip() != (
                "application/x-www-form-urlencoded"):
            raise refused(415, "Not a form", "The page only takes its own forms.")
        try:
            length = int(request.headers.get("content-length", ""))
        except ValueError:
            raise refused(411, "No length", "A form needs its Content-Length.") from None
        if not 0 <= length <= MAX_BODY_BYTES:
            raise refused(413, "Too large", f"A form is at most {MAX_BODY_BYTES} bytes.")
        raw = await request.body()
        try:
            fields = parse_qs(raw.decode("ascii"), max_num_fields=12, errors="strict")
        except (UnicodeDecodeError, ValueError):
            raise refused(400, "Bad form", "The form could not be read.") from None
        if any(len(v) != 1 for v in fields.values()):
            raise refused(400, "Bad form", "A field was given more than once.")
        return {k: v[0] for k, v in fields.items()}

    async def own_run(self, run_id: str, what: str, session: Session) -> None:
        """Refuses (404) a run that is not on the page's task queue: not this page's to show
        or answer."""
        queue = self.api.settings.temporal.task_queue
        try:
            ours = await self.call(self.api.of_this_deployment(run_id))  # or a catalogue queue
        except UnknownRun:
            ours = False
        if not ours:
            raise refused(404, what, f"no run {run_id} waits on task queue {queue}: this page "
                          "answers only the cards it lists", session)

    # -- routes -----------------------------------------------------------------------------
    async def cards(self, request: Request) -> Response:
        s = self.session(request)
        raw = request.query_params.get("page", "1")
        if not (raw.isascii() and raw.isdigit() and 0 < len(raw) <= 6 and int(raw) > 0):
            raise refused(400, "Which page?", "Give the page of cards as ?page=N, N from 1.", s)
        pending, recent = await self.call(self.answers.listing())
        return HTMLResponse(views.cards_page(
            pending, self.api.settings.temporal.task_queue, s.csrf, datetime.now(UTC), s.name,
            self.links, recent, page=int(raw)))

    async def run(self, request: Request) -> Response:
        """A run of the page's queue: its report readably (``/run``) or as JSON."""
        s = self.session(request)
        run_id = request.query_params.get("id", "")
        if not 0 < len(run_id) <= 1000:
            raise refused(400, "Which run?", "Give the run as ?id=RUN_ID.", s)
        await self.own_run(run_id, "Not found", s)
        rep: RunReport = await self.call(self.api.report(run_id))
        if request.url.path == "/run.json":
            return Response(visible_json(rep.model_dump_json(indent=2)),
                            media_type="application/json; charset=utf-8")
        return HTMLResponse(views.run_page(rep, self.links, s.csrf))

    async def card(self, request: Request) -> Response:
        """One card, as a notice links it (``/card?run=&step=&digest=``): read from its run
        (``published_card``), with Approve and Reject; a card no longer waiting says why
        (409)."""
        s = self.session(request)
        q = request.query_params
        run_id, step, digest = q.get("run", ""), q.get("step", ""), q.get("digest", "")
        if not (0 < len(run_id) <= 1000 and step.isdigit() and len(step) <= 9
                and _DIGEST.match(digest)):
            raise refused(400, "Which card?", "Give the card as ?run=RUN&step=N&digest=HEX.", s)
        await self.own_run(run_id, "Not found", s)
        try:
            shown = await self.call(self.api.published_card(run_id, int(step), digest))
        except (AnswerRefused, RunEnded) as e:
            raise refused(409, "No longer waiting", str(e), s) from None
        except UnknownRun as e:
            raise refused(404, "Not found", str(e), s) from None
        return HTMLResponse(views.one_card_page(shown, s.csrf, datetime.now(UTC), s.name,
                                                self.links))

    async def log_in(self, request: Request) -> Response:
        """A token tried: heard only when the client's address is not throttled; to the page
        asked for (a path of this site only) with a new session."""
        form = await self.form(request)
        next_ = local_path(form.get("next", "/"))
        if next_ is None:
            raise refused(400, "Bad form", "After login the page goes to a path of its own "
                          "only (next: no scheme, no host).")
        who = request.client.host if request.client else "-"
        wait = self.throttle.wait_s(who)
        if wait > 0:
            seconds = max(1, int(wait + 0.999))
            raise refused(429, "Too many wrong tokens", f"Try again in {seconds} s.",
                          headers={"Retry-After": str(seconds)})
        name = self.gate.who(form.get("token", ""))
        if name is None:
            self.throttle.failed(who)
            return self.login(request, "That is not the login token of anyone this page serves.")
        self.throttle.passed(who)
        s = self.sessions.start(name)
        response = RedirectResponse(next_, 303)
        _session_cookie(response, s.id, int(self.sessions.ttl_s))
        return response

    async def log_out(self, request: Request) -> Response:
        s = self.session(request)
        if not s.csrf_matches((await self.form(request)).get("csrf", "")):
            raise _csrf_refusal(s)
        self.sessions.end(s.id)
        response = RedirectResponse("/", 303)
        _session_cookie(response, "", 0)
        return response

    async def answer(self, request: Request) -> Response:
        """An answer, signed with the key of the person the session names: whatever a form
        says, nobody answers as anyone else."""
        s = self.session(request)
        form = await self.form(request)  # from this site only
        if not s.csrf_matches(form.get("csrf", "")):
            raise _csrf_refusal(s)
        run_id, step, digest = form.get("run_id", ""), form.get("step", ""), form.get("digest", "")
        decision, reason = form.get("decision", ""), form.get("reason", "")
        if not (0 < len(run_id) <= 1000 and step.isdigit() and len(step) <= 9
                and _DIGEST.match(digest) and decision in ("approve", "reject")):
            raise refused(400, "Bad form", "The card's run, step, digest or decision is "
                          "missing or malformed.", s)
        if len(reason) > 2000:
            raise refused(400, "Reason too long", "A reason is at most 2000 characters.", s)
        n, by, what = int(step), s.name, f"Refused: {decision} of step {step}"
        await self.own_run(run_id, what, s)
        try:
            receipt: ApprovalReceipt = await self.call(
                self.api.approve(run_id, n, digest, by=by) if decision == "approve"
                else self.api.reject(run_id, n, digest, reason=reason, by=by))
        except (AnswerRefused, RunEnded) as e:
            raise refused(409, what, str(e), s) from None
        except UnknownRun as e:
            raise refused(404, what, str(e), s) from None
        if receipt.decision is ApprovalDecision.APPROVE:
            then = ("The step reads the world again right before it acts; if what its probes "
                    "observe has changed, a new card will wait here.")
        else:
            then = "The step follows its on_unmet."
        stamp = receipt.at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        detail = (f"{receipt.decision} of step {receipt.step} of run {run_id} (card "
                  f"{receipt.digest}) recorded at {stamp} by {by}. {then}")
        given = Given(run_id, receipt.step, receipt.digest, receipt.decision, by, receipt.at)
        self.answers.recent.appendleft(given)
        became = await self.call(self.answers.became(given, NEXT_WAIT_S))
        word = "Approved" if receipt.decision is ApprovalDecision.APPROVE else "Rejected"
        return HTMLResponse(views.outcome_page(True, word, detail, s.csrf, run_id=run_id,
                                               at=receipt.at, became=became, links=self.links))


    async def grants(self, request: Request) -> Response:
        """The standing grants, each live one with its revoke button."""
        s = self.session(request)
        listed = await self.call(self.api.grants())
        return HTMLResponse(views.grants_page(listed, s.csrf, s.name, datetime.now(UTC)))

    async def revoke(self, request: Request) -> Response:
        """A grant revoked by the person the session names (recorded as its revoker)."""
        s = self.session(request)
        form = await self.form(request)  # from this site only
        if not s.csrf_matches(form.get("csrf", "")):
            raise _csrf_refusal(s)
        grant_id = form.get("grant_id", "")
        if not _DIGEST.match(grant_id):
            raise refused(400, "Bad form", "The grant's id is missing or malformed.", s)
        try:
            at = await self.call(self.api.revoke_grant(grant_id, by=s.name))
        except BadGrant as e:
            raise refused(404, "Not found", str(e), s) from None
        stamp = at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return HTMLResponse(views.outcome_page(
            True, "Revoked", f"grant {grant_id} revoked at {stamp} by {s.name}: it covers no "
            "further call.", s.csrf))


def _session_cookie(response: Response, value: str, max_age: int) -> None:
    """Only this site's own requests carry it (SameSite=Strict); no script reads it."""
    response.headers.append("set-cookie", f"{SESSION_COOKIE}={value}; Path=/; HttpOnly; "
                            f"SameSite=Strict; Max-Age={max_age}")


def _csrf_refusal(s: Session) -> Refusal:
    return refused(403, "Forbidden", "The form's CSRF token is not this session's, or it "
                   "comes from another site: reload the page and answer again.", s)


def _guarded(handler: Callable[[Request], Awaitable[Response]]) -> Callable[
        [Request], Awaitable[Response]]:
    """A route whose refusals and failures are pages, never a traceback to the client."""
    async def route(request: Request) -> Response:
        try:
            return await handler(request)
        except Refusal as r:
            return r.response
        except TimeoutError:
            return refused(504, "Temporal did not answer in time", "An answer sent may still "
                           "be recorded: reload the cards before you answer again.").response
        except RPCError as e:
            return refused(502, "Temporal refused the call", e.message).response
        except Exception as e:
            traceback.print_exc()
            return refused(500, "Internal error", f"{type(e).__name__} (see the log)").response
    return route


async def _not_found(request: Request, exc: Exception) -> Response:
    # a method a route does not take is not found either: nothing is said of what exists
    return refused(404, "Not found", "The cards are at /.").response


def application(page: Page) -> Starlette:
    static = StaticFiles(packages=[("plangate.servers.page", "static")])
    # the one route without a session: its proof is the chat platform's signature (``chat``)
    chat = [] if page.chat is None else [
        Route("/chat/actions", _guarded(page.chat), methods=["POST"])]
    return Starlette(routes=[*chat,
        Route("/", _guarded(page.cards), methods=["GET"]),
        Route("/run", _guarded(page.run), methods=["GET"]),
        Route("/card", _guarded(page.card), methods=["GET"]),
        Route("/run.json", _guarded(page.run), methods=["GET"]),
        Route("/login", _guarded(page.log_in), methods=["POST"]),
        Route("/logout", _guarded(page.log_out), methods=["POST"]),
        Route("/answer", _guarded(page.answer), methods=["POST"]),
        Route("/grants", _guarded(page.grants), methods=["GET"]),
        Route("/grants/revoke", _guarded(page.revoke), methods=["POST"]),
        Mount("/static", static, name="static"),
    ], exception_handlers={404: _not_found, 405: _not_found})
