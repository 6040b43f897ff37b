"""`sidekick inspect <request-id>` and `sidekick replay <request-id>`: a request's timeline,
and a replay of it from a step, read from the gateway as `sidekick chat` talks to it (`--url`,
`--token` / `$SIDEKICK_TOKEN`), so they work against any deployment with the caller's own
rights (docs/inspect.md)."""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

import httpx

from contracts.timeline import Timeline, TimelineEntry
from services.runtime.base.errors import SidekickError

# States a replay is followed until (it ended, or it waits on the user).
SETTLED = {"completed", "partial", "failed", "cancelled", "awaiting_clarification"}
SETTLED_STATES = SETTLED | {"awaiting_approval"}
T = TypeVar("T")


class GatewayRefused(SidekickError):
    """The gateway answered with an error status (or not at all); the message says why."""


def add_arguments(sub: Any) -> None:
    """The `inspect` and `replay` sub-commands."""
    p_inspect = sub.add_parser("inspect", help="show a request's whole story, step by step")
    p_inspect.add_argument("request_id", help="the request (its id, as chat and the page show)")
    _gateway_arguments(p_inspect)
    p_inspect.add_argument("--json", action="store_true", help="print the timeline as JSON")

    p_replay = sub.add_parser(
        "replay", help="run a recorded request again from a step (acts on nothing in the world)"
    )
    p_replay.add_argument("request_id", help="the recorded request")
    p_replay.add_argument(
        "--from",
        dest="from_step",
        default="decision",
        help="decision (default), attempt:N or evaluation:N",
    )
    p_replay.add_argument("--model", default=None, help="the worker's model for the live part")
    p_replay.add_argument(
        "--role-model",
        action="append",
        default=[],
        metavar="ROLE=MODEL",
        help="a model for orchestrator, worker or evaluator (repeatable)",
    )
    p_replay.add_argument("--session", default=None, help="run it in this session (uuid)")
    p_replay.add_argument(
        "--timeout", type=float, default=300.0, help="seconds to wait for it (default 300)"
    )
    _gateway_arguments(p_replay)
    p_replay.add_argument("--json", action="store_true", help="print both timelines as JSON")


def _gateway_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", default=None, help="the gateway, default http://127.0.0.1:8080")
    p.add_argument(
        "--token",
        default=None,
        help="bearer token when the gateway requires one (default $SIDEKICK_TOKEN)",
    )


def seconds_of(text: str) -> float:
    """A duration such as `1d`, `12h`, `30m` or `90s` (a bare number: seconds)."""
    units = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
    given = text.strip().lower()
    unit = units.get(given[-1:])
    try:
        value = float(given[:-1] if unit is not None else given)
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a duration such as 1d, 12h, 30m or 90s") from exc
    if value <= 0:
        raise ValueError(f"{text!r}: a duration above 0")
    return value * (unit or 1.0)


def base_url(url: str | None) -> str:
    """The gateway's HTTP address from `--url` (http(s), or the ws(s) address chat takes)."""
    given = url or f"http://127.0.0.1:{os.environ.get('SIDEKICK_GATEWAY_PORT', '8080')}"
    given = given.rstrip("/").removesuffix("/ws")
    if given.startswith("ws://"):
        return "http://" + given[5:]
    if given.startswith("wss://"):
        return "https://" + given[6:]
    return given


