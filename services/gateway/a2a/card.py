"""The agent card, at `/.well-known/agent-card.json` (1.0) and `/.well-known/agent.json` (the
older path): one skill per worker kind, JSON-RPC at `/a2a` (1.0 and 0.3), streaming on, push
notifications and the extended card off, and the gateway's bearer tokens when it has them."""

from __future__ import annotations

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
from contracts.decisions import WORKER_DESCRIPTIONS

VERSION = "0.1.0"
PATH = "/a2a"
EXAMPLES: dict[str, list[str]] = {
    "SEARCH": ["What is the latest news about the James Webb telescope?"],
    "RESEARCH": ["Research the trade-offs of heat pumps for an old house, with sources."],
    "EMAIL": ["Email alice@example.com a short summary of our meeting notes."],
    "GENERAL": ["Explain the difference between a process and a thread."],
    "TOOLS": ["Run Python to compute the 30th Fibonacci number.", "List the files in my folder."],
}


def card(base_url: str, auth_required: bool) -> AgentCard:
    url = base_url.rstrip("/") + PATH
    skills = [
        AgentSkill(
            id=kind.lower(),
            name=kind.title(),
            description=description,
            tags=[kind.lower()],
            examples=EXAMPLES.get(kind, []),
        )
        for kind, description in WORKER_DESCRIPTIONS.items()
        if kind != "NONE"
    ]
    schemes = requirements = None
    if auth_required:
        bearer = HttpAuthScheme(
            scheme="bearer", description="A token of the gateway's SIDEKICK_AUTH_TOKENS."
        )
        schemes = {"bearer": SecurityScheme(http_auth_security_scheme=bearer)}
        requirements = [SecurityRequirement(schemes={"bearer": StringList(scopes=[])})]
    return AgentCard(
        name="Sidekick",
        description="A multi-agent assistant: it answers, or routes the task to a worker (web "
        "search, research, email, tools), checks the work against success criteria, retries, "
        "and asks when it must (INPUT_REQUIRED; answer with the task's id).",
        version=VERSION,
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0"),
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="0.3"),
        ],
        capabilities=AgentCapabilities(
            streaming=True, push_notifications=False, extended_agent_card=False
        ),
        security_schemes=schemes,
        security_requirements=requirements,
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "text/markdown", "application/json"],
        skills=skills,
    )
