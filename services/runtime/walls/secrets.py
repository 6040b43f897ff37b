"""Which secret each process may hold. `sidekick up` builds every child's environment from this
table (the non-secret variables, plus only its role's secrets), so a compromised service holds
no key it has no use for; deploy/ gives each Deployment the same, from the Secret.

A variable is a secret when its name says so (`*_API_KEY`, `*_TOKEN(S)`, `*_PASSWORD*`,
`*_SECRET*`, the auth token file, Pushover's user key, the OTLP headers); everything else (URLs,
models, limits, paths) is configuration every process may see.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

LLM_ROLES = {
    "frontline": ("FRONTLINE",),
    "orchestrator": ("ORCHESTRATOR", "EMBEDDINGS"),
    "evaluator": ("EVALUATOR",),
    "workers": ("WORKER",),
}
# Shared fallbacks of every model role's key (and of every role's fallback endpoint's key).
SHARED_LLM_KEYS = ("SIDEKICK_LLM_API_KEY", "OPENAI_API_KEY", "SIDEKICK_LLM_FALLBACK_API_KEY")
ROLE_SECRETS: dict[str, tuple[str, ...]] = {
    "gateway": ("SIDEKICK_AUTH_TOKENS", "SIDEKICK_AUTH_TOKENS_FILE"),
    "workers": ("BRAVE_SEARCH_API_KEY", "SENDGRID_API_KEY", "PUSHOVER_TOKEN", "PUSHOVER_USER"),
}
# Every process exports traces, so every process gets the collector's credentials.
SHARED_SECRETS = ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS")
_SECRET = re.compile(
    r"(_API_KEY|_TOKEN|_TOKENS|_TOKENS_FILE|PASSWORD|SECRET)|^PUSHOVER_USER$|_HEADERS$"
)


def is_secret(name: str) -> bool:
    return bool(_SECRET.search(name.upper()))


# A NATS login's secrets (services/runtime/bus/natslogin.py): each service may hold its own
# (`SIDEKICK_<SERVICE>_NATS_PASSWORD`, ...) and the shared one, never another service's.
NATS_LOGIN_SECRETS = ("PASSWORD", "PASSWORD_FILE", "TOKEN", "TOKEN_FILE")


def allowed(service: str) -> set[str]:
    """The secret variables `service` may have."""
    names = set(ROLE_SECRETS.get(service, ())) | set(SHARED_SECRETS)
    for what in NATS_LOGIN_SECRETS:
        names |= {f"SIDEKICK_NATS_{what}", f"SIDEKICK_{service.upper()}_NATS_{what}"}
    for role in LLM_ROLES.get(service, ()):
        if role == "EMBEDDINGS":  # one endpoint, no fallback (other vectors would not match)
            names.add("SIDEKICK_EMBEDDINGS_API_KEY")
        else:
            names |= {f"SIDEKICK_{role}_LLM_API_KEY", f"SIDEKICK_{role}_LLM_FALLBACK_API_KEY"}
        names |= set(SHARED_LLM_KEYS)
    return names


def environment(service: str, source: Mapping[str, str]) -> dict[str, str]:
    """`source` without the secrets `service` may not have."""
    keep = allowed(service)
    return {k: v for k, v in source.items() if not is_secret(k) or k in keep}
