"""`sidekick doctor` as a user runs it (a process, its exit status and its output), against the
fake model, Brave and Pushover servers and real nats-servers."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from services.cli.doctor_checks import nats_server
from services.runtime.base.errors import MODEL_EXAMPLE, MODEL_VARIABLES, no_model_message
from services.runtime.base.settings import ROLES, Settings
from services.runtime.bus.natsserver import NatsServer
from tests.support.dirs import searchable_dir
from tests.support.fakes.brave import FakeBrave
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.fakes.pushover import FakePushover
from tests.support.harness import free_port, sidekick
from tests.support.lockednats import LockedNats
from tests.support.mcp_server import TOOLS, stdio_entry
from tests.support.scripts import structured

KEY = "sk-doctor"
OWN = ("SIDEKICK_", "OPENAI_", "BRAVE_", "SENDGRID_", "PUSHOVER_")


def doctor_model(body: dict[str, Any]) -> str | dict[str, Any]:
    return {"ok": True} if structured(body) else "OK"


@pytest.fixture
def env(
    fake_llm: FakeOpenAI,
    brave: FakeBrave,
    pushover: FakePushover,
    nats_server: NatsServer,
) -> Iterator[dict[str, str]]:
    """A complete configuration: one model for every role, every outside service set."""
    fake_llm.script("fake-doctor", doctor_model)
    fake_llm.api_key = KEY
    base = {k: v for k, v in os.environ.items() if not k.startswith(OWN)}
    with searchable_dir() as files:
        yield {
            **base,
            "SIDEKICK_LLM_BASE_URL": fake_llm.base_url,
            "SIDEKICK_LLM_API_KEY": KEY,
            "SIDEKICK_LLM_MODEL": "fake-doctor",
            "SIDEKICK_NATS_URL": nats_server.url,
            "BRAVE_SEARCH_API_KEY": brave.token,
            "SIDEKICK_BRAVE_BASE_URL": brave.url,
            "SENDGRID_API_KEY": "SG.doctor",
            "SENDGRID_FROM_EMAIL": "sidekick@example.org",
            "PUSHOVER_TOKEN": pushover.token,
            "PUSHOVER_USER": pushover.user,
            "SIDEKICK_PUSHOVER_BASE_URL": pushover.url,
            "SIDEKICK_FILES_ROOT": str(files),
        }


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return sidekick("doctor", *args, env=env)


def report(env: dict[str, str], *args: str) -> tuple[int, dict[str, Any]]:
    done = run(env, "--json", *args)
    return done.returncode, json.loads(done.stdout)


def model(found: dict[str, Any], label: str) -> dict[str, Any]:
    return next(m for m in found["models"] if m["label"] == label)


def service(found: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in found["services"] if s["name"] == name)


def ticks(m: dict[str, Any]) -> dict[str, bool | None]:
    cells = {k: m[k]["ok"] for k in ("answers", "key", "listed")}
    cells.update({k: v["ok"] for k, v in m["capabilities"].items()})
    return cells


async def test_a_working_configuration_is_all_ticks_with_a_handful_of_model_calls(
    env: dict[str, str], fake_llm: FakeOpenAI, pushover: FakePushover
) -> None:
    status, found = report(env)
    assert status == 0, found["broken"]
    assert found["ok"] is True
    for role in ("frontline", "orchestrator", "worker", "evaluator"):
        m = model(found, role)
        assert set(ticks(m).values()) == {True}, (role, m)
        assert m["mode"] == "json_schema"
    assert model(found, "embeddings")["capabilities"]["embeddings"]["ok"] is True
    # One model shared by four roles is asked once: four chat calls and one embedding.
    assert found["model_calls"] == 5
    assert len(fake_llm.chat_calls("fake-doctor")) == 4
    assert len(fake_llm.calls("/v1/embeddings")) == 1
    for name in (
        "Brave Search",
        "SendGrid",
        "Pushover",
        "Python sandbox",
        "NATS",
        "NATS JetStream",
    ):
        assert service(found, name)["ok"] is True, service(found, name)
    assert pushover.messages == [], "the check sends no notification"


async def test_a_server_without_json_schema_or_tools_is_shown_and_json_object_chosen(
    env: dict[str, str], fake_llm: FakeOpenAI
) -> None:
    fake_llm.refuse = {"json_schema", "tools"}
    status, found = report(env)
    assert status == 0, "a weaker mode is not a failure"
    caps = model(found, "worker")["capabilities"]
    assert caps["json_schema"]["ok"] is False and "refused" in caps["json_schema"]["detail"]
    assert caps["tools"]["ok"] is False and caps["json_object"]["ok"] is True
    assert model(found, "worker")["mode"] == "json_object"


async def test_a_refused_key_and_a_bad_brave_token_fail_with_the_variables_to_set(
    env: dict[str, str],
) -> None:
    env = {**env, "SIDEKICK_LLM_API_KEY": "sk-wrong", "BRAVE_SEARCH_API_KEY": "wrong"}
    done = run(env)
    assert done.returncode == 1
    out = done.stdout
    assert "the key was refused" in out
    assert "SIDEKICK_FRONTLINE_LLM_API_KEY (or SIDEKICK_LLM_API_KEY for every role)" in out
    assert "Brave Search: query refused: 422" in out and "BRAVE_SEARCH_API_KEY" in out
    assert "sk-wrong" not in out + done.stderr, "a key is never printed"
    header = next(line for line in out.splitlines() if line.startswith("role"))
    assert "json_schema" in header and "mode" in header
    frontline = next(line for line in out.splitlines() if line.startswith("frontline"))
    assert "✓" in frontline and "✗" in frontline, "answers ✓, key ✗"


async def test_a_forced_mode_the_server_refuses_is_broken(
    env: dict[str, str], fake_llm: FakeOpenAI
) -> None:
    fake_llm.refuse = {"tools"}
    status, found = report(env | {"SIDEKICK_EVALUATOR_LLM_STRUCTURED": "tools"})
    assert status == 1
    evaluator = model(found, "evaluator")
    assert evaluator["mode"] == "tools (forced)"
    assert any("SIDEKICK_EVALUATOR_LLM_STRUCTURED" in b for b in found["broken"])
    assert model(found, "worker")["mode"] == "json_schema"


async def test_no_calls_means_no_model_calls(env: dict[str, str], fake_llm: FakeOpenAI) -> None:
    status, found = report(env, "--no-calls")
    assert status == 0
    assert found["model_calls"] == 0 and fake_llm.calls("/v1/chat/completions") == []
    assert model(found, "frontline")["listed"]["ok"] is True
    assert model(found, "frontline")["mode"] == "learned at first use"


async def test_a_model_the_server_does_not_serve_and_a_dead_fallback_are_broken(
    env: dict[str, str],
) -> None:
    status, found = report(
        env
        | {
            "SIDEKICK_WORKER_LLM_MODEL": "no-such-model",
            "SIDEKICK_EVALUATOR_LLM_FALLBACK_BASE_URL": "http://127.0.0.1:9/v1",
        }
    )
    assert status == 1
    assert model(found, "worker")["listed"]["ok"] is False
    assert model(found, "evaluator fallback")["answers"]["ok"] is False
    broken = "\n".join(found["broken"])
    assert "SIDEKICK_WORKER_LLM_MODEL" in broken
    assert "SIDEKICK_EVALUATOR_LLM_FALLBACK_BASE_URL" in broken


async def test_no_model_says_for_each_role_what_the_other_surfaces_say(
    env: dict[str, str],
) -> None:
    env = {k: v for k, v in env.items() if not k.startswith("SIDEKICK_LLM_")}
    status, found = report(env, "--no-calls")
    assert status == 1
    # The words of no_model_message(): the shared variables and the Ollama example.
    assert MODEL_VARIABLES in no_model_message() and MODEL_EXAMPLE in no_model_message()
    for role in ROLES:
        m = model(found, role)
        (problem,) = m["problems"]
        assert set(problem) == {"what", "fix", "breaks"}
        assert problem["what"] == f"{role}: no model configured"
        assert MODEL_VARIABLES in problem["fix"] and MODEL_EXAMPLE in problem["fix"]
        own = "SIDEKICK_EMBEDDINGS_" if role == "embeddings" else f"SIDEKICK_{role.upper()}_LLM_"
        assert f"{own}BASE_URL" in problem["fix"], problem
    assert (
        "its model is SIDEKICK_EMBEDDINGS_MODEL" in model(found, "embeddings")["problems"][0]["fix"]
    )
    text = run(env, "--no-calls").stdout
    roles = ", ".join(ROLES)
    assert f"✗ no model configured ({roles}) → set {MODEL_VARIABLES} before `sidekick up`" in text
    assert text.count("no model configured") == 1 and MODEL_EXAMPLE in text, text


async def test_missing_optional_keys_are_shown_but_do_not_fail(env: dict[str, str]) -> None:
    env = {k: v for k, v in env.items() if not k.startswith(("SENDGRID_", "PUSHOVER_"))}
    status, found = report(env | {"SIDEKICK_WORKERS": "GENERAL"})
    assert status == 0
    sendgrid = service(found, "SendGrid")
    assert sendgrid["ok"] is False and sendgrid["fix"] == "SENDGRID_API_KEY"
    assert "outbox" in sendgrid["detail"]
    assert service(found, "Pushover")["ok"] is False


async def test_a_sandbox_that_cannot_start_says_why_and_what_to_set(env: dict[str, str]) -> None:
    status, found = report(env | {"SIDEKICK_BWRAP": "/nonexistent/bwrap"}, "--no-calls")
    sandbox = service(found, "Python sandbox")
    assert sandbox["ok"] is False and sandbox["fix"] == "SIDEKICK_BWRAP"
    assert "python_run of TOOLS is off" in sandbox["detail"]
    assert "/nonexistent/bwrap is not an executable file" in sandbox["detail"]
    assert status == 0, "python_run says why it is off; nothing else needs the sandbox"


def test_nats_permissions_are_seen_for_a_service_user_and_flagged_for_others(
    env: dict[str, str], nats_server: NatsServer, tmp_path: Path
) -> None:
    assert isinstance(nats_server, LockedNats)
    frontline = nats_server.add("doctor")["frontline"]
    _, locked = report(env | {"SIDEKICK_NATS_URL": frontline}, "--no-calls")
    perms = service(locked, "NATS permissions")
    assert perms["ok"] is True and "'frontline.doctor'" in perms["detail"], perms
    assert service(locked, "NATS JetStream")["ok"] is True
    _, admin = report(env, "--no-calls")  # the admin user may do anything: flagged, not broken
    perms = service(admin, "NATS permissions")
    assert perms["ok"] is False and "may publish on any subject" in perms["detail"], perms
    wrong = nats_server.plain_url.replace("nats://", "nats://frontline.doctor:nope@")
    status, refused = report(env | {"SIDEKICK_NATS_URL": wrong}, "--no-calls")
    assert status == 1 and service(refused, "NATS")["ok"] is False
    password = urlsplit(frontline).password
    assert password and password not in json.dumps(locked)
    assert "nope" not in json.dumps(refused)
    server = NatsServer(store_dir=tmp_path / "js").start()  # no users at all
    try:
        _, open_server = report(env | {"SIDEKICK_NATS_URL": server.url}, "--no-calls")
    finally:
        server.stop()
    perms = service(open_server, "NATS permissions")
    assert perms["ok"] is False and "any client may publish anything" in perms["detail"]


async def test_a_missing_nats_server_fails_only_when_one_was_configured() -> None:
    url = f"nats://127.0.0.1:{free_port()}"  # nothing listens there
    settings = Settings(nats_url=url)
    (default,) = await nats_server(settings, explicit=False, seconds=2)
    assert default.ok is None and not default.needed, "`sidekick up` starts its own"
    assert "sidekick up" in default.detail
    (configured,) = await nats_server(settings, explicit=True, seconds=2)
    assert configured.ok is False and configured.needed
    assert configured.fix == "SIDEKICK_NATS_URL"


async def test_each_mcp_server_is_started_and_listed_and_one_that_cannot_start_is_broken(
    env: dict[str, str], tmp_path: Path
) -> None:
    servers = {
        "vault": stdio_entry(),
        "broken": {"command": "/nonexistent/mcp-server", "args": ["--key=sk-in-args"]},
        "off": {"command": "/nonexistent/other", "disabled": True},
    }
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": servers}))
    done = run(env | {"SIDEKICK_MCP_CONFIG": str(config)}, "--no-calls")
    assert done.returncode == 1, "a server the TOOLS worker would offer does not start"
    assert "sk-in-args" not in done.stdout + done.stderr, "arguments may carry keys"
    assert "Traceback" not in done.stderr, done.stderr
    status, found = report(env | {"SIDEKICK_MCP_CONFIG": str(config)}, "--no-calls")
    vault = service(found, "MCP server 'vault'")
    assert vault["ok"] is True, vault
    assert vault["detail"].endswith(f"starts, 4 tools ({', '.join(TOOLS)})")
    broken = service(found, "MCP server 'broken'")
    assert broken["ok"] is False
    assert broken["fix"] == "SIDEKICK_MCP_CONFIG (mend or disable 'broken' there)"
    assert "does not start: cannot run it: [Errno 2]" in broken["detail"]
    assert service(found, "MCP server 'off'")["ok"] is None
    line = next(li for li in done.stdout.splitlines() if li.startswith("MCP server 'vault'"))
    assert "✓" in line and "4 tools" in line
    # Without TOOLS among the worker kinds nothing offers those tools: shown, not broken.
    status, found = report(
        env | {"SIDEKICK_MCP_CONFIG": str(config), "SIDEKICK_WORKERS": "GENERAL"}, "--no-calls"
    )
    assert status == 0 and service(found, "MCP server 'broken'")["ok"] is False


async def test_an_mcp_config_that_is_not_valid_is_one_broken_row_naming_the_problem(
    env: dict[str, str], tmp_path: Path
) -> None:
    config = tmp_path / "mcp.json"
    config.write_text('{"mcpServers": {"legacy": {"url": "http://x/sse", "type": "sse"}}}')
    status, found = report(env | {"SIDEKICK_MCP_CONFIG": str(config)}, "--no-calls")
    assert status == 1
    row = service(found, "MCP servers")
    assert row["ok"] is False and "'legacy': the SSE transport is not supported" in row["detail"]
    _, unset = report(env, "--no-calls")
    assert service(unset, "MCP servers") == {
        "name": "MCP servers",
        "ok": None,
        "detail": "none configured",
        "fix": "SIDEKICK_MCP_CONFIG",
        "needed": False,
    }
