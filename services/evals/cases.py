"""Eval cases and the checks a program can decide. A case is one line of JSONL:

    {"id": "direct-capital", "kind": "direct", "message": "What is the capital of Australia?",
     "criteria": "Names Canberra.", "checks": {"required": ["Canberra"]}}

`criteria` says in words what success means (for people and for the LLM judge); `checks` are
what decides it; `judge` (optional) is a rubric for the LLM judge on open-ended cases. Text
checks read the answer and, for a failed request, its error message (a refusal arrives as one).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from services.runtime.base.errors import SidekickError

Kind = Literal["direct", "search", "research", "email", "tools", "clarification", "refusal"]
KINDS: tuple[Kind, ...] = (
    "direct",
    "search",
    "research",
    "email",
    "tools",
    "clarification",
    "refusal",
)
DATASET = Path(__file__).with_name("cases.jsonl")
FRESHNESS_NOTE = "Note: I could not reliably retrieve enough live sources"


class Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Checks(Strict):
    """Every check given must pass. Phrases match case-insensitively."""

    status: list[str] = Field(
        default_factory=lambda: ["completed"], description="End statuses that count."
    )
    route: Literal["direct", "orchestrated", "cached"] | None = Field(
        default=None, description="How it must be answered."
    )
    worker_type: list[str] = Field(default_factory=list, description="Worker kinds that count.")
    error_code: list[str] = Field(default_factory=list, description="Failure codes that count.")
    required: list[str] = Field(default_factory=list, description="Phrases that must all appear.")
    any_of: list[str] = Field(default_factory=list, description="At least one must appear.")
    forbidden: list[str] = Field(default_factory=list, description="Phrases that must not.")
    regex: list[str] = Field(default_factory=list, description="Patterns that must all match.")
    min_sources: int = Field(default=0, ge=0, description="Fewest sources on the end frame.")
    min_source_domains: int = Field(default=0, ge=0, description="Fewest distinct source hosts.")
    min_questions: int = Field(default=0, ge=0, description="Fewest clarification questions.")
    outbox: bool | None = Field(
        default=None, description="True: a mail of this session is in the outbox; False: none."
    )

    @field_validator("regex")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        for p in patterns:
            try:
                re.compile(p)
            except re.error as exc:
                raise ValueError(f"{p!r} is not a regular expression: {exc}") from exc
        return patterns


class Case(Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,60}$", description="Unique, for reports.")
    kind: Kind = Field(description="What the case exercises.")
    message: str = Field(min_length=1, description="What the user sends.")
    success_criteria: str | None = Field(default=None, description="Sent with the message.")
    criteria: str = Field(min_length=1, description="What success means, in words.")
    checks: Checks = Field(default_factory=Checks, description="What decides it.")
    judge: str | None = Field(default=None, description="Rubric for the LLM judge, if any.")


class CasesError(SidekickError):
    """A case file that cannot be used; says which line and why."""


def load_cases(path: Path = DATASET) -> list[Case]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise CasesError(f"cannot read {path}: {exc.strerror or exc}") from exc
    cases: list[Case] = []
    seen: set[str] = set()
    for n, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("//"):
            continue
        try:
            case = Case.model_validate(json.loads(line))
        except (ValueError, ValidationError) as exc:
            raise CasesError(f"{path}:{n}: not a valid case: {exc}") from exc
        if case.id in seen:
            raise CasesError(f"{path}:{n}: the id {case.id!r} is used twice")
        seen.add(case.id)
        cases.append(case)
    if not cases:
        raise CasesError(f"{path} holds no cases")
    return cases


@dataclass(frozen=True)
class Outcome:
    """What one run of a case produced, as far as the checks need it."""

    status: str
    text: str
    route: str | None = None
    worker_type: str | None = None
    error_code: str | None = None
    error: str = ""
    sources: tuple[str, ...] = ()  # their URLs
    questions: int = 0
    outbox: int | None = None  # mails of the session in the outbox; None: not looked


@dataclass(frozen=True)
class CheckResult:
    name: str
    passed: bool
    detail: str


def run_checks(checks: Checks, out: Outcome) -> list[CheckResult]:
    """Each check given, decided on the outcome."""
    text = f"{out.text}\n{out.error}".lower()
    results: list[CheckResult] = []

    def add(name: str, passed: bool, detail: str) -> None:
        results.append(CheckResult(name, passed, detail))

    add("status", out.status in checks.status, f"{out.status} (wanted {'/'.join(checks.status)})")
    if checks.route:
        add("route", out.route == checks.route, f"{out.route} (wanted {checks.route})")
    if checks.worker_type:
        add(
            "worker_type",
            out.worker_type in checks.worker_type,
            f"{out.worker_type} (wanted {'/'.join(checks.worker_type)})",
        )
    if checks.error_code:
        add(
            "error_code",
            out.error_code in checks.error_code,
            f"{out.error_code} (wanted {'/'.join(checks.error_code)})",
        )
    missing = [p for p in checks.required if p.lower() not in text]
    if checks.required:
        add("required", not missing, f"missing {missing}" if missing else "all present")
    if checks.any_of:
        found = [p for p in checks.any_of if p.lower() in text]
        add("any_of", bool(found), f"found {found}" if found else f"none of {checks.any_of}")
    if checks.forbidden:
        present = [p for p in checks.forbidden if p.lower() in text]
        add("forbidden", not present, f"present {present}" if present else "none present")
    for pattern in checks.regex:
        hit = re.search(pattern, f"{out.text}\n{out.error}", re.IGNORECASE | re.DOTALL)
        add("regex", hit is not None, f"{pattern!r} {'matched' if hit else 'did not match'}")
    if checks.min_sources:
        n = len(out.sources)
        add("sources", n >= checks.min_sources, f"{n} (wanted ≥ {checks.min_sources})")
    if checks.min_source_domains:
        hosts = {urlsplit(u).hostname for u in out.sources} - {None}
        add(
            "source_domains",
            len(hosts) >= checks.min_source_domains,
            f"{len(hosts)} (wanted ≥ {checks.min_source_domains})",
        )
    if checks.min_questions:
        add(
            "questions",
            out.questions >= checks.min_questions,
            f"{out.questions} (wanted ≥ {checks.min_questions})",
        )
    if checks.outbox is not None:
        n = out.outbox or 0
        passed = n > 0 if checks.outbox else n == 0
        add("outbox", out.outbox is not None and passed, f"{out.outbox} mail(s) in the outbox")
    return results
