"""Connecting like a cluster client: server lists, a login apart from the URL (a service's own
first), a reconnect that no error can end, and a service that exits when its bus is gone too
long or says clearly that it has no login on a server with users."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import nats.errors
import pytest
from faststream.nats import NatsBroker

from services.cli.up import SECRETS
from services.runtime.bus.natslogin import Login, split_servers, variable
from services.runtime.bus.natsserver import NatsServer
from services.runtime.bus.natswatch import Watch, cluster_broker
from tests.support.harness import System, free_port, http_get, sidekick
from tests.support.lockednats import LockedNats


@pytest.mark.fast
def test_a_list_of_servers_is_split_and_each_gets_a_scheme() -> None:
    assert split_servers(" nats://a:1, b:2 ,,tls://c:3") == [
        "nats://a:1",
        "nats://b:2",
        "tls://c:3",
    ]
    with pytest.raises(ValueError, match="no server"):
        split_servers(" , ")


@pytest.mark.fast
def test_a_login_in_the_url_is_taken_out_and_used_for_every_server() -> None:
    login = Login.from_env("nats://gateway:s%40cret@a:4222,nats://b:4222", {})
    assert login.servers == ("nats://a:4222", "nats://b:4222")
    assert (login.user, login.password) == ("gateway", "s@cret")
    options = login.options()
    assert options["servers"] == ["nats://a:4222", "nats://b:4222"]
    assert (options["user"], options["password"]) == ("gateway", "s@cret")
    assert "s@cret" not in repr(login) and "s@cret" not in login.where
    token = Login.from_env("nats://t0ken@a:4222", {})
    assert token.token == "t0ken" and token.user is None


@pytest.mark.fast
def test_a_services_own_login_wins_over_the_shared_one_and_files_are_read(
    tmp_path: Path,
) -> None:
    secret = tmp_path / "pw"
    secret.write_text("from-file\n")
    env = {
        "SIDEKICK_NATS_USER": "shared",
        "SIDEKICK_NATS_PASSWORD": "shared-pw",
        variable("USER", "workers"): "workers",
        variable("PASSWORD_FILE", "workers"): str(secret),
        variable("CREDS", "gateway"): "/etc/nats/gateway.creds",
    }
    workers = Login.from_env("nats://a:1", env, "workers")
    assert (workers.user, workers.password) == ("workers", "from-file")
    assert Login.from_env("nats://a:1", env, "frontline").user == "shared"
    gateway = Login.from_env("nats://a:1", env, "gateway")
    assert gateway.options()["user_credentials"] == "/etc/nats/gateway.creds"
    assert Login.from_env("nats://a:1", {}).anonymous


@pytest.mark.fast
def test_tls_is_on_for_a_tls_url_or_a_configured_ca_and_off_otherwise() -> None:
    import ssl

    assert "tls" not in Login.from_env("nats://a:1", {}).options()
    assert isinstance(Login.from_env("tls://a:1", {}).options()["tls"], ssl.SSLContext)
    ca = ssl.get_default_verify_paths().cafile or "/etc/ssl/certs/ca-certificates.crt"
    login = Login.from_env("nats://a:1", {"SIDEKICK_NATS_TLS_CA": ca})
    context = login.options()["tls"]
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    with pytest.raises(FileNotFoundError):
        Login.from_env("nats://a:1", {"SIDEKICK_NATS_TLS_CA": "/no/such/ca.pem"}).options()


@pytest.mark.fast
def test_a_service_holds_its_own_nats_password_and_never_another_services() -> None:
    env = {variable("PASSWORD", s): s for s in ("gateway", "workers")}
    env["SIDEKICK_NATS_PASSWORD"] = "shared"
    kept = SECRETS.environment("gateway", env)
    assert variable("PASSWORD", "gateway") in kept and "SIDEKICK_NATS_PASSWORD" in kept
    assert variable("PASSWORD", "workers") not in kept


@pytest.mark.fast
async def test_an_authorization_error_on_reconnect_is_logged_once_and_never_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    login = Login.from_env("nats://gateway:pw@127.0.0.1:1", {})
    # The cause: FastStream's own error callback re-raises it (inside nats-py's reconnect
    # task, that ends the task and the connection for good).
    # What nats-py's reconnect task hands the callback when a node refuses the login:
    refused = nats.errors.Error("nats: 'Authorization Violation'")
    plain = NatsBroker(["nats://127.0.0.1:1"])
    with pytest.raises(nats.errors.Error):
        await plain._connection_kwargs["error_cb"](refused)
    broker = cluster_broker(login, Watch("gateway", login))
    options = broker._connection_kwargs
    assert options["servers"] == ["nats://127.0.0.1:1"] and options["user"] == "gateway"
    with caplog.at_level(logging.WARNING, logger="sidekick.nats"):
        for _ in range(5):
            await options["error_cb"](refused)
            await options["error_cb"](ConnectionRefusedError("Connect call failed"))
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert "refused user 'gateway' (authorization violation)" in lines[0]
    assert "pw" not in " ".join(lines).replace("the servers", "")


def test_a_service_whose_bus_is_gone_too_long_says_so_then_exits_to_be_restarted(
    lone_nats: NatsServer, lone_evaluator: System
) -> None:
    ops = lone_evaluator.ops_url("evaluator")
    lone_nats.stop()
    lost_at = time.monotonic()
    said = ""
    while time.monotonic() - lost_at < 3.5:
        code, said = http_get(f"{ops}/healthz")
        if "exits after 4 s" in said:
            break
        time.sleep(0.2)
    assert code == 200 and "lost" in said and "exits after 4 s" in said, said
    assert http_get(f"{ops}/readyz")[0] == 503
    proc = lone_evaluator.procs["evaluator"]
    assert proc.wait(30) == 75
    gone = time.monotonic() - lost_at
    log = lone_evaluator.log("evaluator")
    assert 4 <= gone < 25, gone
    assert log.count("NATS has been unreachable for") == 1, log[-2000:]
    assert "Traceback" not in log, log[-3000:]


def test_a_service_without_a_login_on_a_server_with_users_says_so_and_exits(
    nats_server: LockedNats, tmp_path: Path
) -> None:
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("SIDEKICK_")}
    env.update({"SIDEKICK_NATS_URL": nats_server.plain_url, "SIDEKICK_OPS_PORT": str(free_port())})
    done = sidekick("run", "evaluator", env=env, timeout=60)
    out = done.stdout + done.stderr
    assert done.returncode == 78, out[-2000:]
    assert "requires a login and this service has none" in out
    assert variable("USER", "evaluator") in out and variable("PASSWORD", "evaluator") in out
    assert "Traceback" not in out
