"""CI checks of deploy/k8s, offline: the overlays render and validate (core resources with
kubernetes-validate, custom resources against deploy/schemas/), the manifests refer to each other
correctly, the pods run locked down, and the NATS users and cluster config work (run as a local
3-node cluster)."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate  # type: ignore[import-untyped]
import pytest

from services.runtime.bus import natsauth
from tests.support.deploy_support import (
    CUSTOM_SCHEMAS,
    DEPLOY,
    K8S_VERSION,
    MODEL_CALLERS,
    OVERLAYS,
    SECRET_NAME,
    WORKER_KINDS,
    NatsCluster,
    containers,
    find,
    pod_templates,
    rendered,
    run,
    scrape,
    selects,
)

# --- Kubernetes -------------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_overlay_renders_with_kubectl_kustomize(overlay: str) -> None:
    kinds = {doc["kind"] for doc in rendered(overlay)}
    assert {
        "Namespace",
        "ConfigMap",
        "Deployment",
        "StatefulSet",
        "Service",
        "Ingress",
        "PodDisruptionBudget",
        "NetworkPolicy",
        "ScaledObject",
        "PodMonitor",
        "ServiceMonitor",
        "PrometheusRule",
    } <= kinds
    assert "Secret" not in kinds, "secrets are created in the cluster, never rendered from git"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_core_resources_pass_strict_kubernetes_validation(overlay: str) -> None:
    failures = []
    for doc in rendered(overlay):
        if (doc["apiVersion"], doc["kind"]) in CUSTOM_SCHEMAS:
            continue
        try:
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        except (kubernetes_validate.ValidationError, kubernetes_validate.SchemaNotFoundError) as e:
            failures.append(f"{doc['kind']}/{doc['metadata']['name']}: {getattr(e, 'message', e)}")
    assert failures == []


def test_strict_validation_rejects_a_misspelt_field() -> None:
    """The validator is live: a field Kubernetes does not know fails."""
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "x"},
        "spec": {"ports": [{"port": 80}], "selectr": {"a": "b"}},
    }
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(service, K8S_VERSION, strict=True)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_custom_resources_match_the_schemas_kept_in_the_repo(overlay: str) -> None:
    failures = []
    for doc in rendered(overlay):
        schema_file = CUSTOM_SCHEMAS.get((doc["apiVersion"], doc["kind"]))
        if schema_file is None:
            continue
        schema = json.loads((DEPLOY / "schemas" / schema_file).read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        for error in jsonschema.Draft202012Validator(schema).iter_errors(doc):
            failures.append(f"{doc['kind']}/{doc['metadata']['name']}: {error.message}")
    assert failures == []


def test_scaledobject_schema_rejects_a_number_where_keda_needs_a_string() -> None:
    scaled = next(d for d in rendered("dev") if d["kind"] == "ScaledObject")
    broken = json.loads(json.dumps(scaled))
    broken["spec"]["triggers"][0]["metadata"]["lagThreshold"] = 10
    del broken["spec"]["triggers"][0]["metadata"]["consumer"]
    schema = json.loads((DEPLOY / "schemas" / "scaledobject.json").read_text())
    messages = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(broken)]
    assert any("is not of type 'string'" in m for m in messages), messages
    assert any("'consumer' is a required property" in m for m in messages), messages


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_worker_kind_scales_on_its_own_jetstream_consumer(overlay: str) -> None:
    docs = rendered(overlay)
    namespace = find(docs, "Namespace")[0]["metadata"]["name"]
    scaled = {d["spec"]["scaleTargetRef"]["name"]: d for d in find(docs, "ScaledObject")}
    for kind in WORKER_KINDS:
        name = f"sidekick-worker-{kind}"
        (deployment,) = find(docs, "Deployment", name)
        assert containers(deployment)[0]["args"] == ["run", "workers", "--kinds", kind]
        assert "replicas" not in deployment["spec"], "KEDA owns a worker's replica count"
        trigger = scaled.pop(name)["spec"]["triggers"][0]
        assert trigger["type"] == "nats-jetstream"
        assert trigger["metadata"]["stream"] == "SIDEKICK_WORK"
        assert trigger["metadata"]["consumer"] == f"sidekick_worker_{kind}"
        endpoint = trigger["metadata"]["natsServerMonitoringEndpoint"]
        assert endpoint == f"nats-headless.{namespace}.svc.cluster.local:8222"
    assert scaled == {}, "every ScaledObject targets a worker Deployment"
    for so in find(docs, "ScaledObject"):
        assert so["spec"]["minReplicaCount"] <= so["spec"]["maxReplicaCount"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_selectors_and_references_point_at_things_that_exist(overlay: str) -> None:
    docs = rendered(overlay)
    pods = pod_templates(docs)
    for doc in find(docs, "Service") + find(docs, "PodDisruptionBudget") + find(docs, "PodMonitor"):
        spec = doc["spec"]
        selector = spec["selector"].get("matchLabels", spec["selector"])
        matched = [p for p in pods if selects(selector, p)]
        assert matched, f"{doc['kind']}/{doc['metadata']['name']} selects no pod"
        for port in spec.get("ports", []) + spec.get("podMetricsEndpoints", []):
            name = port.get("targetPort", port.get("port"))
            named = {p["name"] for m in matched for c in containers(m) for p in c.get("ports", [])}
            assert name in named, f"{doc['metadata']['name']}: no container port {name}"
    for policy in find(docs, "NetworkPolicy"):
        selector = policy["spec"]["podSelector"].get("matchLabels", {})
        assert any(selects(selector, p) for p in pods), policy["metadata"]["name"]
    services = {s["metadata"]["name"]: s for s in find(docs, "Service")}
    for ingress in find(docs, "Ingress"):
        for rule in ingress["spec"]["rules"]:
            for path in rule["http"]["paths"]:
                backend = path["backend"]["service"]
                ports = {p["name"] for p in services[backend["name"]]["spec"]["ports"]}
                assert backend["port"]["name"] in ports
    config_maps = {c["metadata"]["name"] for c in find(docs, "ConfigMap")}
    for pod in pods:
        for c in containers(pod):
            for source in c.get("envFrom", []):
                assert source["configMapRef"]["name"] in config_maps
            for env in c.get("env", []):
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    # Keys are optional (a service without one starts and says what to set),
                    # except the NATS passwords: nothing works without them.
                    nats_password = ref["key"].startswith("SIDEKICK_NATS_PASSWORD_")
                    assert ref["name"] == SECRET_NAME, env
                    assert ref.get("optional", False) is not nats_password, env
        for volume in pod["spec"].get("volumes", []):
            if "configMap" in volume:
                assert volume["configMap"]["name"] in config_maps


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_runs_locked_down_with_probes_and_resources(overlay: str) -> None:
    docs = rendered(overlay)
    (config,) = [
        c for c in find(docs, "ConfigMap") if c["metadata"]["name"].startswith("sidekick-config")
    ]
    settings = config["data"]
    assert settings["SIDEKICK_OPS_HOST"] == settings["SIDEKICK_GATEWAY_HOST"] == "0.0.0.0"
    ops_port, gateway_port = (
        int(settings["SIDEKICK_OPS_PORT"]),
        int(settings["SIDEKICK_GATEWAY_PORT"]),
    )
    for pod in pod_templates(docs):
        spec = pod["spec"]
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
        assert spec.get("automountServiceAccountToken") is False
        for c in containers(pod):
            sc = c["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True, c["name"]
            assert sc["allowPrivilegeEscalation"] is False, c["name"]
            assert sc["capabilities"]["drop"] == ["ALL"], c["name"]
            for bound in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(c["resources"][bound]), c["name"]
        if pod["metadata"]["labels"].get("app.kubernetes.io/name") != "sidekick":
            continue
        (c,) = containers(pod)
        gateway = c["args"] == ["run", "gateway"]
        (port,) = c["ports"]
        assert port["containerPort"] == (gateway_port if gateway else ops_port)
        assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port["name"]}
        ready = "/readyz?scope=self" if gateway else "/readyz"  # the gateway's own, not all
        assert c["readinessProbe"]["httpGet"] == {"path": ready, "port": port["name"]}
        assert {"name": "tmp", "mountPath": "/tmp"} in c["volumeMounts"]
        assert any(v["name"] == "tmp" and "emptyDir" in v for v in spec["volumes"])
        assert re.fullmatch(r"registry\.example\.com/sidekick(-browser)?:[\w.]+", c["image"]), (
            "the overlay sets the registry and tag of every Sidekick image"
        )


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_tools_workers_run_the_browser_image_with_shared_memory(overlay: str) -> None:
    for deployment in find(rendered(overlay), "Deployment"):
        (c, *_) = containers(deployment)
        tools = deployment["metadata"]["name"] == "sidekick-worker-tools"
        assert ("sidekick-browser:" in c["image"]) == tools, deployment["metadata"]["name"]
    (tools,) = find(rendered(overlay), "Deployment", "sidekick-worker-tools")
    (c,) = containers(tools)
    assert {"name": "dshm", "mountPath": "/dev/shm"} in c["volumeMounts"]
    (shm,) = [v for v in tools["spec"]["template"]["spec"]["volumes"] if v["name"] == "dshm"]
    assert shm["emptyDir"]["medium"] == "Memory"
    (general,) = find(rendered(overlay), "Deployment", "sidekick-worker-general")
    memory = [containers(d)[0]["resources"]["limits"]["memory"] for d in (tools, general)]
    assert memory[0] != memory[1], "Chromium gets more memory than a plain worker"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_only_the_gateway_is_reachable_and_only_model_callers_reach_the_internet(
    overlay: str,
) -> None:
    docs = rendered(overlay)
    policies = find(docs, "NetworkPolicy")
    pods = pod_templates(docs)
    deny = [p for p in policies if p["spec"]["podSelector"] == {}]
    assert any(
        set(p["spec"]["policyTypes"]) == {"Ingress", "Egress"}
        and not p["spec"].get("ingress")
        and not p["spec"].get("egress")
        for p in deny
    ), "a default-deny policy"
    for policy in policies:
        selected = [
            p for p in pods if selects(policy["spec"]["podSelector"].get("matchLabels", {}), p)
        ]
        components = {p["metadata"]["labels"].get("app.kubernetes.io/component") for p in selected}
        for rule in policy["spec"].get("ingress", []):
            for peer in rule.get("from", []):
                ns = peer.get("namespaceSelector", {}).get("matchLabels", {})
                if ns.get("kubernetes.io/metadata.name") == "ingress-nginx":
                    assert components == {"gateway"}, policy["metadata"]["name"]
        for rule in policy["spec"].get("egress", []):
            if any("ipBlock" in peer for peer in rule.get("to", [])):
                assert components and components <= MODEL_CALLERS, policy["metadata"]["name"]
                ports = {p["port"] for p in rule["ports"]}
                assert ports == {443} or (components == {"worker"} and ports == {80, 443})
                excluded = {e for peer in rule["to"] for e in peer["ipBlock"]["except"]}
                assert {
                    "10.0.0.0/8",
                    "172.16.0.0/12",
                    "192.168.0.0/16",
                    "169.254.0.0/16",
                } <= excluded
    (ingress,) = find(docs, "Ingress")
    backends = {
        p["backend"]["service"]["name"]
        for r in ingress["spec"]["rules"]
        for p in r["http"]["paths"]
    }
    assert backends == {"sidekick-gateway"}
    public = {p["path"] for r in ingress["spec"]["rules"] for p in r["http"]["paths"]}
    assert public.isdisjoint({"/metrics", "/healthz", "/readyz"})
    assert all(
        p["pathType"] != "Prefix" or p["path"] != "/"
        for r in ingress["spec"]["rules"]
        for p in r["http"]["paths"]
    ), "a / prefix would publish /metrics"
    annotations = ingress["metadata"]["annotations"]
    assert int(annotations["nginx.ingress.kubernetes.io/proxy-read-timeout"]) >= 3600


def test_dev_runs_one_replica_and_prod_more_with_tls() -> None:
    for overlay, replicas in (("dev", 1), ("prod", 3)):
        docs = rendered(overlay)
        for service in ("gateway", "frontline", "orchestrator", "evaluator"):
            (deployment,) = find(docs, "Deployment", f"sidekick-{service}")
            assert deployment["spec"]["replicas"] == replicas, (overlay, service)
        (nats,) = find(docs, "StatefulSet", "nats")
        assert nats["spec"]["replicas"] == 3, "JetStream keeps its quorum in every overlay"
    (prod_ingress,) = find(rendered("prod"), "Ingress")
    assert prod_ingress["spec"]["tls"][0]["hosts"] == [prod_ingress["spec"]["rules"][0]["host"]]
    assert "tls" not in find(rendered("dev"), "Ingress")[0]["spec"]
    (dev_gw,) = find(rendered("dev"), "Deployment", "sidekick-gateway")
    (prod_gw,) = find(rendered("prod"), "Deployment", "sidekick-gateway")
    assert containers(prod_gw)[0]["resources"] != containers(dev_gw)[0]["resources"]


# --- NATS users -------------------------------------------------------------------------------


def nats_config(docs: tuple[dict[str, Any], ...]) -> dict[str, str]:
    (config,) = [c for c in find(docs, "ConfigMap") if c["metadata"]["name"].startswith("nats-")]
    return dict(config["data"])


def sidekick_settings(docs: tuple[dict[str, Any], ...]) -> dict[str, str]:
    (config,) = [
        c for c in find(docs, "ConfigMap") if c["metadata"]["name"].startswith("sidekick-config")
    ]
    return dict(config["data"])


def test_the_committed_nats_users_are_what_sidekick_nats_config_prints() -> None:
    """deploy/k8s/base/nats/auth.conf cannot drift from natsauth: regenerate it with the
    command, for the namespace the services use."""
    namespace = sidekick_settings(rendered("prod"))["SIDEKICK_NAMESPACE"]
    out = run(
        sys.executable, "-m", "services.cli", "nats-config", "--namespace", namespace, "--admin"
    )
    assert out.returncode == 0, out.stderr
    committed = (DEPLOY / "k8s" / "base" / "nats" / "auth.conf").read_text()
    assert committed == out.stdout, (
        f"run `sidekick nats-config --namespace {namespace} --admin "
        "> deploy/k8s/base/nats/auth.conf`"
    )
    for overlay in OVERLAYS:
        config = nats_config(rendered(overlay))
        assert config["auth.conf"] == committed
        assert re.search(r"^include \./auth\.conf$", config["nats.conf"], re.M), overlay


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_service_connects_to_nats_as_its_own_user(overlay: str) -> None:
    docs = rendered(overlay)
    assert "SIDEKICK_NATS_URL" not in sidekick_settings(docs), "no shared, anonymous URL"
    users = re.findall(r'^\s*\{?\s*user: "(\w+)"', nats_config(docs)["auth.conf"], re.M)
    assert sorted(users) == sorted([*natsauth.SERVICES, natsauth.ADMIN]), "one user per service"
    passwords = re.findall(r"\bpassword: ([^\s,}]+)", nats_config(docs)["auth.conf"])
    assert passwords == [f"${natsauth.password_variable(u)}" for u in users], "no literal password"

    (nats,) = find(docs, "StatefulSet", "nats")
    server_env = {
        e["name"]: e["valueFrom"]["secretKeyRef"]
        for e in containers(nats)[0]["env"]
        if e["name"].startswith("SIDEKICK_NATS_PASSWORD_")
    }
    assert server_env == {
        natsauth.password_variable(u): {"name": SECRET_NAME, "key": natsauth.password_variable(u)}
        for u in users
    }, "the server reads every user's password, and only those, from the Secret"

    key_of: dict[str, str] = {}
    for deployment in find(docs, "Deployment"):
        pod = deployment["spec"]["template"]
        if pod["metadata"]["labels"].get("app.kubernetes.io/name") != "sidekick":
            continue
        component = pod["metadata"]["labels"]["app.kubernetes.io/component"]
        service = "workers" if component == "worker" else component
        (c,) = containers(deployment)
        env = c["env"]
        names = [e["name"] for e in env]
        assert len(names) == len(set(names)), deployment["metadata"]["name"]
        keys = [
            e["valueFrom"]["secretKeyRef"]["key"]
            for e in env
            if e.get("valueFrom", {})
            .get("secretKeyRef", {})
            .get("key", "")
            .startswith("SIDEKICK_NATS_PASSWORD_")
        ]
        assert keys == [natsauth.password_variable(service)], deployment["metadata"]["name"]
        key_of.setdefault(service, keys[0])
        assert key_of[service] == keys[0]
        by_name = {e["name"]: e.get("value") for e in env}  # the login apart from the URL
        assert by_name["SIDEKICK_NATS_USER"] == service and "SIDEKICK_NATS_PASSWORD" in by_name
        pods = [f"nats://nats-{i}.nats-headless:4222" for i in range(3)]
        assert by_name["SIDEKICK_NATS_URL"] == ",".join(pods), "every node is a server"
    assert sorted(key_of) == sorted(natsauth.SERVICES), "every service has a Deployment"
    assert len(set(key_of.values())) == len(key_of), "no two services share credentials"
    assert natsauth.password_variable(natsauth.ADMIN) not in key_of.values()


def test_the_nats_configmap_runs_a_jetstream_cluster_that_requires_each_users_password(
    tmp_path: Path,
) -> None:
    """The rendered config, on three local nodes (addresses and paths swapped for local ones):
    the routes form without credentials, a replicated stream works for a service connecting as
    its own user, a wrong password or none is refused, and the monitoring port (probes, the
    exporter, KEDA) answers without auth."""
    config = nats_config(rendered("prod"))
    creds = natsauth.Credentials.generate((*natsauth.SERVICES, natsauth.ADMIN))
    with NatsCluster(tmp_path, config, creds.env()) as cluster:
        for monitor in cluster.monitor_urls:
            routes = json.loads(scrape(f"{monitor}/routez"))
            assert routes["num_routes"] > 0, "the routes need no password"
            assert json.loads(scrape(f"{monitor}/varz"))["server_name"].startswith("nats-")
            assert "config" in json.loads(scrape(f"{monitor}/jsz?consumers=true"))
        asyncio.run(cluster.check_auth(creds))
