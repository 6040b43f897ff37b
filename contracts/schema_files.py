"""Write or compare the committed JSON Schemas: `python -m contracts.schema_files`."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from contracts import decisions, email, events, research, state

SCHEMA_DIR = Path(__file__).parent / "schemas"

MODELS: dict[str, type[BaseModel]] = {
    "ChatRequested": events.ChatRequested,
    "RequestRouted": events.RequestRouted,
    "OrchestratorDecided": events.OrchestratorDecided,
    "WorkerTask": events.WorkerTask,
    "WorkerResult": events.WorkerResult,
    "EvaluationRequested": events.EvaluationRequested,
    "VerdictIssued": events.VerdictIssued,
    "StreamChunk": events.StreamChunk,
    "Progress": events.Progress,
    "RequestCompleted": events.RequestCompleted,
    "RequestFailed": events.RequestFailed,
    "FrontlineDecision": decisions.FrontlineDecision,
    "OrchestratorDecision": decisions.OrchestratorDecision,
    "Verdict": decisions.Verdict,
    "ClarificationRequested": events.ClarificationRequested,
    "ClarificationAnswered": events.ClarificationAnswered,
    "CancelRequested": events.CancelRequested,
    "RequestCancelled": events.RequestCancelled,
    "SessionRecord": state.SessionRecord,
    "RequestRecord": state.RequestRecord,
    "ResearchPlan": research.ResearchPlan,
    "ResearchSynthesis": research.ResearchSynthesis,
    "EmailDraft": email.EmailDraft,
    "OutboxEntry": email.OutboxEntry,
}


def render(model: type[BaseModel]) -> str:
    return json.dumps(model.model_json_schema(), indent=2, sort_keys=True) + "\n"


def write_all() -> list[Path]:
    SCHEMA_DIR.mkdir(exist_ok=True)
    written = []
    for name, model in MODELS.items():
        path = SCHEMA_DIR / f"{name}.json"
        path.write_text(render(model), encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    for p in write_all():
        print(p)
