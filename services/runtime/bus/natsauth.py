"""A locked-down nats-server configuration: one user per service, each allowed exactly what its
role in services/runtime/bus/topology.py needs (`sidekick nats-config` prints it; `sidekick up` runs
its embedded server with it), and an admin user for the bootstrap step.

Passwords never appear in the file: each user's password is the nats-server variable
`$SIDEKICK_NATS_PASSWORD_<USER>`, which the server reads from its environment at start. A
service connects as `nats://<service>:<password>@host:port` (its `SIDEKICK_NATS_URL`).

A service user may, besides its core subjects: fetch from and ack its own durable consumers
(`$JS.API.CONSUMER.INFO|MSG.NEXT.<stream>.<its consumer>`, `$JS.ACK.<stream>.<its consumer>.>`),
read and write the KV buckets of its role (`$JS.API.STREAM.INFO|MSG.GET.KV_<bucket>`,
`$KV.<bucket>.>`), follow the buckets it watches (an ephemeral, filtered consumer on that bucket
only), read the streams its role reads, and receive replies on its own inbox prefix
(`_INBOX_<service>.>`, not `_INBOX.>`). It may not create, update, delete or purge a stream, a
bucket or a durable consumer: those subjects are not granted, and are denied outright besides.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

from contracts import Subjects
from services.runtime.bus import topology

SERVICES = topology.SERVICES
ADMIN = "admin"

# Never granted to a service, whatever its allow list says (defence in depth).
DENIED_TO_SERVICES = [
    "$JS.API.STREAM.CREATE.>",
    "$JS.API.STREAM.UPDATE.>",
    "$JS.API.STREAM.DELETE.>",
    "$JS.API.STREAM.PURGE.>",
    "$JS.API.STREAM.MSG.DELETE.>",
    "$JS.API.STREAM.RESTORE.>",
    "$JS.API.STREAM.SNAPSHOT.>",
    "$JS.API.CONSUMER.DELETE.>",
    "$JS.API.CONSUMER.DURABLE.CREATE.>",
    "$JS.API.ACCOUNT.PURGE.>",
]


@dataclass(frozen=True)
class Permissions:
    publish: list[str]
    subscribe: list[str]
    deny_publish: list[str] = field(default_factory=list)


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


def inbox_prefix(service: str) -> str:
    """The reply inbox prefix of a service's connection (its user may read no other inbox)."""
    return f"_INBOX_{service}"


def permissions(service: str, namespace: str) -> Permissions:
    """What one service may publish and subscribe to, under `namespace` (see the docstring)."""
    if service not in SERVICES:
        raise ValueError(f"unknown service {service!r}; known: {', '.join(SERVICES)}")
    s = Subjects(namespace)
    role = topology.roles(s)[service]
    api = "$JS.API"
    publish = [s.deadletter(service), *role.publish]
    for stream, durable in role.durables(s):
        publish += [
            f"{api}.CONSUMER.INFO.{stream}.{durable}",
            f"{api}.CONSUMER.MSG.NEXT.{stream}.{durable}",
            f"$JS.ACK.{stream}.{durable}.>",
        ]
    for bucket in sorted({*role.reads, *role.writes, *role.watches}):
        stream = f"KV_{s.bucket(bucket)}"
        publish += [f"{api}.STREAM.INFO.{stream}"]
        if bucket in role.reads:
            publish += [f"{api}.STREAM.MSG.GET.{stream}", f"{api}.DIRECT.GET.{stream}.>"]
        if bucket in role.writes:
            publish += [f"$KV.{s.bucket(bucket)}.>"]
        if bucket in role.watches:
            # A watcher is an ordered, ephemeral consumer on this bucket's stream, and nothing
            # else: `CONSUMER.CREATE.<stream>` alone, where the server refuses a durable name.
            # (`CONSUMER.CREATE.<stream>.<name>` would create a durable one.)
            publish += [
                f"{api}.CONSUMER.CREATE.{stream}",
                f"{api}.CONSUMER.INFO.{stream}.*",
            ]
    for stream in role.reads_streams:
        publish += [f"{api}.STREAM.INFO.{stream}", f"{api}.STREAM.MSG.GET.{stream}"]
    for stream in role.follows_streams:
        # An ordered consumer: ephemeral, created per follower, answered by flow control.
        publish += [
            f"{api}.CONSUMER.CREATE.{stream}",
            f"{api}.CONSUMER.CREATE.{stream}.>",
            f"{api}.CONSUMER.INFO.{stream}.*",
            f"$JS.FC.{stream}.>",
        ]
    subscribe = [f"{inbox_prefix(service)}.>", *role.subscribe]
    return Permissions(publish=publish, subscribe=subscribe, deny_publish=DENIED_TO_SERVICES)


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
        lines += _user(service, password(service), permissions(service, namespace))
    if admin:
        lines += [
            "    # The bootstrap step (streams, buckets, consumers) and operators (the `nats`",
            "    # CLI, backups); keep this password away from the services.",
            f"    {{ user: {q(ADMIN)}, password: {password(ADMIN)} }}",
        ]
    lines += ["  ]", "}", ""]
    return "\n".join(lines)


def _user(user: str, password: str, perms: Permissions) -> list[str]:
    return [
        "    {",
        f"      user: {json.dumps(user)}",
        f"      password: {password}",
        "      permissions: {",
        f"        publish: {{ allow: {json.dumps(perms.publish)}, "
        f"deny: {json.dumps(perms.deny_publish)} }}",
        f"        subscribe: {{ allow: {json.dumps(perms.subscribe)} }}",
        "      }",
        "    }",
    ]


def shared_user(service: str, namespace: str) -> str:
    """A service's user name on a server that several namespaces share."""
    return f"{service}.{namespace}"


def render_shared(namespaces: list[str], passwords: dict[str, str]) -> str:
    """The configuration of one server shared by several namespaces (several systems, or the
    test suite's): a user per service per namespace (`shared_user`), each held to its own
    namespace, and the admin user. `passwords` (literal, so the file must stay private) are by
    user name."""
    lines = ["# Sidekick's NATS users for several namespaces.", "authorization {", "  users = ["]
    for namespace in namespaces:
        for service in SERVICES:
            user = shared_user(service, namespace)
            lines += _user(user, json.dumps(passwords[user]), permissions(service, namespace))
    lines += [f"    {{ user: {json.dumps(ADMIN)}, password: {json.dumps(passwords[ADMIN])} }}"]
    lines += ["  ]", "}", ""]
    return "\n".join(lines)


def write_config(path: Path, namespace: str, *, admin: bool = False) -> Path:
    """Write the config (no secrets in it) with owner-only permissions."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(namespace, admin=admin))
    path.chmod(0o600)
    return path
