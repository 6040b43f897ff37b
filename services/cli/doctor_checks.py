"""`sidekick doctor`'s checks of everything but the models: Brave, SendGrid, Pushover, the
Python sandbox, Chromium, the MCP servers and NATS. Each is one `Row`; none sends mail or a
notification, and no MCP tool is called (each server is started, listed and stopped)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from services.runtime.base.settings import Settings
from services.workers.settings import WorkerSettings
from services.workers.tools.settings import ToolsSettings


@dataclass
class Row:
    name: str
    ok: bool | None  # None: not checked / not in use
    detail: str
    fix: str = ""  # the variable(s) to set when not ok
    needed: bool = False  # the configuration uses it: a ✗ here is broken, not just missing

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


async def brave(kinds: list[str], seconds: float) -> Row:
    settings = WorkerSettings()
    users = [k for k in kinds if k in ("SEARCH", "RESEARCH")]
    needed = bool(users)
    verb = "needs" if len(users) == 1 else "need"
    uses = f"{' and '.join(users)} {verb} it" if users else "web_search of TOOLS uses it"
    fix = "BRAVE_SEARCH_API_KEY"
    if not settings.brave_api_key:
        return Row("Brave Search", False, f"no key: {uses}", fix, needed)
    url = settings.brave_base_url.rstrip("/") + "/res/v1/web/search"
    headers = {"X-Subscription-Token": settings.brave_api_key, "Accept": "application/json"}
    try:
        async with httpx.AsyncClient(timeout=seconds) as http:
            resp = await http.get(url, params={"q": "sidekick", "count": 1}, headers=headers)
    except httpx.HTTPError as exc:
        return Row("Brave Search", False, f"no answer: {exc!r}", "SIDEKICK_BRAVE_BASE_URL", needed)
    if resp.status_code == 200:
        return Row("Brave Search", True, "key accepted, one query answered", "", needed)
    if resp.status_code == 429:
        return Row("Brave Search", True, "key accepted (rate limited just now)", "", needed)
    return Row(
        "Brave Search", False, f"query refused: {resp.status_code} {_error(resp)}", fix, needed
    )


def _error(resp: httpx.Response) -> str:
    try:
        body = resp.json()
    except ValueError:
        return resp.text[:120]
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("detail") or error.get("message") or error.get("code") or "")[:120]
    if isinstance(body, dict) and body.get("errors"):
        return "; ".join(str(e) for e in body["errors"])[:120]
    return json.dumps(body)[:120]


def sendgrid(kinds: list[str]) -> Row:
    settings = WorkerSettings()
    if settings.sendgrid_api_key:
        sender = settings.sendgrid_from_email
        if not sender:
            return Row(
                "SendGrid", False, "key set but no sender address", "SENDGRID_FROM_EMAIL", True
            )
        return Row("SendGrid", True, f"key present, mail sent as {sender} (none sent now)")
    where = "EMAIL's mail goes" if "EMAIL" in kinds else "mail would go"
    return Row("SendGrid", False, f"no key: {where} to the local outbox", "SENDGRID_API_KEY")


async def pushover(seconds: float) -> Row:
    """Validates the token and user key with Pushover's users/validate call: nothing is sent."""
    settings = ToolsSettings()
    if not (settings.pushover_token and settings.pushover_user):
        return Row("Pushover", False, "not set: notify is off", "PUSHOVER_TOKEN, PUSHOVER_USER")
    url = settings.pushover_base_url.rstrip("/") + "/1/users/validate.json"
    form = {"token": settings.pushover_token, "user": settings.pushover_user}
    try:
        async with httpx.AsyncClient(timeout=seconds) as http:
            resp = await http.post(url, data=form)
    except httpx.HTTPError as exc:
        return Row("Pushover", False, f"no answer: {exc!r}", "SIDEKICK_PUSHOVER_BASE_URL", True)
    if resp.status_code == 200:
        return Row("Pushover", True, "token and user key accepted (nothing sent)", "", True)
    return Row(
        "Pushover",
        False,
        f"refused: {resp.status_code} {_error(resp)}",
        "PUSHOVER_TOKEN, PUSHOVER_USER",
        True,
    )


