"""What `sidekick up` prints once the system is ready: where everything is, for the port actually
used, a `sidekick chat` line that works as printed, and one line for each thing that is off
because a key or tool is missing (and what happens instead)."""

from __future__ import annotations

import json
import os
import shlex
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from services.runtime.base.errors import no_model_message
from services.runtime.base.settings import LOCAL_MODEL_NOTICE, ROLES, Settings

DEFAULT_WS = "ws://127.0.0.1:8080/ws"  # `sidekick chat`'s default


def display_host(host: str) -> str:
    """The address a client on this machine uses to reach a server bound to `host`."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def chat_command(ws_url: str) -> str:
    """`sidekick chat` as a user can paste it into another terminal: the full path of this
    environment's `sidekick` (the other terminal has no virtualenv activated), and `--url` when
    the gateway is not where `sidekick chat` looks by default."""
    script = Path(sys.executable).parent / "sidekick"
    command = (shlex.quote(str(script)) if script.is_file() else "sidekick") + " chat"
    return command if ws_url == DEFAULT_WS else f"{command} --url {ws_url}"


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return int(resp.status), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except OSError:
        return 0, b""


def service_metrics(base: str) -> list[str]:
    """The /metrics of every other service, as their answers to the readiness ping say."""
    status, body = _get(f"{base}/readyz")
    if status != 200:
        return []
    services = json.loads(body).get("services", {})
    return [
        f"{name} {url}"
        for name, health in services.items()
        for url in health.get("metrics_urls", [])
    ]


def api_docs(base: str) -> list[str]:
    """The API documents the gateway serves, if any."""
    return [f"{base}{path}" for path in ("/docs", "/openapi.json") if _get(base + path)[0] == 200]


def missing(settings: Settings, env: Mapping[str, str]) -> list[str]:
    """One line per optional thing that is off, and what happens without it."""

    def has(*names: str) -> bool:
        return all(env.get(n, "").strip() for n in names)

    lines = []
    if settings.local_model:
        lines.append(f"model       {LOCAL_MODEL_NOTICE}")
    unset = [role for role in ROLES[:-1] if not settings.llm(role).configured]
    if unset:
        lines.append(f"model       {no_model_message()}")
    if not has("BRAVE_SEARCH_API_KEY"):
        lines.append(
            "search      off: BRAVE_SEARCH_API_KEY is not set, so search and research requests "
            "end with an error naming it (nothing is made up without sources)"
        )
    if not has("SENDGRID_API_KEY", "SENDGRID_FROM_EMAIL"):
        lines.append(
            "email       not sent: SENDGRID_API_KEY and SENDGRID_FROM_EMAIL are not both set, so "
            "mail goes to the local outbox (`sidekick outbox` lists it)"
        )
    if not has("PUSHOVER_TOKEN", "PUSHOVER_USER"):
        lines.append(
            "notify      off: PUSHOVER_TOKEN and PUSHOVER_USER are not set, so the notify tool "
            "answers with an error and nothing is pushed"
        )
    if settings.cache_enabled and not settings.llm("embeddings").configured:
        lines.append(
            "cache       off: no embeddings endpoint (SIDEKICK_EMBEDDINGS_BASE_URL or the shared "
            "model settings), so repeated questions are answered afresh"
        )
    chromium = env.get("SIDEKICK_CHROMIUM_PATH", "/usr/bin/chromium")
    if not os.access(chromium, os.X_OK):
        lines.append(
            f"browser     off: no Chromium at {chromium} (install Debian's `chromium` or set "
            "SIDEKICK_CHROMIUM_PATH), so the browser tools answer with an error"
        )
    return lines


def banner(
    *, host: str, port: int, took: float, settings: Settings, env: Mapping[str, str]
) -> list[str]:
    where = display_host(host)
    base = f"http://{where}:{port}"
    ws = f"ws://{where}:{port}/ws"
    lines = [
        f"Sidekick is up in {took:.1f}s.",
        f"  web page    {base}/",
        f"  WebSocket   {ws}",
    ]
    lines += [f"  API docs    {url}" for url in api_docs(base)]
    lines.append(f"  metrics     gateway {base}/metrics")
    lines += [f"              {entry}" for entry in service_metrics(base)]
    lines.append(f"  chat        {chat_command(ws)}   (in another terminal)")
    lines += [f"  {line}" for line in missing(settings, env)]
    lines.append("Ctrl-C stops it.")
    return lines
