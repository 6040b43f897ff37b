"""A locked-down nats-server configuration: one user per service, each allowed to publish and
subscribe only the subjects its role needs (`sidekick nats-config` prints it; `sidekick up`
runs its embedded server with it).

Passwords never appear in the file: each user's password is the nats-server variable
`$SIDEKICK_NATS_PASSWORD_<SERVICE>`, which the server reads from its environment at start. A
service connects as `nats://<service>:<password>@host:port` (its `SIDEKICK_NATS_URL`).

What every service may do besides its own subjects: the JetStream API (`$JS.API.>`, to create
the shared streams, buckets and its durable consumers, and to read KV entries), acks and flow
control replies (`$JS.ACK.>`, `$JS.FC.>`), and replies to its own requests (`_INBOX.>`).
Writes to a KV bucket are publishes on `$KV.<bucket>.>`, granted per bucket below.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

from contracts import Subjects

SERVICES = ("gateway", "frontline", "orchestrator", "evaluator", "workers")
ADMIN = "admin"

# KV buckets each service writes (reads go through the JetStream API).
KV_WRITES: dict[str, tuple[str, ...]] = {
    "gateway": ("status", "sessions", "index"),
    "frontline": ("requests", "sessions", "results", "status", "ledger", "cache"),
    "orchestrator": ("requests", "sessions", "results", "status", "ledger", "cache", "parked"),
    "evaluator": (),
    "workers": ("ledger", "status"),
}


@dataclass(frozen=True)
class Permissions:
    publish: list[str]
    subscribe: list[str]


@dataclass(frozen=True)
class TLS:
    """Server certificate and key; with `ca_file` and `verify`, clients must show one too."""

    cert_file: Path
    key_file: Path
    ca_file: Path | None = None
    verify: bool = False


@dataclass
class Credentials:
    """One password per service (and for the admin user), generated for one run."""

    passwords: dict[str, str] = field(default_factory=dict)

    @classmethod
    def generate(cls, users: tuple[str, ...] = SERVICES) -> Credentials:
        return cls({user: new_password() for user in users})

    def env(self) -> dict[str, str]:
        """The variables the nats-server process needs to resolve the config's passwords."""
        return {password_variable(user): pw for user, pw in self.passwords.items()}

    def url(self, server_url: str, user: str) -> str:
        """`server_url` with this user's credentials in it (for SIDEKICK_NATS_URL)."""
        return with_credentials(server_url, user, self.passwords[user])

    def __repr__(self) -> str:  # never print a password by accident
        return f"Credentials(users={sorted(self.passwords)})"


def new_password() -> str:
    """192 random bits. nats-server parses a variable's value like a config value, so a
    password must read as a plain string: letters and digits, starting with a letter."""
    return "sk" + secrets.token_hex(24)


def password_variable(user: str) -> str:
    return f"SIDEKICK_NATS_PASSWORD_{user.upper()}"


def with_credentials(server_url: str, user: str, password: str) -> str:
    parts = urlsplit(server_url)
    host = parts.hostname or "127.0.0.1"
    netloc = f"{quote(user, safe='')}:{quote(password, safe='')}@{host}"
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme or "nats", netloc, parts.path, "", ""))


def permissions(service: str, namespace: str) -> Permissions:
    """What one service may publish and subscribe to, under `namespace`."""
    s = Subjects(namespace)
    ns = namespace
    publish = ["$JS.API.>", "$JS.ACK.>", "$JS.FC.>", s.deadletter(service)]
    publish += [f"$KV.{s.bucket(b)}.>" for b in KV_WRITES[service]]
    subscribe = ["_INBOX.>"]
    if service == "gateway":
        publish += [s.chat_requested, s.request_answered, s.request_cancel]
        subscribe += [s.out_all]
    elif service == "frontline":
        publish += [s.request_routed, s.out_all]
        subscribe += [s.request_cancel]
    elif service == "orchestrator":
        publish += [s.worker_run_all, s.evaluator_run, s.orchestrator_decided, s.out_all]
        subscribe += [s.request_cancel, "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.>"]
    elif service == "evaluator":
        publish += [s.evaluation_completed, s.progress("*"), s.stream("*")]
        subscribe += [s.request_cancel]
    elif service == "workers":
        publish += [s.worker_completed, s.progress("*"), s.stream("*"), f"{ns}.outbox.>"]
        subscribe += [s.request_cancel]
    else:
        raise ValueError(f"unknown service {service!r}; known: {', '.join(SERVICES)}")
    return Permissions(publish=publish, subscribe=subscribe)


def render(
    namespace: str,
    *,
    admin: bool = False,
    tls: TLS | None = None,
    passwords: dict[str, str] | None = None,
) -> str:
    """The nats-server configuration text. Passwords are `$SIDEKICK_NATS_PASSWORD_<USER>`
    references unless `passwords` gives literal ones (only for a file nobody else can read)."""

    def q(value: str) -> str:
        return json.dumps(value)  # a JSON string is a valid nats-server config string

    def password(user: str) -> str:
        if passwords is not None:
            return q(passwords[user])
        return "$" + password_variable(user)

    lines = [
        "# Sidekick's NATS users: one per service, each limited to its own subjects.",
        "# Generated by `sidekick nats-config`; passwords come from the environment.",
        f"# Namespace: {namespace}",
        "",
    ]
    if tls is not None:
        lines += ["tls {", f"  cert_file: {q(str(tls.cert_file))}"]
        lines += [f"  key_file: {q(str(tls.key_file))}"]
        if tls.ca_file is not None:
            lines += [f"  ca_file: {q(str(tls.ca_file))}"]
        if tls.verify:
            lines += ["  verify: true"]
        lines += ["  timeout: 2", "}", ""]
    lines += ["authorization {", "  users = ["]
    for service in SERVICES:
        perms = permissions(service, namespace)
        lines += [
            "    {",
            f"      user: {q(service)}",
            f"      password: {password(service)}",
            "      permissions: {",
            f"        publish: {{ allow: {json.dumps(perms.publish)} }}",
            f"        subscribe: {{ allow: {json.dumps(perms.subscribe)} }}",
            "      }",
            "    }",
        ]
    if admin:
        lines += [
            "    # Operators (the `nats` CLI, backups); keep this password offline.",
            f"    {{ user: {q(ADMIN)}, password: {password(ADMIN)} }}",
        ]
    lines += ["  ]", "}", ""]
    return "\n".join(lines)


def write_config(path: Path, namespace: str, *, admin: bool = False) -> Path:
    """Write the config (no secrets in it) with owner-only permissions."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(namespace, admin=admin))
    path.chmod(0o600)
    return path
