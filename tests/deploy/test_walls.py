"""The walls as deployed: the tools worker (which runs strangers' code) has what bubblewrap needs
and nothing it should not, no NetworkPolicy lets it reach another Sidekick pod but NATS and the
collector, the gVisor component puts it under gVisor, and it alone reads the MCP servers' file
(from a ConfigMap an overlay replaces)."""

from __future__ import annotations

import json
import os
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from services.workers.tools.mcp_config import StdioServer, load
from tests.support.deploy_support import (
    DEPLOY,
    OVERLAYS,
    containers,
    find,
    pod_templates,
    rendered,
    run,
    selects,
    tool,
)

TOOLS = "sidekick-worker-tools"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_tools_worker_gets_user_namespaces_and_only_its_keys(overlay: str) -> None:
    (tools,) = find(rendered(overlay), "Deployment", TOOLS)
    spec = tools["spec"]["template"]["spec"]
    assert spec["hostUsers"] is False
    (c,) = containers(tools)
    context = c["securityContext"]
    assert context["procMount"] == "Unmasked"
    assert context["seccompProfile"] == {"type": "Unconfined"}
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert spec["securityContext"]["runAsNonRoot"] is True
    names = {e["name"] for e in c["env"]}
    assert "SENDGRID_API_KEY" not in names, "the tools worker sends no mail"
    assert {"BRAVE_SEARCH_API_KEY", "PUSHOVER_TOKEN"} <= names
    # Every other Deployment keeps the runtime's default seccomp profile and host users.
    for other in find(rendered(overlay), "Deployment"):
        if other["metadata"]["name"] != TOOLS:
            assert "hostUsers" not in other["spec"]["template"]["spec"]
            assert "procMount" not in containers(other)[0].get("securityContext", {})


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_no_policy_lets_the_tools_worker_reach_another_sidekick_pod(overlay: str) -> None:
    docs = rendered(overlay)
    pods = pod_templates(docs)
    (tools,) = find(docs, "Deployment", TOOLS)
    tools_pod = tools["spec"]["template"]
    reachable: set[str] = set()
    for policy in find(docs, "NetworkPolicy"):
        if not selects(policy["spec"]["podSelector"].get("matchLabels", {}), tools_pod):
            continue
        for rule in policy["spec"].get("egress", []):
            for peer in rule.get("to", []):
                labels = peer.get("podSelector", {}).get("matchLabels")
                if labels is None or "namespaceSelector" in peer:
                    continue
                reachable |= {
                    p["metadata"]["labels"]["app.kubernetes.io/name"]
                    for p in pods
                    if selects(labels, p)
                }
        for rule in policy["spec"].get("ingress", []):
            for peer in rule.get("from", []):
                assert "podSelector" not in peer, f"{policy['metadata']['name']} lets pods in"
    assert reachable == {"nats", "otel-collector"}, reachable


def _pod(name: str) -> dict[str, Any]:
    return {"metadata": {"labels": {"app.kubernetes.io/name": name}}}


def test_the_gvisor_component_runs_the_tools_worker_under_gvisor(tmp_path: Path) -> None:
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    base = DEPLOY / "k8s" / "overlays" / "prod"
    component = DEPLOY / "k8s" / "components" / "gvisor"
    kustomization: dict[str, Any] = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(base, overlay)],
        "components": [os.path.relpath(component, overlay)],
    }
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    out = run(tool("kubectl"), "kustomize", "--load-restrictor=LoadRestrictionsNone", str(overlay))
    assert out.returncode == 0, out.stderr
    docs = tuple(d for d in yaml.safe_load_all(out.stdout) if d)
    for deployment in find(docs, "Deployment"):
        runtime = deployment["spec"]["template"]["spec"].get("runtimeClassName")
        assert (runtime == "gvisor") == (deployment["metadata"]["name"] == TOOLS)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_only_the_bootstrap_job_holds_the_nats_admin_password(overlay: str) -> None:
    docs = rendered(overlay)
    (job,) = find(docs, "Job", "sidekick-bootstrap")
    (c,) = job["spec"]["template"]["spec"]["containers"]
    assert c["args"] == ["bootstrap"]
    env = {e["name"]: e for e in c["env"]}
    password = env["SIDEKICK_NATS_PASSWORD"]["valueFrom"]["secretKeyRef"]["key"]
    assert password == "SIDEKICK_NATS_PASSWORD_ADMIN"
    assert env["SIDEKICK_NATS_USER"]["value"] == "admin"
    assert "@" not in env["SIDEKICK_NATS_URL"]["value"]
    for deployment in find(docs, "Deployment"):
        for container in containers(deployment):
            keys = {
                e.get("valueFrom", {}).get("secretKeyRef", {}).get("key")
                for e in container.get("env", [])
            }
            assert "SIDEKICK_NATS_PASSWORD_ADMIN" not in keys, deployment["metadata"]["name"]


def _mcp_file(docs: tuple[dict[str, Any], ...], tmp_path: Path) -> Path:
    """The MCP servers' file as the tools worker would read it (a copy here)."""
    (tools,) = find(docs, "Deployment", TOOLS)
    (c,) = containers(tools)
    path = PurePosixPath(next(e["value"] for e in c["env"] if e["name"] == "SIDEKICK_MCP_CONFIG"))
    (mount,) = [m for m in c["volumeMounts"] if m["mountPath"] == str(path.parent)]
    assert mount.get("readOnly") is True
    volumes = {v["name"]: v for v in tools["spec"]["template"]["spec"]["volumes"]}
    (config_map,) = find(docs, "ConfigMap", volumes[mount["name"]]["configMap"]["name"])
    local = tmp_path / path.name
    local.write_text(config_map["data"][path.name])
    return local


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_only_the_tools_worker_mounts_the_mcp_servers_file_read_only(
    overlay: str, tmp_path: Path
) -> None:
    local = _mcp_file(rendered(overlay), tmp_path)
    assert load(local).servers == {}, "no MCP server runs unless the operator lists one"
    for other in find(rendered(overlay), "Deployment"):
        if other["metadata"]["name"] != TOOLS:
            env = {e["name"] for e in containers(other)[0].get("env", [])}
            assert "SIDEKICK_MCP_CONFIG" not in env


def test_an_overlay_replaces_the_mcp_servers_file(tmp_path: Path) -> None:
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    servers = {"mcpServers": {"notes": {"command": "notes-mcp", "args": ["--dir", "/tmp"]}}}
    (overlay / "mcp.json").write_text(json.dumps(servers))
    kustomization: dict[str, Any] = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(DEPLOY / "k8s" / "overlays" / "prod", overlay)],
        "configMapGenerator": [
            {"name": "sidekick-mcp", "behavior": "replace", "files": ["mcp.json"]}
        ],
    }
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    out = run(tool("kubectl"), "kustomize", "--load-restrictor=LoadRestrictionsNone", str(overlay))
    assert out.returncode == 0, out.stderr
    docs = tuple(d for d in yaml.safe_load_all(out.stdout) if d)
    local = _mcp_file(docs, tmp_path)
    (notes,) = load(local).servers.values()
    assert isinstance(notes, StdioServer) and notes.command == "notes-mcp"
