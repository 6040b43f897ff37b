"""CI checks of what watches Sidekick, offline: the alert rules pass promtool's checks and unit
tests, the dashboards are valid and generated, the collector config is consistent, and every
metric a dashboard or an alert queries is exported by a running service."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import yaml

from tests.support.deploy_support import (
    DEPLOY,
    containers,
    dashboard_queries,
    find,
    metric_names,
    queryable_names,
    rendered,
    run,
    scrape,
    tool,
)
from tests.support.harness import ROOT, SERVICES, System

# Series that no Sidekick service exports, each named on purpose: the NATS exporter's (run with
# -prefix=nats -jsz=all). A dashboard or alert may query only these besides our own.
EXTERNAL_METRICS = {
    "nats_consumer_num_pending",
    "nats_consumer_num_ack_pending",
    "nats_consumer_num_redelivered",
    "nats_consumer_num_waiting",
    "nats_stream_total_messages",
    "nats_stream_total_bytes",
    "nats_stream_last_seq",
    "nats_varz_connections",
    "nats_varz_mem",
    "nats_varz_cpu",
}


# --- Prometheus -------------------------------------------------------------------------------


def test_alert_rules_pass_promtool_check() -> None:
    out = run(tool("promtool"), "check", "rules", "deploy/prometheus/alerts.yaml")
    assert out.returncode == 0, out.stdout + out.stderr


def test_alert_rules_pass_their_promtool_unit_tests() -> None:
    out = run(tool("promtool"), "test", "rules", "deploy/prometheus/alerts.test.yaml")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def test_the_prometheusrule_carries_exactly_the_tested_rules() -> None:
    rules = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yaml").read_text())
    crd = yaml.safe_load((DEPLOY / "k8s/base/monitoring/prometheusrule.yaml").read_text())
    assert crd["spec"] == rules, (
        "copy deploy/prometheus/alerts.yaml's groups into the PrometheusRule"
    )
    names = {r["alert"] for g in rules["groups"] for r in g["rules"]}
    runbook = (ROOT / "docs" / "operations.md").read_text()
    for name in names:
        assert f"### {name}" in runbook, f"docs/operations.md explains {name}"


# --- Grafana ----------------------------------------------------------------------------------


def test_dashboards_are_what_generate_py_writes() -> None:
    out = run(sys.executable, str(DEPLOY / "grafana" / "generate.py"), "--check")
    assert out.returncode == 0, out.stdout + out.stderr


def test_dashboards_read_from_the_datasource_variable() -> None:
    files = sorted((DEPLOY / "grafana" / "dashboards").glob("*.json"))
    assert {f.stem for f in files} == {*SERVICES, "overview", "nats"}, "one per service, and more"
    uids = set()
    for path in files:
        board = json.loads(path.read_text())
        uids.add(board["uid"])
        (variable,) = [v for v in board["templating"]["list"] if v["name"] == "datasource"]
        assert (variable["type"], variable["query"]) == ("datasource", "prometheus")
        ids = [p["id"] for p in board["panels"]]
        assert len(ids) == len(set(ids)), path.name
        for panel in board["panels"]:
            grid = panel["gridPos"]
            assert grid["x"] + grid["w"] <= 24, (path.name, panel["title"])
            if panel["type"] == "row":
                continue
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            assert panel["targets"], panel["title"]
            for target in panel["targets"]:
                assert target["datasource"]["uid"] == "${datasource}"
    assert len(uids) == len(files)


def test_dashboard_queries_are_valid_promql(tmp_path: Path) -> None:
    """promtool parses every panel query, as a recording rule with Grafana's variables filled."""
    rules = [
        {"record": f"dashboard:query:{i}", "expr": expr}
        for i, expr in enumerate(sorted(dashboard_queries(substitute=True)))
    ]
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}))
    out = run(tool("promtool"), "check", "rules", str(path))
    assert out.returncode == 0, out.stdout + out.stderr


# --- OpenTelemetry Collector ------------------------------------------------------------------


def test_collector_pipelines_use_defined_components_and_their_settings_exist() -> None:
    text = (DEPLOY / "otel" / "collector.yaml").read_text()
    config = yaml.safe_load(text)
    service = config["service"]
    assert set(service["extensions"]) <= set(config["extensions"])
    for name, pipeline in service["pipelines"].items():
        for section in ("receivers", "processors", "exporters"):
            assert set(pipeline[section]) <= set(config[section]), (name, section)
        assert pipeline["processors"][0] == "memory_limiter", "refuse data before running out"
        assert pipeline["processors"][-1] == "batch"
    assert any(e.startswith("otlp") for e in service["pipelines"]["traces"]["exporters"])
    assert "prometheus" in service["pipelines"]["metrics"]["exporters"]
    (collector,) = find(rendered("prod"), "Deployment", "otel-collector")
    (container,) = containers(collector)
    env = {e["name"] for e in container["env"]}
    assert set(re.findall(r"\$\{env:(\w+)\}", text)) <= env
    ports = {p["containerPort"] for p in container["ports"]}
    endpoints = re.findall(r"endpoint: 0\.0\.0\.0:(\d+)", text)
    assert {int(p) for p in endpoints} == ports


# --- Metrics coverage -------------------------------------------------------------------------


def test_promql_metric_names_are_found_in_expressions() -> None:
    expr = (
        'histogram_quantile(0.95, sum by (le, role) (rate(a_bucket{namespace=~"$x", b="c{d}"}'
        "[$__rate_interval]))) / sum without (pod) (b_total offset 1h) or vector(0) "
        "and on (job) up > bool 1e3 unless c:recorded"
    )
    assert metric_names(expr) == {"a_bucket", "b_total", "up", "c:recorded"}
    assert metric_names("label_values(sidekick_ready, namespace)") == {"sidekick_ready"}


def test_every_metric_a_dashboard_or_alert_queries_is_exported(system: System) -> None:
    expositions = {name: scrape(system.metrics_url(name)) for name in SERVICES}
    for name, text in expositions.items():
        assert re.search(r"^sidekick_ready 1\.0$", text, re.M), f"{name} reports itself ready"
    exported = set().union(*(queryable_names(text) for text in expositions.values()))

    alerts = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yaml").read_text())
    queries = {r["expr"] for g in alerts["groups"] for r in g["rules"]} | dashboard_queries()
    queried = set().union(*(metric_names(q) for q in queries))

    missing = queried - exported - EXTERNAL_METRICS
    assert missing == set(), f"queried but exported by no service: {sorted(missing)}"
    assert {m for m in queried if m.startswith("nats_")} == EXTERNAL_METRICS, (
        "EXTERNAL_METRICS lists exactly the exporter's series that are queried"
    )
    assert not EXTERNAL_METRICS & exported
