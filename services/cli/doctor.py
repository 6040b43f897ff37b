"""`sidekick doctor`: what works and what to set, without starting the system.

For each model role (and its fallback): base URL, model, whether it answers, whether the key
is accepted, whether the model is listed, streaming, json_schema, tool calling, json_object and
the structured-output mode that will be used. Then Brave, SendGrid, Pushover, the Python
sandbox, Chromium, each MCP server of SIDEKICK_MCP_CONFIG (started and listed, no tool called)
and NATS. Exit status 1 when something the configuration uses is broken.

It makes at most four tiny model calls per distinct (endpoint, model) — one for embeddings —
plus one Brave query; it sends no mail and no notification. `--no-calls` skips the model calls.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the checks' imports are paid when the command runs, not when parsing
    from services.cli.doctor_checks import Row
    from services.runtime.llm.probe import Cell, ModelReport

YES, NO, NONE = "✓", "✗", "-"


def add_parser(sub: Any) -> None:
    p = sub.add_parser("doctor", help="check models, keys, sandbox, browser, MCP servers and NATS")
    p.add_argument("--json", action="store_true", help="print JSON (for machines)")
    p.add_argument("--no-calls", action="store_true", help="no model calls: GET /models only")
    p.add_argument("--timeout", type=float, default=20.0, help="seconds per check (default 20)")


@dataclass
class Findings:
    models: list[ModelReport] = field(default_factory=list)
    services: list[Row] = field(default_factory=list)
    model_calls: int = 0

    @property
    def broken(self) -> list[str]:
        out = [f"{p.what} → set {p.fix}" for m in self.models for p in m.problems if p.breaks]
        out += [f"{r.name}: {r.detail} → set {r.fix}" for r in self.services if _broken(r)]
        return out

    def as_json(self) -> dict[str, Any]:
        return {
            "ok": not self.broken,
            "model_calls": self.model_calls,
            "models": [m.as_json() for m in self.models],
            "services": [r.as_json() for r in self.services],
            "broken": self.broken,
        }


def _broken(row: Row) -> bool:
    return row.needed and row.ok is False


async def collect(*, calls: bool, seconds: float) -> Findings:
    from services.cli import doctor_checks as checks
    from services.runtime.base.settings import ROLES, Settings
    from services.runtime.llm.probe import Seen, judge, measure

    settings = Settings()
    found = Findings()
    seen: dict[tuple[str | None, str | None, str, bool], Seen] = {}
    for role in ROLES:
        config = settings.llm(role)
        needed = role != "embeddings" or settings.cache_enabled
        for label, c in ((role, config), (f"{role} fallback", config.fallback)):
            if c is None:
                continue
            key = (c.base_url, c.api_key, c.model, role == "embeddings")
            if key not in seen:
                seen[key] = await measure(c, calls=calls, seconds=seconds)
                found.model_calls += seen[key].calls
            found.models.append(
                judge(
                    c,
                    label,
                    seen[key],
                    needs_streaming=role == "frontline",
                    needed=needed,
                    fallback=c is config.fallback,
                )
            )
    kinds = settings.worker_kinds
    found.services = [
        await checks.brave(kinds, seconds),
        checks.sendgrid(kinds),
        await checks.pushover(seconds),
        await checks.sandbox(kinds, settings.data_dir),
        await checks.chromium(seconds),
        *await checks.mcp_servers(kinds),
        *await checks.nats_server(settings, "SIDEKICK_NATS_URL" in os.environ, seconds),
    ]
    if calls:
        from services.cli.doctor_share import share

        found.services.append(await share(settings, found.models, seconds))
    return found


def _mark(cell: Cell) -> str:
    return YES if cell.ok else NO if cell.ok is False else NONE


def _broken_lines(found: Findings) -> list[str]:
    """`found.broken`, with the roles that have no model said once, not once per role."""
    from services.runtime.base.errors import MODEL_EXAMPLE, MODEL_VARIABLES
    from services.runtime.llm.probe import NO_MODEL

    missing = [
        p for m in found.models for p in m.problems if p.breaks and p.what.endswith(NO_MODEL)
    ]
    if len(missing) < 2:
        return found.broken
    roles = ", ".join(p.what.removesuffix(NO_MODEL) for p in missing)
    said = {f"{p.what} → set {p.fix}" for p in missing}
    shared = (
        f"no model configured ({roles}) → set {MODEL_VARIABLES} before `sidekick up`, "
        f"{MODEL_EXAMPLE}; SIDEKICK_<ROLE>_LLM_* set one role alone (SIDEKICK_EMBEDDINGS_* "
        "the embeddings')"
    )
    return [shared, *(line for line in found.broken if line not in said)]


def render(found: Findings) -> str:
    heads = ["role", "base URL", "model", "answers", "key", "listed"]
    heads += ["stream", "json_schema", "tools", "json_object", "embeddings", "mode"]
    rows = []
    for m in found.models:
        caps = m.capabilities
        names = ("streaming", "json_schema", "tools", "json_object", "embeddings")
        cells = [caps.get(c) for c in names]
        rows.append(
            [m.label, m.base_url, m.model, _mark(m.answers), _mark(m.key), _mark(m.listed)]
            + [_mark(c) if c is not None else NONE for c in cells]
            + [m.mode or NONE]
        )
    lines = [
        f"sidekick doctor — {found.model_calls} tiny model call(s) made; one Brave query at "
        "most; no mail or notification sent.",
        "",
        *_table(heads, rows),
        "",
    ]
    lines += _table(
        ["check", "", "detail"], [[r.name, _mark_row(r), r.detail] for r in found.services]
    )
    fixes = [f"  {NO} {line}" for line in _broken_lines(found)]
    optional = [
        f"  {r.name}: {r.detail} → set {r.fix}"
        for r in found.services
        if r.ok is False and not _broken(r)
    ]
    optional += [
        f"  {p.what} → set {p.fix}" for m in found.models for p in m.problems if not p.breaks
    ]
    if fixes:
        lines += ["", "Broken (the configuration needs these):", *fixes]
    if optional:
        lines += ["", "Optional, not working or not set:", *optional]
    notes = _notes(found.models)
    if notes:
        lines += ["", "Notes:", *notes]
    lines += ["", "Nothing the configuration needs is broken." if not fixes else "Exit status 1."]
    return "\n".join(lines)


def _notes(models: list[ModelReport]) -> list[str]:
    """Why each missing capability is missing, once per reason with the roles it concerns."""
    roles: dict[str, list[str]] = {}
    for m in models:
        for name, cell in m.capabilities.items():
            if cell.ok is False and cell.detail:
                roles.setdefault(f"{name}: {cell.detail}", []).append(m.label)
    return [f"  {why} ({', '.join(labels)})" for why, labels in roles.items()]


def _mark_row(row: Row) -> str:
    return YES if row.ok else (NO if row.ok is False else NONE)


def _table(heads: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(x)) for x in col) for col in zip(heads, *rows, strict=True)]

    def line(cells: list[str]) -> str:
        return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return [line(heads), *(line(r) for r in rows)]


def doctor(args: argparse.Namespace) -> int:
    found = asyncio.run(collect(calls=not args.no_calls, seconds=args.timeout))
    if args.json:
        print(json.dumps(found.as_json(), indent=2, ensure_ascii=False))
    else:
        print(render(found))
    sys.stdout.flush()
    return 1 if found.broken else 0