async def sandbox(kinds: list[str], data_dir: Path) -> Row:
    """bubblewrap found and working: the tools worker's own probe (one sandboxed `print`)."""
    from services.workers.tools.catalog import python_sandbox

    status = await python_sandbox(ToolsSettings(), data_dir).status()
    if status.available:
        return Row("Python sandbox", True, status.detail)
    # Not needed: without it python_run is off and says why; nothing else depends on it.
    users = "python_run of TOOLS is off" if "TOOLS" in kinds else "python_run would be off"
    return Row("Python sandbox", False, f"{users}: {status.detail}", "SIDEKICK_BWRAP")


async def chromium(seconds: float) -> Row:
    path = ToolsSettings().chromium_path
    fix = "SIDEKICK_CHROMIUM_PATH"
    if not os.access(path, os.X_OK):
        return Row("Chromium", False, f"{path} not found: browser_* tools are off", fix)
    try:
        proc = await asyncio.create_subprocess_exec(
            path,
            "--version",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        async with asyncio.timeout(seconds):
            out, _ = await proc.communicate()
    except (OSError, TimeoutError) as exc:
        return Row("Chromium", False, f"{path} does not start: {exc!r}", fix)
    version = out.decode(errors="replace").strip().splitlines()
    if proc.returncode != 0 or not version:
        return Row("Chromium", False, f"{path} --version failed ({proc.returncode})", fix)
    return Row("Chromium", True, version[-1])


async def mcp_servers(kinds: list[str]) -> list[Row]:
    """Each configured MCP server: does it start (or answer), and how many tools it offers."""
    from services.workers.tools.mcp_config import McpConfigError, load
    from services.workers.tools.mcp_link import McpStartError, ServerLink, Timeouts
    from services.workers.tools.mcp_transport import quiet_sdk_logs

    settings = ToolsSettings()
    fix = "SIDEKICK_MCP_CONFIG"
    needed = "TOOLS" in kinds  # only the TOOLS worker offers their tools
    if settings.mcp_config is None:
        return [Row("MCP servers", None, "none configured", fix)]
    try:
        config = load(settings.mcp_config)
    except McpConfigError as exc:
        return [Row("MCP servers", False, str(exc), fix, needed)]
    quiet_sdk_logs()
    timeouts = Timeouts(connect=settings.mcp_connect_timeout, call=settings.mcp_call_timeout)

    async def check(name: str, link: ServerLink) -> Row:
        what = f"MCP server {name!r}"
        shown = link.config.shown()
        if link.config.disabled:
            return Row(what, None, f"{shown}: disabled")
        try:
            tools = await link.probe()
        except McpStartError as exc:
            why = f"{shown}: does not start: {exc}"
            return Row(what, False, why, f"{fix} (mend or disable {name!r} there)", needed)
        names = ", ".join(t.name for t in tools)
        return Row(what, True, f"{shown}: starts, {len(tools)} tools ({names})")

    links = {n: ServerLink(n, server, timeouts) for n, server in config.servers.items()}
    return list(await asyncio.gather(*(check(n, link) for n, link in links.items())))


async def nats_server(settings: Settings, explicit: bool, seconds: float) -> list[Row]:
    """Reachable, JetStream on, and whether this user's permissions are restricted."""
    import nats
    import nats.errors

    url = settings.nats_url
    shown = _without_password(url)
    errors: list[Exception] = []

    async def on_error(exc: Exception) -> None:
        errors.append(exc)

    reachable = await _tcp_reachable(url, seconds)
    if not reachable:
        if not explicit:
            return [
                Row(
                    "NATS",
                    None,
                    f"none at {shown}: `sidekick up` starts its own (JetStream on, one "
                    "locked-down user per service)",
                )
            ]
        return [Row("NATS", False, f"not reachable at {shown}", "SIDEKICK_NATS_URL", True)]
    try:
        # nats-py keeps retrying a first connection that fails (e.g. a refused password), so
        # the attempt is bounded here and what the server said is read from the errors seen.
        async with asyncio.timeout(seconds):
            nc = await nats.connect(
                url, connect_timeout=seconds, allow_reconnect=False, error_cb=on_error
            )
    except (nats.errors.Error, OSError, TimeoutError) as exc:
        why = errors[-1] if errors else exc
        return [
            Row("NATS", False, f"{shown} refused the connection: {why}", "SIDEKICK_NATS_URL", True)
        ]
    try:
        rows = [Row("NATS", True, f"reachable at {shown}", needed=explicit)]
        rows.append(await _jetstream(nc, explicit))
        rows.append(await _permissions(nc, errors, _user_of(url)))
    finally:
        with contextlib.suppress(Exception):
            await nc.close()
    return rows


async def _jetstream(nc: Any, needed: bool) -> Row:
    info = getattr(nc, "_server_info", {}) or {}
    if not info.get("jetstream"):
        return Row("NATS JetStream", False, "off on this server (run it with -js)", "", needed)
    try:
        account = await nc.jetstream().account_info()
    except Exception as exc:
        return Row("NATS JetStream", True, f"on (account info refused: {exc!r})", needed=needed)
    return Row("NATS JetStream", True, f"on, {account.streams} streams", needed=needed)


def _user_of(url: str) -> str:
    return urlsplit(url.split(",")[0].strip()).username or ""


async def _permissions(nc: Any, errors: list[Exception], url_user: str) -> Row:
    info = getattr(nc, "_server_info", {}) or {}
    user, allowed = url_user, ""
    with contextlib.suppress(Exception):
        reply = await nc.request("$SYS.REQ.USER.INFO", b"", timeout=2)
        data = json.loads(reply.data).get("data", {})
        user = data.get("user") or user
        perms = data.get("permissions") or {}
        pub = (perms.get("publish") or {}).get("allow") or []
        sub = (perms.get("subscribe") or {}).get("allow") or []
        if perms:
            allowed = f": may publish {len(pub)} and subscribe {len(sub)} subject patterns"
    # The attack itself: a subject no Sidekick role has any business publishing on.
    before = len(errors)
    await nc.publish(f"sidekick-doctor.{uuid.uuid4().hex}", b"")
    with contextlib.suppress(Exception):
        await nc.flush(timeout=2)
        await asyncio.sleep(0.1)  # the server's -ERR arrives after the flush's PONG
    denied = any("permissions violation" in str(e).lower() for e in errors[before:])
    who = f"user {user!r}" if user else "this client"
    fix = "SIDEKICK_NATS_URL (a server configured by `sidekick nats-config`)"
    if denied:
        return Row("NATS permissions", True, f"in force for {who}{allowed}")
    if not info.get("auth_required"):
        return Row("NATS permissions", False, "none: any client may publish anything", fix)
    return Row("NATS permissions", False, f"{who} may publish on any subject", fix)


async def _tcp_reachable(url: str, seconds: float) -> bool:
    for part in url.split(","):
        parsed = urlsplit(part.strip())
        try:
            _, writer = await asyncio.wait_for(
                asyncio.open_connection(parsed.hostname or "127.0.0.1", parsed.port or 4222),
                seconds,
            )
        except (OSError, TimeoutError):
            continue
        writer.close()
        return True
    return False


def _without_password(url: str) -> str:
    out = []
    for part in url.split(","):
        p = urlsplit(part.strip())
        if p.password:
            netloc = f"{p.username}:***@{p.hostname}" + (f":{p.port}" if p.port else "")
            p = p._replace(netloc=netloc)
        out.append(urlunsplit(p))
    return ",".join(out)
