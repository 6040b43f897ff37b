"""The agent card, at `/.well-known/agent-card.json` (1.0), `/.well-known/agent.json` (the
older path) and `/a2a/.well-known/agent-card.json` (beside the endpoint), built from what this
instance has on (`Offer`): a skill for direct answers and one per worker kind enabled
(`SIDEKICK_WORKERS`), the tools skill naming only the tool families that work here (browsing
when Chromium is installed, tools of MCP servers when some are configured), the email skill
saying that each email waits for the sender's approval when the approval policy asks, push
notifications when they are on, JSON-RPC at `/a2a` (1.0 and 0.3), and the bearer scheme when
the gateway has tokens.

The card is public: its words name no setting, secret, host or file of the server (the A2A
conformance kit scans it for such words, and so does tests/protocols/test_a2a_card.py).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic_settings import BaseSettings, SettingsConfigDict

from contracts.a2a import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HttpAuthScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from services.runtime.approvals.policy import Policy, PolicyError
from services.runtime.base.settings import Settings

log = logging.getLogger("sidekick.gateway")

VERSION = "0.1.0"
PATH = "/a2a"


class WorkerSide(BaseSettings):
    """What the workers read that the card tells of (the same variables; none is a secret):
    the approval policy, Chromium's path, the MCP servers' file."""

    model_config = SettingsConfigDict(env_prefix="SIDEKICK_", extra="ignore")

    approvals: str = ""
    approval_policy: str | None = None
    chromium_path: str = "/usr/bin/chromium"
    mcp_config: Path | None = None


@dataclass(frozen=True)
class Offer:
    """What this instance offers another agent."""

    kinds: tuple[str, ...] = ("GENERAL", "SEARCH", "RESEARCH", "EMAIL", "TOOLS")
    browsing: bool = False
    mcp: bool = False
    push: bool = False
    email: str = "ask"  # the approval policy's decision on sending an email
    notify: str = "ask"  # and on a push notification to the user's phone

    @classmethod
    def of(cls, settings: Settings, side: WorkerSide | None = None) -> Offer:
        side = side or WorkerSide()
        try:
            policy = Policy.configured(side.approvals, side.approval_policy, settings.operators)
            email = policy.rule_for("email.send").decision
            notify = policy.rule_for("notify").decision
        except (PolicyError, OSError) as exc:  # the workers refuse to start on it: say "asks"
            log.warning("the card assumes that actions ask: the approval policy fails (%s)", exc)
            email = notify = "ask"
        kinds = tuple(k for k in settings.worker_kinds if k != "NONE")
        return cls(
            kinds=kinds,
            browsing="TOOLS" in kinds and Path(side.chromium_path).is_file(),
            mcp="TOOLS" in kinds and side.mcp_config is not None,
            push=settings.a2a_push,
            email=email,
            notify=notify,
        )


def _skill(
    id_: str, name: str, description: str, tags: Sequence[str], examples: Sequence[str]
) -> AgentSkill:
    return AgentSkill(
        id=id_, name=name, description=description, tags=list(tags), examples=list(examples)
    )


# The skills every deployment describes alike, each with the worker kind it needs (None: none).
_ALIKE: tuple[tuple[str | None, tuple[str, str, str, tuple[str, ...], tuple[str, ...]]], ...] = (
    (
        None,
        (
            "general",
            "General",
            "Writing, reasoning, explaining and summarising: answered directly, or by a worker "
            "whose answer is checked against success criteria and retried when it falls short.",
            ("general", "writing", "reasoning"),
            ("Explain the difference between a process and a thread.",),
        ),
    ),
    (
        "SEARCH",
        (
            "search",
            "Web search",
            "Current facts, news and prices from a web search; the answer cites its sources "
            "(a data part lists them).",
            ("search", "news", "sources"),
            ("What happened at the most recent Mars rover landing?",),
        ),
    ),
    (
        "RESEARCH",
        (
            "research",
            "Research",
            "Multi-step research: a plan, several searches, a synthesis with sources, and a "
            "check that the sources are live. It may ask first what it depends on "
            "(INPUT_REQUIRED).",
            ("research", "sources", "report"),
            ("Research the trade-offs of heat pumps for an old house, with sources.",),
        ),
    ),
)


def skills(offer: Offer) -> list[AgentSkill]:
    found = [_skill(*alike) for kind, alike in _ALIKE if kind is None or kind in offer.kinds]
    if "EMAIL" in offer.kinds and offer.email != "deny":
        asks = {
            "ask": " Every email waits for your approval before it is sent: the task is "
            "INPUT_REQUIRED with the exact message; answer yes or no with its taskId.",
            "allow": " An email to an address you did not write in the conversation waits for "
            "your approval (INPUT_REQUIRED; answer yes or no with its taskId).",
        }[offer.email]
        found.append(
            _skill(
                "email",
                "Email",
                "Compose and send an email: to whom, the subject and what it says." + asks,
                ["email", "approval"],
                ["Email alice@example.com a short summary of our meeting notes."],
            )
        )
    if "TOOLS" in offer.kinds:
        families = ["run Python in a sandbox", "read and write files in the conversation's folder"]
        families += ["look things up on Wikipedia"]
        if offer.browsing:
            families.append("browse web pages")
        if offer.notify != "deny":
            ask = " (each one waits for your approval)" if offer.notify == "ask" else ""
            families.append(f"send a push notification to your phone{ask}")
        if offer.mcp:
            families.append("use the tools of the MCP servers configured here")
        examples = [
            "Run Python to compute the 30th Fibonacci number.",
            "List the files in my folder.",
        ]
        if offer.browsing:
            examples.append("Open example.com and tell me what the page says.")
        found.append(
            _skill(
                "tools",
                "Tools",
                "Work done with tools: " + "; ".join(families) + ".",
                ["tools", "python", "files"] + (["browser"] if offer.browsing else []),
                examples,
            )
        )
    return found


def card(base_url: str, auth_required: bool, offer: Offer) -> AgentCard:
    url = base_url.rstrip("/") + PATH
    schemes = requirements = None
    if auth_required:
        bearer = HttpAuthScheme(
            scheme="bearer", description="The key the operator of this Sidekick gave you."
        )
        schemes = {"bearer": SecurityScheme(http_auth_security_scheme=bearer)}
        requirements = [SecurityRequirement(schemes={"bearer": StringList(scopes=[])})]
    push = " Long tasks can notify a webhook of yours (push notifications)." if offer.push else ""
    return AgentCard(
        name="Sidekick",
        description="A multi-agent assistant: it answers, or hands the task to a worker, checks "
        "the work against success criteria, retries, and asks when it must (INPUT_REQUIRED: "
        "answer with the task's taskId; a message without one starts a new task)." + push,
        version=VERSION,
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0"),
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="0.3"),
        ],
        capabilities=AgentCapabilities(
            streaming=True, push_notifications=offer.push, extended_agent_card=False
        ),
        security_schemes=schemes,
        security_requirements=requirements,
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "text/markdown", "application/json"],
        skills=skills(offer),
    )
