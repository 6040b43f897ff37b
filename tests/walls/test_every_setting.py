"""Every documented setting reaches the processes that read it when the system is started the way
a user starts it: `sidekick up`, with every variable of docs/configuration.md in its own
environment. Each service's environment is read back from /proc/<pid>/environ: it holds every
setting with the value given, its own role's secrets and no other's; nats-server holds nothing
but what its config reads. And a limit whose name holds `_TOKENS` applies: a request over
`SIDEKICK_BUDGET_REQUEST_TOKENS` stops at it (the limit was once dropped as a "secret")."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.runtime.base.children import SERVICES, free_port
from services.runtime.bus.natsauth import password_variable
from services.runtime.bus.natslogin import WHATS, variable
from services.workers.tools.bwrap import find_bwrap
from tests.support.code_reads import documented, is_read
from tests.support.docs_text import DOCS, section
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.fakes.otlp import FakeOTLP
from tests.support.gateway_client import AuthClient, token
from tests.support.upproc import Up, children_of, cmdline, environ

pytestmark = pytest.mark.timeout(400)

ROLES = ("FRONTLINE", "ORCHESTRATOR", "WORKER", "EVALUATOR")
OTHER_LOGINS = ("CREDS", "NKEY", "TLS_CA", "TLS_CERT", "TLS_KEY")
# `<SERVICE>` in the docs: each service, and the bootstrap step's admin.
LOGINS = ("GATEWAY", "FRONTLINE", "ORCHESTRATOR", "EVALUATOR", "WORKERS", "ADMIN")
MODEL_CALLERS = {"frontline", "orchestrator", "evaluator", "workers"}
REQUEST_TOKENS = 3000

# Documented, and not set here, each for its reason (tests/walls/test_secret_list.py checks
# how each is handed on):
EXCLUDED = {
    # Set, `up` uses that server instead of starting its own (whose environment is tested).
    "SIDEKICK_NATS_URL": "selects an operator's server",
    # TLS to NATS, a .creds file or an NKey seed: `up`'s own server has users and no TLS.
    **{variable(w, s): "another kind of NATS login" for w in OTHER_LOGINS for s in (None, *LOGINS)},
    # `up` makes each service's user and password for its server, over any given.
    **{variable(w, s): "made by `up`" for w in ("USER", "PASSWORD") for s in LOGINS},
}

# Who reads each secret: these only, and no other process, hold it.
SECRET_HOLDERS: dict[str, set[str]] = {
    "OPENAI_API_KEY": MODEL_CALLERS,
    "SIDEKICK_LLM_API_KEY": MODEL_CALLERS,
    "SIDEKICK_LLM_FALLBACK_API_KEY": MODEL_CALLERS,
    **{f"SIDEKICK_{r}_LLM_API_KEY": {r.lower().replace("worker", "workers")} for r in ROLES},
    **{
        f"SIDEKICK_{r}_LLM_FALLBACK_API_KEY": {r.lower().replace("worker", "workers")}
        for r in ROLES
    },
    "SIDEKICK_EMBEDDINGS_API_KEY": {"orchestrator"},
    "SIDEKICK_AUTH_TOKENS": {"gateway"},
    "SIDEKICK_AUTH_TOKENS_FILE": {"gateway"},
    "BRAVE_SEARCH_API_KEY": {"workers"},
    "SENDGRID_API_KEY": {"workers"},
    "PUSHOVER_TOKEN": {"workers"},
    "PUSHOVER_USER": {"workers"},
    "SIDEKICK_TOKEN": set(),  # `sidekick chat`'s
    "SIDEKICK_JUDGE_LLM_API_KEY": set(),  # `sidekick eval --judge`'s
    "OTEL_EXPORTER_OTLP_HEADERS": set(SERVICES),
    "GITHUB_TOKEN": set(),  # another program's, in the shell that ran `up`
    **{variable(w): set(SERVICES) for w in ("PASSWORD", "PASSWORD_FILE", "TOKEN", "TOKEN_FILE")},
    **{
        variable(w, s): {s.lower()} & set(SERVICES)
        for w in ("PASSWORD_FILE", "TOKEN", "TOKEN_FILE")
        for s in LOGINS
    },
}


def documented_variables() -> set[str]:
    """Every variable docs/configuration.md's tables name, placeholders expanded, and every
    part of a NATS login (the table's "`_PASSWORD` / ...")."""
    text = section(DOCS["configuration.md"], "## Every variable")
    names: set[str] = set(re.findall(r"`(OTEL_[A-Z_]+)`", text))
    for name in documented(text):
        if name.endswith("_"):
            continue  # `SIDEKICK_LLM_*` in prose
        expanded = [name]
        for mark, words in (("<ROLE>", ROLES), ("<SERVICE>", LOGINS)):
            if mark in name:
                expanded = [e.replace(mark, w) for e in expanded for w in words]
        names |= {e for e in expanded if is_read(e)}
    names |= {variable(w, s) for w in WHATS for s in (None, *LOGINS)}
    return names


def values(tmp: Path, model: str, otlp: str, port: int) -> dict[str, str]:
    """A working value for every variable set (one a process can tell from the default where
    that is harmless); secrets have values that say whose they are."""
    files = tmp / "files"
    files.mkdir()
    policy = files / "policy.json"
    policy.write_text(json.dumps({"rules": [{"action": "notify", "decision": "ask"}]}))
    mcp = files / "mcp.json"
    mcp.write_text(json.dumps({"mcpServers": {}}))
    tokens_file = files / "tokens"
    tokens_file.write_text(f"{token('bob')}:bob\n")
    secret_file = files / "secret"
    secret_file.write_text("not-used\n")
    bwrap, _ = find_bwrap()
    assert bwrap is not None
    env = {
        "OPENAI_BASE_URL": model,
        "OPENAI_API_KEY": "secret-openai",
        "SIDEKICK_LLM_BASE_URL": model,
        "SIDEKICK_LLM_API_KEY": "secret-shared-llm",
        "SIDEKICK_LLM_MODEL": "fake-worker",
        "SIDEKICK_LLM_STRUCTURED": "json_schema",
        "SIDEKICK_LLM_FALLBACK_BASE_URL": model,
        "SIDEKICK_LLM_FALLBACK_API_KEY": "secret-shared-fallback",
        "SIDEKICK_LLM_FALLBACK_MODEL": "fake-worker",
        "SIDEKICK_LLM_TIMEOUT": "40",
        "SIDEKICK_LLM_MAX_RETRIES": "1",
        "SIDEKICK_LLM_MAX_TOKENS_SHORT": "300",
        "SIDEKICK_LLM_MAX_TOKENS_ANSWER": "400",
        "SIDEKICK_LLM_STREAM_CALLS": "true",
        "SIDEKICK_LOCAL_MODEL": "false",
        "SIDEKICK_EMBEDDINGS_BASE_URL": model,
        "SIDEKICK_EMBEDDINGS_API_KEY": "secret-embeddings",
        "SIDEKICK_EMBEDDINGS_MODEL": "fake-embeddings",
        "SIDEKICK_CACHE_ENABLED": "false",
        "SIDEKICK_CACHE_THRESHOLD": "0.97",
        "SIDEKICK_HISTORY_TURNS": "3",
        "SIDEKICK_MAX_ATTEMPTS": "2",
        "SIDEKICK_WORKERS": "GENERAL,SEARCH,EMAIL,TOOLS",
        "SIDEKICK_JUDGE_LLM_BASE_URL": model,
        "SIDEKICK_JUDGE_LLM_API_KEY": "secret-judge",
        "SIDEKICK_JUDGE_LLM_MODEL": "fake-judge",
        "SIDEKICK_SWEEP_INTERVAL": "5",
        "SIDEKICK_CLARIFICATION_TIMEOUT": "7200",
        "SIDEKICK_APPROVALS": "notify=ask",
        "SIDEKICK_APPROVAL_POLICY": str(policy),
        "SIDEKICK_APPROVAL_TIMEOUT": "1800",
        "SIDEKICK_APPROVERS": "olivia",
        "SIDEKICK_BUDGET_REQUEST_TOKENS": str(REQUEST_TOKENS),
        "SIDEKICK_BUDGET_REQUEST_CALLS": "50",
        "SIDEKICK_BUDGET_REQUEST_USD": "4.5",
        "SIDEKICK_BUDGET_REQUEST_SECONDS": "1800",
        "SIDEKICK_BUDGET_DAILY_TOKENS": "40000000",
        "SIDEKICK_BUDGET_DAILY_USD": "90",
        "SIDEKICK_BUDGET_SESSION_TOKENS": "15000000",
        "SIDEKICK_BUDGET_SESSION_USD": "30",
        "SIDEKICK_BUDGET_REQUEST_TOOL_CALLS": "400",
        "SIDEKICK_BUDGET_STEP_TOKENS": "2000",
        "SIDEKICK_BUDGET_LEASE_SECONDS": "20",
        "SIDEKICK_BUDGET_FLUSH_SECONDS": "1.5",
        "SIDEKICK_BUDGET_ADMISSION_SECONDS": "0.5",
        "SIDEKICK_PRICES": "fake-worker=0.1:0.2",
        "SIDEKICK_GATEWAY_HOST": "127.0.0.1",
        "SIDEKICK_GATEWAY_PORT": str(port),
        "SIDEKICK_AUTH_TOKENS": f"{token('alice')}:alice",
        "SIDEKICK_AUTH_TOKENS_FILE": str(tokens_file),
        "SIDEKICK_A2A_PUSH": "true",
        "SIDEKICK_ALLOW_UNAUTHENTICATED": "true",
        "SIDEKICK_TOKEN": "secret-chat-token",
        "SIDEKICK_RATE_LIMIT_PER_MINUTE": "600",
        "SIDEKICK_MAX_CONCURRENT_REQUESTS": "20",
        "SIDEKICK_MAX_MESSAGE_CHARS": "15000",
        "SIDEKICK_MAX_FRAME_BYTES": "60000",
        "SIDEKICK_CORS_ORIGINS": "http://localhost:5173",
        "SIDEKICK_ALLOWED_HOSTS": "sidekick.example.com",
        "SIDEKICK_MAX_CONNECTIONS": "5000",
        "SIDEKICK_MAX_CONNECTIONS_PER_CLIENT": "100",
        "SIDEKICK_CONNECTION_LIMIT_EXEMPT": "127.0.0.1,::1",
        "SIDEKICK_HTTP_HEAD_TIMEOUT": "9",
        "SIDEKICK_HTTP_MAX_HEAD_BYTES": "30000",
        "SIDEKICK_WS_FIRST_FRAME_TIMEOUT": "25",
        "SIDEKICK_WS_IDLE_TIMEOUT": "3000",
        "SIDEKICK_OPS_PORT": "0",  # one each: four services on one fixed port would clash
        "SIDEKICK_OPS_HOST": "127.0.0.1",
        "SIDEKICK_DATA_DIR": str(tmp / "data"),
        "SIDEKICK_EGRESS_ALLOW": "127.0.0.1:9",
        "SIDEKICK_LOG_LEVEL": "INFO",
        "SIDEKICK_LOG_FORMAT": "text",
        "OTEL_EXPORTER_OTLP_ENDPOINT": otlp,
        "OTEL_EXPORTER_OTLP_HEADERS": "x-secret=secret-otel",
        "BRAVE_SEARCH_API_KEY": "secret-brave",
        "SIDEKICK_BRAVE_BASE_URL": "http://127.0.0.1:9/brave",
        "SIDEKICK_BRAVE_TIMEOUT": "8",
        "SIDEKICK_BRAVE_COUNT": "4",
        "SIDEKICK_RESEARCH_MAX_QUERIES": "3",
        "SIDEKICK_FRESHNESS_TIMEOUT": "4",
        "SENDGRID_API_KEY": "secret-sendgrid",
        "SENDGRID_FROM_EMAIL": "sidekick@example.com",
        "SIDEKICK_SENDGRID_BASE_URL": "http://127.0.0.1:9/sendgrid",
        "SIDEKICK_SENDGRID_TIMEOUT": "12",
        "SIDEKICK_EMAIL_ALLOWED_DOMAINS": "example.com",
        "SIDEKICK_TOOLS_MAX_STEPS": "8",
        "SIDEKICK_TOOLS_RESULT_CHARS": "10000",
        "SIDEKICK_HTTP_TIMEOUT": "9",
        "SIDEKICK_CHROMIUM_PATH": "/usr/bin/chromium",
        "SIDEKICK_BROWSER_TIMEOUT": "15",
        "SIDEKICK_BROWSER_SCREENSHOT_DIR": str(tmp / "shots"),
        "SIDEKICK_PYTHON_CPU_SECONDS": "9",
        "SIDEKICK_PYTHON_MEMORY_MB": "500",
        "SIDEKICK_PYTHON_WALL_SECONDS": "25",
        "SIDEKICK_PYTHON_PROCESSES": "60",
        "SIDEKICK_PYTHON_OUTPUT_CHARS": "7000",
        "SIDEKICK_PYTHON_EXECUTABLE": sys.executable,
        "SIDEKICK_BWRAP": bwrap,
        "SIDEKICK_FILES_ROOT": str(tmp / "sessions"),
        "SIDEKICK_FILES_MAX_BYTES": "900000",
        "SIDEKICK_FILES_QUOTA_MB": "200",
        "SIDEKICK_FILES_QUOTA_ENTRIES": "9000",
        "SIDEKICK_WIKIPEDIA_BASE_URL": "http://127.0.0.1:9/wiki",
        "PUSHOVER_TOKEN": "secret-pushover-token",
        "PUSHOVER_USER": "secret-pushover-user",
        "SIDEKICK_PUSHOVER_BASE_URL": "http://127.0.0.1:9/pushover",
        "SIDEKICK_MCP_CONFIG": str(mcp),
        "SIDEKICK_MCP_CONNECT_TIMEOUT": "20",
        "SIDEKICK_MCP_CALL_TIMEOUT": "50",
        "SIDEKICK_NATS_LOST_EXIT_AFTER": "45",
        "SIDEKICK_NATS_PING_INTERVAL": "2.5",
        "SIDEKICK_NATS_MAX_OUTSTANDING_PINGS": "2",
        "SIDEKICK_NAMESPACE": "everything",
        "SIDEKICK_STREAM_REPLICAS": "1",
        "SIDEKICK_ACK_WAIT": "9",
        "SIDEKICK_HEARTBEAT_INTERVAL": "2",
        "SIDEKICK_MAX_DELIVER": "6",
        "SIDEKICK_MAX_CONCURRENCY": "32",
        # The shared login: each service's own (made by `up`) wins over it.
        "SIDEKICK_NATS_USER": "shared-user",
        "SIDEKICK_NATS_PASSWORD": "secret-nats-password",
        "SIDEKICK_NATS_PASSWORD_FILE": str(secret_file),
        "SIDEKICK_NATS_TOKEN": "secret-nats-token",
        "SIDEKICK_NATS_TOKEN_FILE": str(secret_file),
        "GITHUB_TOKEN": "secret-github",
    }
    for role in ROLES:
        own = role.lower()
        env[f"SIDEKICK_{role}_LLM_BASE_URL"] = model
        env[f"SIDEKICK_{role}_LLM_API_KEY"] = f"secret-{own}-llm"
        env[f"SIDEKICK_{role}_LLM_MODEL"] = f"fake-{own}"
        env[f"SIDEKICK_{role}_LLM_STRUCTURED"] = "json_schema"
        env[f"SIDEKICK_{role}_LLM_FALLBACK_BASE_URL"] = model
        env[f"SIDEKICK_{role}_LLM_FALLBACK_API_KEY"] = f"secret-{own}-fallback"
        env[f"SIDEKICK_{role}_LLM_FALLBACK_MODEL"] = f"fake-{own}"
    for login in LOGINS:
        # Each service's own token and password file: up's password for it is used first.
        env[variable("PASSWORD_FILE", login)] = str(secret_file)
        env[variable("TOKEN", login)] = f"secret-nats-token-{login.lower()}"
        env[variable("TOKEN_FILE", login)] = str(secret_file)
    return env


@pytest.fixture(scope="module")
def everything(
    tmp_path_factory: pytest.TempPathFactory, fake_llm: FakeOpenAI, otlp: FakeOTLP
) -> Iterator[tuple[Up, dict[str, str]]]:
    tmp = tmp_path_factory.mktemp("everything")
    port = free_port()
    env = values(tmp, fake_llm.base_url, otlp.url, port)
    up = Up(tmp, fake_llm.base_url, env, port=port)
    try:
        up.wait_for("Sidekick is up", timeout=180)
        yield up, env
    finally:
        up.kill()


def processes(up: Up) -> dict[str, int]:
    """`up`'s children by name: each service, and nats-server."""
    found: dict[str, int] = {}
    for pid in children_of(up.proc.pid):
        line = cmdline(pid)
        if "nats-server" in line:
            found["nats-server"] = pid
        elif " run " in line:
            found[line.split()[-1]] = pid
    assert set(found) == {*SERVICES, "nats-server"}, found
    return found


def test_every_documented_variable_is_given_a_value_here(tmp_path: Path) -> None:
    """So a new setting in the docs is tested for reaching its processes, or says why not."""
    documented_ = documented_variables()
    env = values(tmp_path, "http://model", "http://otlp", 1)
    missing = documented_ - set(env) - set(EXCLUDED)
    assert not missing, f"documented, neither set in this test nor excluded: {sorted(missing)}"
    assert set(EXCLUDED) <= documented_, sorted(set(EXCLUDED) - documented_)
    assert len(documented_) > 120


def test_each_service_gets_every_setting_its_own_secrets_and_no_others(
    everything: tuple[Up, dict[str, str]],
) -> None:
    up, given = everything
    for service, pid in processes(up).items():
        if service == "nats-server":
            continue
        env = environ(pid)
        wrong = []
        for name, value in given.items():
            holders = SECRET_HOLDERS.get(name)
            if holders is None or service in holders:
                if env.get(name) != value:
                    wrong.append(f"{name}: {env.get(name)!r}, not {value!r}")
            elif name in env:
                wrong.append(f"{name}: a secret of {sorted(holders) or 'no service'}")
        # Its own NATS login, made by `up`; never another service's.
        for other in SERVICES:
            has = variable("PASSWORD", other) in env
            if has is not (other == service):
                wrong.append(f"{variable('PASSWORD', other)}: {'held' if has else 'missing'}")
        assert not wrong, (service, wrong)


def test_nats_server_holds_only_what_its_config_reads(
    everything: tuple[Up, dict[str, str]],
) -> None:
    up, given = everything
    env = environ(processes(up)["nats-server"])
    users = [password_variable(u) for u in (*SERVICES, "admin")]
    assert set(env) <= {"PATH", "HOME", "TZ", *users}, sorted(env)
    assert set(users) <= set(env) and "PATH" in env
    secrets = {given[n] for n in SECRET_HOLDERS if n in given}
    assert not secrets & set(env.values())


async def test_a_request_over_the_request_tokens_budget_set_on_up_stops_at_it(
    everything: tuple[Up, dict[str, str]], fake_llm: FakeOpenAI
) -> None:
    """The attack of the issue: with the limit dropped on the way, the request used twice its
    limit and completed."""
    up, _ = everything
    fake_llm.usage_of = lambda body: (
        (REQUEST_TOKENS * 2, 7) if body["model"] == "fake-worker" else (11, 7)
    )
    async with AuthClient(up.ws_url, "alice", events=True) as alice:
        request_id = await alice.ack("search the tides of Lisbon")
        done = await alice.until_end_of(request_id, timeout=120)
    assert done.end["status"] == "partial", done.frames
    assert "tokens budget" in done.text, done.text
    assert len(fake_llm.chat_calls("fake-worker")) == 1, "no model call after the limit"
