"""Dedupe keys no other role can guess: a role seals its keys with its own NATS login secret
(the password, token, creds file or NKey seed that its replicas share and no other role holds),
so no other role can publish first under one of them and have the real message dropped by
JetStream as a duplicate (the WORK stream de-duplicates across all its subjects)."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
from pathlib import Path

from services.runtime.base.settings import Settings
from services.runtime.bus.natslogin import Login


def role_secret(settings: Settings, service: str) -> bytes:
    """This process's login secret; empty without one (no NATS users: no role is kept from any
    subject then, so there is nothing to seal against)."""
    login = Login.from_env(settings.nats_url, os.environ, service)
    for value in (login.password, login.token):
        if value:
            return value.encode()
    for path in (login.creds, login.nkey):
        if path:
            with contextlib.suppress(OSError):
                return Path(path).read_bytes()
    return b""


def seal(secret: bytes, service: str, key: str) -> str:
    if not secret:
        return key
    mac = hmac.new(secret, f"{service}:{key}".encode(), hashlib.sha256)
    return f"{key}:{mac.hexdigest()[:32]}"
