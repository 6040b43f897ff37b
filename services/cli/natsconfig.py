"""`sidekick nats-config`: print the locked-down nats-server configuration; with
`--server-name` and `--routes`, one cluster node's (services/runtime/bus/natscluster.py)."""

from __future__ import annotations

import argparse
import os

from services.runtime.base.settings import Settings
from services.runtime.bus import natsauth, natscluster


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("cluster node (all of --server-name and --routes)")
    group.add_argument("--server-name", default=None, help="this node's unique name")
    group.add_argument("--cluster-name", default="sidekick", help="the cluster's name")
    group.add_argument(
        "--routes", default=None, help="every node's route URL, comma-separated (host:6222)"
    )
    group.add_argument("--cluster-listen", default="0.0.0.0:6222", help="where routes come in")
    group.add_argument("--listen", default=None, help="host:port for clients (default 4222)")
    group.add_argument("--http", default=None, help="host:port of the monitoring endpoint")
    group.add_argument("--store-dir", default=None, help="JetStream's directory")
    group.add_argument(
        "--route-user",
        default=None,
        help="authenticate routes as this user; its password is $SIDEKICK_NATS_PASSWORD_ROUTE "
        "(then written into the routes: keep the output private)",
    )


def nats_config(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    tls = None
    if args.tls_cert or args.tls_key:
        if not (args.tls_cert and args.tls_key):
            parser.error("--tls-cert and --tls-key go together")
        tls = natsauth.TLS(args.tls_cert, args.tls_key, args.tls_ca, args.tls_verify)
    namespace = args.namespace or Settings().namespace
    text = natsauth.render(namespace, admin=args.admin, tls=tls)
    if args.server_name or args.routes:
        if not (args.server_name and args.routes):
            parser.error("--server-name and --routes go together")
        password = os.environ.get(natsauth.password_variable(natscluster.ROUTE))
        if args.route_user and not password:
            parser.error(f"--route-user needs ${natsauth.password_variable(natscluster.ROUTE)}")
        node = natscluster.Node(
            server_name=args.server_name,
            cluster_name=args.cluster_name,
            routes=[r.strip() for r in args.routes.split(",") if r.strip()],
            cluster_listen=args.cluster_listen,
            listen=args.listen,
            http=args.http,
            store_dir=args.store_dir,
            route_user=args.route_user,
            route_password=password if args.route_user else None,
        )
        text = natscluster.render_node(node) + "\n" + text
    print(text, end="")
    return 0
