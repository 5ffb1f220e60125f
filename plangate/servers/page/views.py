"""The page's HTML, from the Jinja2 templates beside this module (autoescape on). Everything a
card holds comes from plans and models, so it is untrusted: each value goes through ``t``,
which shows invisible and direction-changing characters as ``\\uXXXX`` (``plans.visible``)
and HTML-escapes the rest; a value that misses it is still escaped by autoescape."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from plangate.client.api import PendingApprovals, PendingCard
from plangate.plans.model import Effect
from plangate.plans.visible import visible
from plangate.records.report import RunReport
from plangate.servers.page.answers import Given
from plangate.servers.page.options import DEFAULT_TEMPORAL_UI
from plangate.servers.page.target import target
from plangate.world.grants import Listed as ListedGrant

REFRESH_S = 20  # the cards are fetched again this often (a half-typed reason is kept)
# the cards one page shows: 10,000 cards made a 25 MB page that took seconds to render (and
# again at each refresh); a person answers the soonest to expire first, the rest on later pages
CARDS_SHOWN = 100


def t(value: object) -> Markup:
    # a reader sees every character the tool will be given, none obeyed
    return Markup(html.escape(visible(value), quote=True))


def j(value: object) -> Markup:
    return t(json.dumps(value, ensure_ascii=False, sort_keys=True))


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


def when(at: datetime) -> Markup:
    """A time to the second: UTC as served, the reader's own time zone once the page's script
    runs, the ISO value in its title."""
    utc = at.astimezone(UTC)
    iso = utc.isoformat(timespec="seconds")
    return Markup('<time datetime="{0}" title="{0}">{1} UTC</time>').format(
        iso, utc.strftime("%Y-%m-%d %H:%M:%S"))


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


_env = Environment(loader=PackageLoader("plangate.servers.page"),
                   autoescape=select_autoescape(default=True), trim_blocks=True,
                   lstrip_blocks=True)
_env.filters.update(t=t, j=j)
_env.globals.update(when=when, span=span, target=target, REFRESH_S=REFRESH_S, utc=UTC,
                    IRREVERSIBLE=(Effect.MONEY, Effect.EXTERNAL))


def render(template: str, **values: Any) -> str:
    return _env.get_template(template).render(**values)


def card_html(pending: PendingCard, csrf: str, now: datetime, links: Links | None = None) -> str:
    return render("card.html", p=pending, csrf=csrf, now=now, links=links or Links())


def one_card_page(pending: PendingCard, csrf: str, now: datetime, by: str, links: Links) -> str:
    """One card, as a notice's link shows it, with its answers."""
    return render("one_card.html", p=pending, csrf=csrf, now=now, by=by, links=links)


def login_page(problem: str | None = None, next_: str = "/") -> str:
    return render("login.html", problem=problem, next=next_)


def cards_page(pending: PendingApprovals, queue: str, csrf: str, now: datetime, by: str,
               links: Links, recent: Sequence[tuple[Given, str]] = (), page: int = 1) -> str:
    """``by``: who is logged in, and answers what they approve or reject here; ``recent``:
    the answers given here lately, each with what became of it; ``page``: which
    ``CARDS_SHOWN`` of the cards, the soonest to expire first (a page past the last: the
    last)."""
    unanswered = pending.unanswered
    last = max(1, -(-len(pending.cards) // CARDS_SHOWN))
    page = min(page, last)
    first = (page - 1) * CARDS_SHOWN
    return render("cards.html", pending=pending, queue=queue, csrf=csrf, now=now, by=by,
                  links=links, recent=recent, unanswered=", ".join(unanswered[:20])
                  + (" ..." if len(unanswered) > 20 else ""), page=page, last=last,
                  first=first, shown=pending.cards[first:first + CARDS_SHOWN])


def outcome_page(accepted: bool, headline: str, detail: str, csrf: str | None = None,
                 **after: Any) -> str:
    """``after``: what became of an answer (``run_id``, ``at``, ``became``, ``links``)."""
    return render("outcome.html", accepted=accepted, headline=headline, detail=detail,
                  csrf=csrf, **after)


def grants_page(grants: Sequence[ListedGrant], csrf: str, by: str, now: datetime) -> str:
    """The deployment's standing grants, each live one with its revoke form."""
    return render("grants.html", grants=grants, csrf=csrf, by=by, now=now)


def run_page(rep: RunReport, links: Links, csrf: str) -> str:
    """A run's report, for a person: its state, its steps, its failure, its approvals."""
    return render("run.html", rep=rep, links=links, csrf=csrf)
