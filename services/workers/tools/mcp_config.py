"""The MCP servers the operator configured: a JSON file in the `mcpServers` format that Claude
Desktop, Cursor and the OpenAI Agents SDK read (`SIDEKICK_MCP_CONFIG`).

    {"mcpServers": {
        "notes": {"command": "python3", "args": ["-m", "notes"], "env": {"NOTES_DIR": "/x"}},
        "remote": {"url": "https://mcp.example.org/mcp", "headers": {"Authorization": "…"}}
    }}

A server with `command` runs as a child process speaking MCP over stdio; one with `url` is
reached over streamable HTTP. Keys other clients write (`autoApprove`, `description`, …) are
ignored and named once in the log. The file is trusted configuration: values are used as
written (no variable expansion), and neither `env` nor `headers` values are ever logged.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError

from services.runtime.base.errors import ConfigurationError

# Types other clients write for the transports Sidekick speaks.
STDIO_TYPES = ("stdio",)
HTTP_TYPES = ("http", "streamable-http", "streamable_http", "streamableHttp")


class McpConfigError(ConfigurationError):
    """The file cannot be used; the message says where and why."""


class _Server(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow", populate_by_name=True)

    disabled: bool = Field(default=False, description="Leave this server out.")
    timeout: float | None = Field(
        default=None,
        gt=0,
        le=170,
        description="Seconds one tool call may take (default SIDEKICK_MCP_CALL_TIMEOUT).",
    )

    @property
    def ignored_keys(self) -> list[str]:
        return sorted(self.model_extra or {})


class StdioServer(_Server):
    """A server Sidekick starts as a child process and talks to over stdin/stdout."""

    type: Literal["stdio"] | None = Field(default=None, description="Transport (optional).")
    command: str = Field(min_length=1, description="The program to run.")
    args: list[str] = Field(default_factory=list, description="Its arguments.")
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Its environment; besides it only PATH, HOME, USER, LOGNAME, SHELL and "
        "TERM (the SDK's non-secret basics), nothing of the worker's.",
    )
    cwd: str | None = Field(default=None, description="Its working folder (default: the worker's).")

    def shown(self) -> str:
        """How the log names it: the program only (arguments may carry keys)."""
        return f"stdio: {shlex.quote(Path(self.command).name)}"


class HttpServer(_Server):
    """A server reached over MCP's streamable HTTP transport."""

    type: Literal["http", "streamable-http", "streamable_http", "streamableHttp"] | None = Field(
        default=None, description="Transport (optional)."
    )
    url: str = Field(pattern=r"^https?://", description="The server's MCP endpoint.")
    headers: dict[str, str] = Field(
        default_factory=dict, description="Sent with every request (e.g. Authorization)."
    )

    def shown(self) -> str:
        """The URL without credentials or query (either may carry a key)."""
        parts = urlsplit(self.url)
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        return f"http: {urlunsplit((parts.scheme, netloc, parts.path, '', ''))}"


def _transport(raw: Any) -> str:
    if not isinstance(raw, dict):
        return "invalid"
    kind = raw.get("type")
    if kind == "sse" or raw.get("transport") == "sse":
        return "sse"
    if "command" in raw and "url" in raw:
        return "both"
    if "command" in raw or kind in STDIO_TYPES:
        return "stdio"
    if "url" in raw or kind in HTTP_TYPES:
        return "http"
    return "neither"


ServerConfig = Annotated[
    Annotated[StdioServer, Tag("stdio")] | Annotated[HttpServer, Tag("http")],
    Discriminator(_transport),
]

_WHY = {
    "sse": "the SSE transport is not supported (it is deprecated); use the server's "
    "streamable HTTP endpoint (`url`)",
    "both": "give either `command` (stdio) or `url` (streamable HTTP), not both",
    "neither": "give `command` (a stdio server) or `url` (a streamable HTTP server)",
    "invalid": "each server must be a JSON object",
}


class McpConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")

    servers: dict[str, ServerConfig] = Field(
        alias="mcpServers",
        description="The servers by name; the name prefixes each of its tools' names.",
    )

    @property
    def enabled(self) -> dict[str, StdioServer | HttpServer]:
        return {name: s for name, s in self.servers.items() if not s.disabled}


def load(path: Path) -> McpConfig:
    """Read and check the file; McpConfigError says what is wrong with it."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise McpConfigError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise McpConfigError(
            f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from exc
    if not isinstance(raw, dict) or not isinstance(raw.get("mcpServers"), dict):
        raise McpConfigError(f'{path} has no "mcpServers" object')
    for name, server in raw["mcpServers"].items():
        why = _WHY.get(_transport(server))
        if not name.strip():
            why = "a server needs a name"
        if why:
            raise McpConfigError(f"{path}: server {name!r}: {why}")
    try:
        return McpConfig.model_validate(raw)
    except ValidationError as exc:
        raise McpConfigError(f"{path}: {_problems(exc)}") from exc


def _problems(exc: ValidationError) -> str:
    out = []
    for error in exc.errors()[:5]:
        # The transport tag is a step in pydantic's path, not a key of the file.
        where = [str(p) for p in error["loc"] if p not in ("stdio", "http")]
        out.append(f"{'.'.join(where)}: {error['msg']}")
    return "; ".join(out)
