"""Eval cases made from recorded requests (`sidekick eval --from-requests ID ...`): each
request's message and success criteria, read from the gateway's timeline as the caller (so a
failure seen in use becomes a regression case in one command). A recorded case passes when the
request, run again, completes."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from contracts.timeline import Timeline
from services.evals.cases import Case, Checks, Kind

KIND_OF_WORKER: dict[str, Kind] = {
    "SEARCH": "search",
    "RESEARCH": "research",
    "EMAIL": "email",
    "TOOLS": "tools",
    "GENERAL": "direct",
    "NONE": "refusal",
}
GENERIC_CRITERIA = "A correct, complete answer to the request."


def case_id(request_id: str) -> str:
    """A case id (lower-case letters, digits and dashes) naming the request."""
    return ("req-" + re.sub(r"[^a-z0-9-]", "-", request_id.lower()))[:61]


def case_of(timeline: Timeline) -> Case:
    """The case a recorded request makes: its message and criteria, judged as first given."""
    decided = next((e for e in timeline.entries if e.step == "decided"), None)
    worker = decided.worker_type if decided is not None else None
    kind: Kind = KIND_OF_WORKER.get(worker or "", "direct")
    criteria = (
        timeline.success_criteria
        or (decided.success_criteria if decided is not None else None)
        or GENERIC_CRITERIA
    )
    return Case(
        id=case_id(timeline.request_id),
        kind=kind,
        message=timeline.message,
        success_criteria=timeline.success_criteria,
        criteria=criteria,
        checks=Checks(status=["completed"]),
        judge=criteria,
    )


def cases_from_requests(read: Callable[[str], Timeline], request_ids: list[str]) -> list[Case]:
    """The cases of `request_ids`, each request's timeline given by `read` (the gateway's, as
    the caller: services/cli/inspecting.py)."""
    return [case_of(read(rid)) for rid in dict.fromkeys(request_ids)]


def save_cases(path: Path, cases: list[Case]) -> None:
    """Append `cases` to the JSONL file at `path` (made if missing)."""
    with path.open("a", encoding="utf-8") as out:
        for case in cases:
            out.write(case.model_dump_json(exclude_defaults=False) + "\n")
