"""`sidekick nats-config`: print the locked-down nats-server configuration."""

from __future__ import annotations

import argparse

from services.runtime.base.settings import Settings
from services.runtime.bus import natsauth


def nats_config(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    tls = None
    if args.tls_cert or args.tls_key:
        if not (args.tls_cert and args.tls_key):
            parser.error("--tls-cert and --tls-key go together")
        tls = natsauth.TLS(args.tls_cert, args.tls_key, args.tls_ca, args.tls_verify)
    namespace = args.namespace or Settings().namespace
    print(natsauth.render(namespace, admin=args.admin, tls=tls), end="")
    return 0
