"""Which secret each process may hold. `sidekick up` builds every child's environment from one
explicit list (every setting, and of the secrets only its role's), so a
compromised service holds no key it has no use for; deploy/ gives each Deployment the same, from
the Secret.

The list is explicit, never guessed from a variable's name (`SIDEKICK_BUDGET_DAILY_TOKENS` is a
limit every process reads, not a secret): the settings classes mark their secret fields with the
processes that read them (`secret(...)`, services/runtime/base/settings.py), and `BY_HAND` names
the secrets read without a settings class — a NATS login's parts (each service its own, the
shared one for all), the OpenTelemetry exporter's headers, the command-line client's token,
nats-server's own passwords. Everything else Sidekick reads (every `SIDEKICK_*`, `OTEL_*` and
each settings class's variable) is configuration, and every process gets it.

A variable Sidekick never reads (the shell's PATH, HOME, a proxy) passes as it is, unless it is
some other program's credential (`AWS_SECRET_ACCESS_KEY`, `GITHUB_TOKEN`, an SSH agent): no
Sidekick process reads those, so holding them back loses no setting.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pydantic_settings import BaseSettings

from services.runtime.base.children import SERVICES
from services.runtime.base.settings import secrets_of, variables_of

# The processes `sidekick up` starts besides the services.
NATS_SERVER = "nats-server"
LOCAL_MODEL = "local-model"
PROCESSES = (*SERVICES, NATS_SERVER, LOCAL_MODEL)

# The parts of a NATS login that are secrets (services/runtime/bus/natslogin.py reads them, a
# service's own `SIDEKICK_<SERVICE>_NATS_<PART>` before the shared `SIDEKICK_NATS_<PART>`): the
# files too, since each names a secret this process may read. USER and the TLS CA and client
# certificate are configuration.
NATS_LOGIN_SECRETS = (
    "PASSWORD",
    "PASSWORD_FILE",
    "TOKEN",
    "TOKEN_FILE",
    "CREDS",
    "NKEY",
    "TLS_KEY",
)
# The users of a generated nats-server configuration, whose passwords it reads from
# `SIDEKICK_NATS_PASSWORD_<USER>` (services/runtime/bus/natsauth.py, natscluster.py).
NATS_USERS = (*SERVICES, "admin", "route")


def _by_hand() -> dict[str, tuple[str, ...]]:
    holders: dict[str, tuple[str, ...]] = {
        # Every process exports traces, so every service gets the collector's credentials.
        "OTEL_EXPORTER_OTLP_HEADERS": SERVICES,
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS": SERVICES,
        # `sidekick chat`'s and `outbox`'s token, and `sidekick eval --judge`'s key: no service
        # reads them.
        "SIDEKICK_TOKEN": (),
        "SIDEKICK_JUDGE_LLM_API_KEY": (),
    }
    for part in NATS_LOGIN_SECRETS:
        holders[f"SIDEKICK_NATS_{part}"] = SERVICES
        for service in SERVICES:
            holders[f"SIDEKICK_{service.upper()}_NATS_{part}"] = (service,)
        holders[f"SIDEKICK_ADMIN_NATS_{part}"] = ()  # `up`'s own bootstrap step only
    for user in NATS_USERS:
        # An operator's server's; `up` gives its own nats-server passwords made for the run.
        holders[f"SIDEKICK_NATS_PASSWORD_{user.upper()}"] = ()
    return holders


BY_HAND = _by_hand()

# Other programs' credentials, among the variables Sidekick does not read (see above).
_FOREIGN_CREDENTIAL = re.compile(
    r"(^|_)(KEY|TOKEN|TOKENS|SECRET|PASSWORD|PASSWD|CREDENTIALS?|AUTH_SOCK)(_|$)|API_?KEY|SECRET"
)


@dataclass(frozen=True)
class SecretList:
    """Every secret variable and the processes that may hold it; `settings`: the variables the
    settings classes read that are not `SIDEKICK_*` (a provider's own names)."""

    holders: Mapping[str, frozenset[str]]
    settings: frozenset[str]

    @classmethod
    def of(cls, classes: Iterable[type[BaseSettings]]) -> SecretList:
        """The list from the settings classes' marked fields and `BY_HAND`."""
        holders = {name: frozenset(who) for name, who in BY_HAND.items()}
        settings: set[str] = set()
        for settings_class in classes:
            for name, who in secrets_of(settings_class).items():
                holders[name] = holders.get(name, frozenset()) | frozenset(who)
            read = {n for names in variables_of(settings_class).values() for n in names}
            settings |= {n for n in read if not n.startswith("SIDEKICK_")}
        unknown = {p for who in holders.values() for p in who} - set(PROCESSES)
        assert not unknown, f"secrets given to no such process: {sorted(unknown)}"
        return cls(holders, frozenset(settings))

    def is_secret(self, name: str) -> bool:
        return name in self.holders

    def sidekicks(self, name: str) -> bool:
        """Whether a Sidekick process reads `name` (a setting or a secret of its own)."""
        return (
            name.startswith(("SIDEKICK_", "OTEL_")) or name in self.settings or self.is_secret(name)
        )

    def allowed(self, process: str) -> set[str]:
        """The secret variables `process` may have."""
        return {name for name, who in self.holders.items() if process in who}

    def environment(self, process: str, source: Mapping[str, str]) -> dict[str, str]:
        """`source` as `process` may see it: every setting, its own secrets, none other's."""
        out: dict[str, str] = {}
        for name, value in source.items():
            if self.is_secret(name):
                if process in self.holders[name]:
                    out[name] = value
            elif self.sidekicks(name) or not _FOREIGN_CREDENTIAL.search(name.upper()):
                out[name] = value
        return out


# What nats-server needs of its parent's environment: its config names no other variable but the
# passwords `up` hands it (services/cli/up.py), and it holds no other secret.
NATS_SERVER_BASICS = ("PATH", "HOME", "TZ")


def nats_server_environment(
    source: Mapping[str, str], passwords: Mapping[str, str]
) -> dict[str, str]:
    """nats-server's environment: the basics of `source`, and the passwords its config reads."""
    env = {k: source[k] for k in NATS_SERVER_BASICS if k in source}
    env.update(passwords)
    return env
