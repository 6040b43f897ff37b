"""Helpers of tests/test_deploy.py: walking rendered manifests, reading metric names out of
PromQL, and the names a Prometheus exposition makes queryable."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# Custom resources are checked against the schemas in deploy/schemas/, not kubernetes-validate.
CUSTOM_SCHEMAS = {
    ("keda.sh/v1alpha1", "ScaledObject"): "scaledobject.json",
    ("monitoring.coreos.com/v1", "PodMonitor"): "podmonitor.json",
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "servicemonitor.json",
    ("monitoring.coreos.com/v1", "PrometheusRule"): "prometheusrule.json",
}

Doc = dict[str, Any]


def find(docs: tuple[Doc, ...], kind: str, name: str | None = None) -> list[Doc]:
    return [
        d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)
    ]


def pod_templates(docs: tuple[Doc, ...]) -> list[Doc]:
    """The pod templates of every Deployment and StatefulSet."""
    return [d["spec"]["template"] for d in docs if d["kind"] in ("Deployment", "StatefulSet")]


def containers(workload_or_pod: Doc) -> list[Doc]:
    spec = workload_or_pod["spec"]
    pod_spec = spec["template"]["spec"] if "template" in spec else spec
    return list(pod_spec["containers"])


def selects(match_labels: dict[str, str], pod: Doc) -> bool:
    labels = pod["metadata"].get("labels", {})
    return all(labels.get(k) == v for k, v in match_labels.items())


# --- PromQL ----------------------------------------------------------------------------------

_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool"}
_KEYWORDS |= {"and", "or", "unless", "offset", "inf", "nan"}
_IDENT = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression (or a Grafana `label_values(...)`) reads.

    Everything that is not a series name is removed first: string literals (which may hold
    braces), Grafana variables, label matchers, range and subquery brackets, grouping clauses,
    offsets and numbers; what is left and is not followed by `(` or a keyword is a metric.
    """
    label_values = re.fullmatch(r"\s*label_values\(\s*([a-zA-Z_:][\w:]*)\s*,\s*\w+\s*\)\s*", expr)
    if label_values:
        return {label_values.group(1)}
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\$\{?\w+\}?", "", text)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"\boffset\s+-?[0-9a-z]+", " ", text)
    text = re.sub(r"(?<![\w:])\d+(\.\d+)?([eE][+-]?\d+)?", " ", text)
    names = set()
    for match in _IDENT.finditer(text):
        word = match.group()
        if word in _KEYWORDS or text[match.end() :].lstrip().startswith("("):
            continue
        names.add(word)
    return names


def queryable_names(exposition: str) -> set[str]:
    """Series names a PromQL query can use, given a service's /metrics text.

    Built from the `# TYPE` lines, so a labelled metric with no samples yet still counts;
    a counter is queried as `<name>_total`, a histogram as `_bucket`, `_sum` and `_count`.
    """
    names: set[str] = set()
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", exposition, re.M):
        if kind == "counter":
            base = name.removesuffix("_total")
            names |= {f"{base}_total", f"{base}_created"}
        elif kind == "histogram":
            names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count", f"{name}_created"}
        elif kind == "summary":
            names |= {name, f"{name}_sum", f"{name}_count", f"{name}_created"}
        else:
            names.add(name)
    return names


# --- Grafana ---------------------------------------------------------------------------------

# Grafana fills these before a query reaches Prometheus; promtool needs concrete values.
_GRAFANA_VARIABLES = {
    "$__rate_interval": "5m",
    "$__interval": "1m",
    "$__range": "1h",
    "$namespace": ".*",
}


def dashboard_queries(*, substitute: bool = False) -> set[str]:
    """Every PromQL expression in the dashboards: panel targets and variable queries."""
    queries: set[str] = set()
    for path in sorted((ROOT / "deploy" / "grafana" / "dashboards").glob("*.json")):
        board = json.loads(path.read_text())
        for panel in board["panels"]:
            queries |= {t["expr"] for t in panel.get("targets", [])}
        if not substitute:
            for variable in board["templating"]["list"]:
                if variable["type"] == "query":
                    queries.add(variable["query"]["query"])
    if substitute:
        for name, value in _GRAFANA_VARIABLES.items():
            queries = {q.replace(name, value) for q in queries}
        leftover = [q for q in queries if "$" in q]
        assert not leftover, f"a Grafana variable the checks do not know: {leftover}"
    return queries