class Gateway:
    """The gateway's requests API, as the caller."""

    def __init__(self, url: str | None, token: str | None) -> None:
        self.url = base_url(url)
        token = token or os.environ.get("SIDEKICK_TOKEN")
        self.token = token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=self.url, headers=headers, timeout=30)

    def timeline(self, request_id: str) -> Timeline:
        data = self._call("GET", f"/api/requests/{request_id}/timeline")
        return Timeline.model_validate(data)

    def failed(self, seconds: float) -> list[str]:
        """The caller's requests that ended failed or partial in the last `seconds`."""
        data = self._call("GET", f"/api/requests?failed_since={seconds:g}&limit=200")
        return [str(r["request_id"]) for r in data.get("requests", [])]

    def replay(self, request_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", f"/api/requests/{request_id}/replay", body)

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        try:
            resp = self.http.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise GatewayRefused(
                f"could not reach the gateway at {self.url}: {exc} (is `sidekick up` running?)"
            ) from exc
        if resp.status_code == 401:
            hint = "check --token or $SIDEKICK_TOKEN" if self.token else "pass --token TOKEN"
            raise GatewayRefused(f"the gateway at {self.url} refused the call (401): {hint}")
        if resp.is_error:
            raise GatewayRefused(f"{reason(resp)} (HTTP {resp.status_code})")
        data: dict[str, Any] = resp.json()
        return data

    def close(self) -> None:
        self.http.close()


def reason(resp: httpx.Response) -> str:
    """The gateway's error message (`{"error": {"code", "message"}}`), else the status text."""
    try:
        error = resp.json().get("error", {})
        return str(error.get("message") or error.get("code") or resp.reason_phrase)
    except (ValueError, AttributeError):
        return resp.reason_phrase


# --- inspect ---------------------------------------------------------------------------------


def asked(args: argparse.Namespace, command: str, ask: Callable[[Gateway], T]) -> T | None:
    """What `ask` gets from the gateway (`--url`, `--token`), or None once a refusal is printed
    as `sidekick <command>`'s; the connection is closed either way."""
    gateway = Gateway(args.url, args.token)
    try:
        return ask(gateway)
    except GatewayRefused as exc:
        print(f"sidekick {command}: {exc}")
        return None
    finally:
        gateway.close()


def inspect(args: argparse.Namespace) -> int:
    timeline = asked(args, "inspect", lambda gateway: gateway.timeline(args.request_id))
    if timeline is None:
        return 1
    if args.json:
        print(json.dumps(timeline.wire(), indent=2, ensure_ascii=False))
    else:
        print(render(timeline))
    return 0


def money(cost: float | None) -> str:
    return "" if cost is None else f"${cost:.6f}"


def tokens(entry: TimelineEntry | Timeline) -> str:
    usage = entry.usage
    if usage is None or not usage.calls:
        return ""
    models = ", ".join(usage.models) or "?"
    return (
        f"{usage.input_tokens} in / {usage.output_tokens} out tokens, {usage.calls} call(s) "
        f"({models})"
    )


def _clip(text: str, most: int = 600) -> str:
    text = text.strip()
    return text if len(text) <= most else text[:most] + f"… ({len(text)} characters)"


def render(timeline: Timeline) -> str:
    """The timeline as text, one block per step."""
    out = [
        f"request {timeline.request_id}  ({timeline.state}, {timeline.status})",
        f"  session {timeline.session} of {timeline.principal}",
        f"  message: {_clip(timeline.message, 300)}",
    ]
    if timeline.replay is not None:
        out.append(f"  replay of {timeline.replay.of} from {timeline.replay.from_step}")
    out.append("")
    for entry in timeline.entries:
        out.extend(_entry_lines(entry))
    total = tokens(timeline)
    out.append(
        f"total: {total or 'no model usage'}" + (f", {money(timeline.cost_usd)}" if total else "")
    )
    if timeline.trace_id:
        out.append(f"trace: {timeline.trace_id}")
    return "\n".join(out)


def _entry_lines(e: TimelineEntry) -> list[str]:
    when = e.at.strftime("%H:%M:%S.%f")[:-3] if e.at is not None else "--:--:--.---"
    took = f" ({e.duration_ms} ms)" if e.duration_ms is not None else ""
    lines = [f"{when}  {e.step.upper():<13} {e.title}{took}"]
    pad = " " * 14

    def add(label: str, value: object) -> None:
        if value not in (None, "", []):
            lines.append(f"{pad}{label}: {value}")

    add("recorded from", e.recorded_from)
    add("detail", _clip(e.detail) if e.detail else None)
    add("task", _clip(e.task) if e.task else None)
    add("parameters", ", ".join(f"{p.name}={p.value}" for p in e.parameters))
    add("criteria", e.success_criteria)
    add("feedback carried in", e.feedback_in)
    add("suggestions carried in", "; ".join(e.suggestions_in))
    for call in e.tool_calls:
        ok = "" if call.ok else " (error)"
        lines.append(f"{pad}tool {call.name}({_clip(call.arguments, 200)}){ok}")
    add("output", _clip(e.output) if e.output else None)
    add("error", e.error)
    add("sources", ", ".join(s.url for s in e.sources))
    if e.passed is not None:
        add("verdict", f"{'passed' if e.passed else 'failed'}, score {e.score}")
    add("feedback", e.feedback)
    add("suggestions", "; ".join(e.suggestions))
    used = tokens(e)
    add("usage", used + (f", {money(e.cost_usd)}" if used and e.cost_usd is not None else ""))
    return lines


# --- replay ----------------------------------------------------------------------------------


def replay(args: argparse.Namespace) -> int:
    try:
        role_models = dict(_role_model(given) for given in args.role_model)
    except ValueError as exc:
        print(f"sidekick replay: {exc}")
        return 2
    body: dict[str, Any] = {"from": args.from_step, "role_models": role_models}
    if args.model:
        body["model"] = args.model
    if args.session:
        body["session"] = args.session

    def run(gateway: Gateway) -> tuple[Timeline, Timeline]:
        original = gateway.timeline(args.request_id)
        started = gateway.replay(args.request_id, body)
        new_id = str(started["request_id"])
        print(f"replaying {args.request_id} from {args.from_step} as {new_id} …", flush=True)
        return original, _follow(gateway, new_id, args.timeout)

    got = asked(args, "replay", run)
    if got is None:
        return 1
    original, again = got
    if args.json:
        both = {"original": original.wire(), "replay": again.wire()}
        print(json.dumps(both, indent=2, ensure_ascii=False))
    else:
        print(side_by_side(original, again))
    return 0 if again.state in SETTLED_STATES else 1


def _role_model(given: str) -> tuple[str, str]:
    role, sep, model = given.partition("=")
    if not sep or not role.strip() or not model.strip():
        raise ValueError(f"--role-model takes ROLE=MODEL, not {given!r}")
    return role.strip(), model.strip()


def _follow(gateway: Gateway, request_id: str, timeout: float) -> Timeline:
    """The replay's timeline once it has settled (or as it is when `timeout` runs out)."""
    deadline = time.monotonic() + timeout
    while True:
        timeline = gateway.timeline(request_id)
        if timeline.state in SETTLED_STATES or time.monotonic() >= deadline:
            return timeline
        time.sleep(0.3)


def _verdicts(t: Timeline) -> list[str]:
    return [
        f"attempt {e.attempt}: {'passed' if e.passed else 'failed'} {e.score}"
        + (" (recorded)" if _recorded(t, e.attempt) else "")
        for e in t.entries
        if e.step == "verdict" and e.passed is not None
    ]


def _recorded(t: Timeline, attempt: int | None) -> bool:
    return any(e.step == "attempt" and e.attempt == attempt and e.recorded_from for e in t.entries)


def _decision(t: Timeline) -> str:
    for e in t.entries:
        if e.step == "decided":
            return f"{e.worker_type}: {_clip(e.task or '', 80)}"
    return "-"


def side_by_side(original: Timeline, again: Timeline) -> str:
    """The original and the replay, row by row, then how the answers differ."""
    rows = [
        ("request", original.request_id, again.request_id),
        ("state", original.state, again.state),
        ("route", original.route or "-", again.route or "-"),
        ("decision", _decision(original), _decision(again)),
        ("verdicts", "; ".join(_verdicts(original)) or "-", "; ".join(_verdicts(again)) or "-"),
        ("tokens", tokens(original) or "-", tokens(again) or "-"),
        ("cost", money(original.cost_usd) or "-", money(again.cost_usd) or "-"),
    ]
    width = max(len(r[1]) for r in rows)
    width = min(max(width, 20), 70)
    out = [f"{'':<10} {'original':<{width}}  replay"]
    out += [f"{name:<10} {_clip(a, width):<{width}}  {b}" for name, a, b in rows]
    out.append("")
    out.append("answer:")
    out.extend(_difference(original.final_output or "", again.final_output or ""))
    would = [
        call.result
        for e in again.entries
        for call in e.tool_calls
        if call.result.startswith("REPLAY: not performed")
    ]
    would += [
        e.output
        for e in again.entries
        if e.step == "attempt" and e.output and e.output.startswith("REPLAY: not performed")
    ]
    if would:
        out.append("")
        out.append("not performed (a replay acts on nothing; what it would have done):")
        out.extend(f"  {w}" for w in would)
    return "\n".join(out)


def _difference(before: str, after: str) -> list[str]:
    import difflib

    if before == after:
        return ["  (the same answer)"]
    diff = difflib.unified_diff(
        before.splitlines(), after.splitlines(), "original", "replay", lineterm="", n=1
    )
    return [f"  {line}" for line in diff]
