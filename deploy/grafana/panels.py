"""Building blocks of Sidekick's Grafana dashboards: the JSON layout (rows, panels on the
24-column grid, the `datasource` and `namespace` variables) and PromQL helpers that keep
every query filtered the same way. Used by the dashboards' modules (generate.py lists them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DS = {"type": "prometheus", "uid": "${datasource}"}
NS = 'namespace=~"$namespace"'
RATE = "$__rate_interval"


@dataclass
class Panel:
    title: str
    exprs: list[tuple[str, str]]  # (PromQL, legend)
    kind: str = "timeseries"
    unit: str = "short"
    width: int = 12
    height: int = 8
    description: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def row(title: str) -> dict[str, Any]:
    return {"type": "row", "title": title, "collapsed": False, "panels": []}


def _panel_json(p: Panel, pid: int, x: int, y: int) -> dict[str, Any]:
    targets = [
        {"refId": chr(ord("A") + i), "datasource": DS, "expr": expr, "legendFormat": legend}
        for i, (expr, legend) in enumerate(p.exprs)
    ]
    out: dict[str, Any] = {
        "id": pid,
        "type": p.kind,
        "title": p.title,
        "description": p.description,
        "datasource": DS,
        "gridPos": {"h": p.height, "w": p.width, "x": x, "y": y},
        "targets": targets,
        "fieldConfig": {"defaults": {"unit": p.unit}, "overrides": []},
    }
    if p.kind == "stat":
        out["options"] = {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "value",
            "graphMode": "area",
        }
    else:
        out["options"] = {
            "legend": {"displayMode": "list", "placement": "bottom"},
            "tooltip": {"mode": "multi", "sort": "desc"},
        }
    out.update(p.extra)
    return out


def dashboard(
    uid: str, title: str, description: str, sections: list[tuple[str, list[Panel]]]
) -> dict[str, Any]:
    """Lay sections out top to bottom, panels left to right on Grafana's 24-column grid."""
    panels: list[dict[str, Any]] = []
    pid, y = 1, 0
    for section, items in sections:
        r = row(section)
        r.update({"id": pid, "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}})
        panels.append(r)
        pid, y, x, line_height = pid + 1, y + 1, 0, 0
        for p in items:
            if x + p.width > 24:
                x, y, line_height = 0, y + line_height, 0
            panels.append(_panel_json(p, pid, x, y))
            pid, x, line_height = pid + 1, x + p.width, max(line_height, p.height)
        y += line_height
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["sidekick"],
        "editable": True,
        "graphTooltip": 1,
        "refresh": "30s",
        "schemaVersion": 39,
        "time": {"from": "now-6h", "to": "now"},
        "timezone": "browser",
        "links": [
            {
                "type": "dashboards",
                "tags": ["sidekick"],
                "asDropdown": True,
                "title": "Sidekick",
                "includeVars": True,
                "keepTime": True,
            }
        ],
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Data source",
                    "type": "datasource",
                    "query": "prometheus",
                    "current": {},
                    "hide": 0,
                    "refresh": 1,
                    "regex": "",
                    "options": [],
                },
                {
                    "name": "namespace",
                    "label": "Namespace",
                    "type": "query",
                    "datasource": DS,
                    "query": {
                        "query": "label_values(sidekick_ready, namespace)",
                        "refId": "namespace",
                    },
                    "definition": "label_values(sidekick_ready, namespace)",
                    "includeAll": True,
                    # Matches series without the label too (`sidekick up` outside Kubernetes).
                    "allValue": ".*",
                    "multi": False,
                    "current": {},
                    "hide": 0,
                    "refresh": 2,
                    "sort": 1,
                    "options": [],
                },
            ]
        },
        "annotations": {"list": []},
        "panels": panels,
    }


def quote(value: str) -> str:
    return f'"{value}"'


def q(metric: str, *matchers: str) -> str:
    """A selector with the namespace filter and any extra matchers."""
    return f"{metric}{{{', '.join([NS, *matchers])}}}"


def rate(metric: str, *matchers: str) -> str:
    return f"rate({q(metric, *matchers)}[{RATE}])"


def total(metric: str, by: str = "", *matchers: str) -> str:
    """Per-second rate of a counter, summed (by some labels)."""
    return f"sum{f' by ({by})' if by else ''} ({rate(metric, *matchers)})"


def quantile(level: float, metric: str, by: str = "", *matchers: str) -> str:
    group = f"le, {by}" if by else "le"
    return f"histogram_quantile({level}, {total(metric + '_bucket', group, *matchers)})"


def pass_rate(by: str = "") -> str:
    verdicts = "sidekick_evaluator_verdicts_total"
    passed = 'passed="true"'
    return f"{total(verdicts, by, passed)} / {total(verdicts, by)}"


def ts(title: str, *targets: tuple[str, str], unit: str = "short", w: int = 12) -> Panel:
    return Panel(title, list(targets), unit=unit, width=w)


def rate_by(
    title: str,
    metric: str,
    by: str,
    *matchers: str,
    legend: str = "",
    unit: str = "ops",
    w: int = 12,
) -> Panel:
    """A counter's rate, one series per value of the labels `by` (named in the legend)."""
    legend = legend or " ".join(f"{{{{{label.strip()}}}}}" for label in by.split(","))
    return ts(title, (total(metric, by, *matchers), legend), unit=unit, w=w)


def stat(title: str, expr: str, unit: str = "short") -> Panel:
    return Panel(title, [(expr, title)], kind="stat", unit=unit, width=4, height=4)
