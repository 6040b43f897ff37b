"""The hosts the browser opened in one run, and the operator's ruling on opening another
(`browser.new_domain`): shared by the approval gate (tools/gate.py), which rules on
`browser_navigate`, and the browser (tools/navgate.py), which rules on every other way a page
can leave for another host (a link, a form, a script, an HTTP redirect, a pop-up window).

A host is the URL's host name, lower-cased, without a port, a trailing dot or a leading `www.`.
It counts as opened once a navigation to it was let through: by an `allow`, or by a
`browser_navigate` the gate let run (allowed or approved). A navigation to a host not opened is,
under `allow`, let through (and the host counts as opened); under `ask` or `deny`, stopped
before anything is sent to it, and the model is told why (`Blocked.text`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

from services.runtime.approvals.policy import Ruling

NEW_DOMAIN = "browser.new_domain"
# A run without an approval gate (the browser's own tests, tools used outside the worker).
UNGATED = Ruling("allow", "no approval policy applies to this run")

Via = Literal["page", "redirect", "popup"]
_VIA = {
    "page": "the page (a link, a form or a script) led there",
    "redirect": "an HTTP redirect led there",
    "popup": "the page tried to open it in a new window",
}


def host_of(url: str) -> str | None:
    """The host a URL opens, as `browser.new_domain` counts hosts; None if it has none."""
    try:
        host = urlsplit(url.strip()).hostname
    except ValueError:
        return None
    if not host:
        return None
    host = host.rstrip(".").lower()
    return host.removeprefix("www.") or None


@dataclass(frozen=True)
class Blocked:
    """A navigation the browser stopped: nothing was sent to its host."""

    url: str
    host: str
    via: Via
    ruling: Ruling

    def text(self) -> str:
        """What the model reads: what was not opened, why, and what it may do instead."""
        head = f"The browser did not open {self.url}: {_VIA[self.via]}"
        if self.via == "popup":
            return (
                f"{head}, and new windows are not opened while the operator's approval policy "
                f"rules on new hosts. Nothing was loaded from it. To read it, call "
                f"browser_navigate with {self.url}."
            )
        head += f", to {self.host}, a host not opened in this run. Nothing was loaded from it."
        if self.ruling.decision == "deny":
            why = self.ruling.reason
            return f"{head} The operator's approval policy forbids opening a new host ({why})."
        return (
            f"{head} The operator's approval policy asks a person before the browser opens a "
            f"new host: to go there, call browser_navigate with {self.url}, and a person will be "
            "asked to approve it."
        )


@dataclass
class Hosts:
    """One run's opened hosts and the policy's ruling on a new one."""

    ruling: Ruling = UNGATED
    opened: set[str] = field(default_factory=set)

    @property
    def gated(self) -> bool:
        """Whether a navigation to a new host may be stopped (the ruling is not `allow`)."""
        return self.ruling.decision != "allow"

    def check(self, url: str, via: Via) -> Blocked | None:
        """None when a navigation to `url` may go on (its host is opened, or now opened by an
        `allow`, or it has none); otherwise why it may not."""
        host = host_of(url)
        if host is None or host in self.opened:
            return None
        if not self.gated:
            self.opened.add(host)
            return None
        return Blocked(url, host, via, self.ruling)
