"""How a process reaches NATS like a cluster client: a list of servers, a login given apart from
the URL (so every server is tried with it: the listed ones and those the cluster announces), and
TLS where configured.

`SIDEKICK_NATS_URL` may list several servers, comma-separated (`nats://a:4222,nats://b:4222`).
The login comes from the environment, a service's own variables first:

    SIDEKICK_<SERVICE>_NATS_<WHAT>, then SIDEKICK_NATS_<WHAT>, where WHAT is
    USER, PASSWORD (or PASSWORD_FILE), TOKEN (or TOKEN_FILE), CREDS (a .creds file),
    NKEY (an NKey seed file), TLS_CA, TLS_CERT, TLS_KEY.

So one environment (`sidekick up --nats-url`) can hold every service's user, and each service
picks its own. A login written inside a URL (`nats://user:pw@host:4222`) still works: it is taken
out of the URL and used for every server, like the variables.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

WHATS = (
    "USER",
    "PASSWORD",
    "PASSWORD_FILE",
    "TOKEN",
    "TOKEN_FILE",
    "CREDS",
    "NKEY",
    "TLS_CA",
    "TLS_CERT",
    "TLS_KEY",
)


def variable(what: str, service: str | None = None) -> str:
    """The environment variable of one part of a login, for one service or for all."""
    return f"SIDEKICK_{service.upper()}_NATS_{what}" if service else f"SIDEKICK_NATS_{what}"


def split_servers(url: str) -> list[str]:
    """The servers of a comma-separated list, each with a scheme (`host:4222` is `nats://`)."""
    servers = []
    for part in url.split(","):
        part = part.strip()
        if part:
            servers.append(part if "://" in part else f"nats://{part}")
    if not servers:
        raise ValueError("SIDEKICK_NATS_URL names no server")
    return servers


@dataclass(frozen=True, repr=False)
class Login:
    """Where NATS is and who this process is there. Never printed with its secrets."""

    servers: tuple[str, ...]
    user: str | None = None
    password: str | None = field(default=None)
    token: str | None = field(default=None)
    creds: str | None = None
    nkey: str | None = None
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None

    @classmethod
    def from_env(cls, url: str, env: Mapping[str, str], service: str | None = None) -> Login:
        """The login for `url` (one server or a list) from `env`, `service`'s own first."""

        owners = (service, None) if service else (None,)

        def get(what: str) -> str | None:
            for owner in owners:
                if env.get(variable(what, owner)):
                    return env[variable(what, owner)]
            return None

        def secret(what: str) -> str | None:
            # The service's own (value, then file) before the shared one (value, then file).
            for owner in owners:
                if env.get(variable(what, owner)):
                    return env[variable(what, owner)]
                path = env.get(variable(f"{what}_FILE", owner))
                if path:
                    return Path(path).read_text().strip()
            return None

        servers: list[str] = []
        in_url: tuple[str | None, str | None] = (None, None)
        for server in split_servers(url):
            parts = urlsplit(server)
            if parts.username is not None and in_url[0] is None:
                password = None if parts.password is None else unquote(parts.password)
                in_url = (unquote(parts.username), password)
            netloc = parts.netloc.rpartition("@")[2]
            servers.append(urlunsplit((parts.scheme, netloc, parts.path, "", "")))
        user, password, token = get("USER"), secret("PASSWORD"), secret("TOKEN")
        if user is None and token is None and in_url[0] is not None:
            if in_url[1] is None:
                token = in_url[0]  # nats://token@host
            else:
                user, password = in_url
        return cls(
            servers=tuple(servers),
            user=user,
            password=password,
            token=token,
            creds=get("CREDS"),
            nkey=get("NKEY"),
            tls_ca=get("TLS_CA"),
            tls_cert=get("TLS_CERT"),
            tls_key=get("TLS_KEY"),
        )

    @property
    def where(self) -> str:
        return ",".join(self.servers)

    @property
    def who(self) -> str:
        """Who this login is, for a log line (never the secret)."""
        if self.creds:
            return f"the credentials in {self.creds}"
        if self.nkey:
            return f"the NKey in {self.nkey}"
        if self.user:
            return f"user {self.user!r}"
        if self.token:
            return "a token"
        return "no login"

    @property
    def anonymous(self) -> bool:
        return not (self.user or self.token or self.creds or self.nkey)

    def options(self) -> dict[str, Any]:
        """Keyword arguments for `nats.connect` (and FastStream's NatsBroker)."""
        options: dict[str, Any] = {"servers": list(self.servers)}
        if self.user is not None:
            options["user"], options["password"] = self.user, self.password or ""
        if self.token is not None:
            options["token"] = self.token
        if self.creds is not None:
            options["user_credentials"] = self.creds
        if self.nkey is not None:
            options["nkeys_seed"] = self.nkey
        context = self.tls()
        if context is not None:
            options["tls"] = context
        return options

    def tls(self) -> ssl.SSLContext | None:
        """A TLS context when a CA or a client certificate is configured, or a `tls://` URL."""
        wanted = self.tls_ca or self.tls_cert or any(s.startswith("tls://") for s in self.servers)
        if not wanted:
            return None
        context = ssl.create_default_context(cafile=self.tls_ca)
        if self.tls_cert:
            context.load_cert_chain(self.tls_cert, self.tls_key)
        return context

    def __repr__(self) -> str:
        return f"Login({self.where!r}, {self.who})"
