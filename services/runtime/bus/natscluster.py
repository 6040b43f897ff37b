"""One node's part of a nats-server cluster configuration (`sidekick nats-config --server-name
... --routes ...`): its name, where it listens, JetStream, and the `cluster {}` block with the
routes to the other nodes, authenticated when a route user is given.

Route credentials: the node checks the incoming routes against `route_user` and the password in
its environment (`$SIDEKICK_NATS_PASSWORD_ROUTE`, like the users' passwords); a route it opens
must carry the password inside the route's URL (nats-server takes it from nowhere else), so the
text holds that password when one is given: keep such a file private (mode 600), as `write`
does. Without a route user, routes are not authenticated and only the nodes may reach them
(deploy/k8s does that with a NetworkPolicy).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlsplit

from services.runtime.bus.natsauth import password_variable

ROUTE = "route"


@dataclass(frozen=True)
class Node:
    """One node of a cluster."""

    server_name: str
    cluster_name: str
    routes: Sequence[str]  # every node's route URL (its own is fine: the server skips it)
    cluster_listen: str = "0.0.0.0:6222"
    listen: str | None = None  # host:port for clients; None: the server's default (4222)
    http: str | None = None  # host:port of the monitoring endpoint
    store_dir: str | None = None
    route_user: str | None = None
    route_password: str | None = None  # the literal password routes carry (see above)


def render_node(node: Node) -> str:
    """The node's own lines (to go with `natsauth.render`'s users)."""

    def q(value: str) -> str:
        return json.dumps(value)

    lines = [f"server_name: {q(node.server_name)}"]
    if node.listen:
        lines.append(f"listen: {q(node.listen)}")
    if node.http:
        lines.append(f"http: {q(node.http)}")
    store = f"store_dir: {q(node.store_dir)}" if node.store_dir else ""
    lines += [f"jetstream {{ {store} }}", "", "cluster {", f"  name: {q(node.cluster_name)}"]
    lines.append(f"  listen: {q(node.cluster_listen)}")
    if node.route_user:
        variable = "$" + password_variable(ROUTE)
        lines.append(f"  authorization {{ user: {q(node.route_user)}, password: {variable} }}")
    lines.append("  routes: [")
    for route in node.routes:
        lines.append(f"    {q(with_route_login(route, node.route_user, node.route_password))}")
    lines += ["  ]", "  connect_retries: 120", "}", ""]
    return "\n".join(lines)


def with_route_login(route: str, user: str | None, password: str | None) -> str:
    parts = urlsplit(route if "://" in route else f"nats-route://{route}")
    where = parts.netloc.rpartition("@")[2]
    if user is None:
        return f"{parts.scheme}://{where}"
    if password is None:
        raise ValueError(
            f"routes with user {user!r} need its password (${password_variable(ROUTE)})"
        )
    return f"{parts.scheme}://{quote(user, safe='')}:{quote(password, safe='')}@{where}"


def write(path: Path, text: str) -> Path:
    """Write a config that may hold a route password: owner-only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o600)
    return path
