"""A2A 0.3's names and shapes, for the clients that still send them: `message/send`,
`message/stream`, `tasks/get`, `tasks/cancel`, `tasks/resubscribe` (and the push-notification
and extended-card methods, which are refused). Their answers are the 1.0 objects in 0.3's
spelling: a `kind` on each object, kebab-case lowercase states, lowercase roles, `kind`-tagged
parts, and `final` on the status update that ends a stream."""

from __future__ import annotations

from typing import Any

from contracts.a2a import TERMINAL_TASK_STATES, StreamResponse

# 0.3 method -> the 1.0 method it is.
METHODS = {
    "message/send": "SendMessage",
    "message/stream": "SendStreamingMessage",
    "tasks/get": "GetTask",
    "tasks/cancel": "CancelTask",
    "tasks/resubscribe": "SubscribeToTask",
    "tasks/pushNotificationConfig/set": "CreateTaskPushNotificationConfig",
    "tasks/pushNotificationConfig/get": "GetTaskPushNotificationConfig",
    "tasks/pushNotificationConfig/list": "ListTaskPushNotificationConfigs",
    "tasks/pushNotificationConfig/delete": "DeleteTaskPushNotificationConfig",
    "agent/getAuthenticatedExtendedCard": "GetExtendedAgentCard",
}


def state(value: str) -> str:
    return value.removeprefix("TASK_STATE_").lower().replace("_", "-")


def part(p: dict[str, Any]) -> dict[str, Any]:
    if "text" in p:
        return {"kind": "text", "text": p["text"]}
    if "data" in p:
        return {"kind": "data", "data": p["data"]}
    return {"kind": "file", "file": {"uri": p.get("url", ""), "mimeType": p.get("mediaType")}}


def message(m: dict[str, Any]) -> dict[str, Any]:
    out = {**m, "kind": "message", "role": "user" if m["role"] == "ROLE_USER" else "agent"}
    out["parts"] = [part(p) for p in m["parts"]]
    return out


def status(s: dict[str, Any]) -> dict[str, Any]:
    out = {**s, "state": state(s["state"])}
    if "message" in s:
        out["message"] = message(s["message"])
    return out


def artifact(a: dict[str, Any]) -> dict[str, Any]:
    return {**a, "parts": [part(p) for p in a["parts"]]}


def task(t: dict[str, Any]) -> dict[str, Any]:
    out = {**t, "kind": "task", "status": status(t["status"])}
    if "artifacts" in t:
        out["artifacts"] = [artifact(a) for a in t["artifacts"]]
    if "history" in t:
        out["history"] = [message(m) for m in t["history"]]
    return out


def stream_event(response: StreamResponse) -> dict[str, Any]:
    """One 1.0 stream response as the 0.3 event it was."""
    wire = response.wire()
    if "task" in wire:
        return task(wire["task"])
    if "statusUpdate" in wire:
        update = wire["statusUpdate"]
        final = update["status"]["state"] in TERMINAL_TASK_STATES or update["status"]["state"] in (
            "TASK_STATE_INPUT_REQUIRED",
            "TASK_STATE_AUTH_REQUIRED",
        )
        return {
            **update,
            "kind": "status-update",
            "status": status(update["status"]),
            "final": final,
        }
    if "artifactUpdate" in wire:
        update = wire["artifactUpdate"]
        return {**update, "kind": "artifact-update", "artifact": artifact(update["artifact"])}
    return message(wire["message"])
