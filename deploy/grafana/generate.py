"""Write Sidekick's Grafana dashboards (deploy/grafana/dashboards/*.json).

The JSON files are what Grafana imports; the Python beside this script is where they are
edited, so that the seven dashboards share one layout, one datasource variable and one set of
conventions: panels.py (the layout and PromQL helpers), shared_panels.py (what several
dashboards show alike), system_dashboards.py (overview, NATS) and service_dashboards.py (one
per service). After changing them, run `python deploy/grafana/generate.py`; `--check` (run by
tests/deploy/test_observe.py) fails when the committed JSON and the code disagree.

Conventions: every panel reads from the `${datasource}` variable (a Prometheus data source
picked on the dashboard); `job` is the service (gateway, frontline, orchestrator, evaluator,
worker), as the PodMonitor in deploy/k8s sets it; `$namespace` narrows to one deployment.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from service_dashboards import SERVICE_DASHBOARDS
from system_dashboards import nats, overview

OUT = Path(__file__).resolve().parent / "dashboards"

DASHBOARDS = {
    "overview": overview,
    **{d.name: d.build for d in SERVICE_DASHBOARDS},
    "nats": nats,
}


def render() -> dict[str, str]:
    """File name -> JSON text, exactly as committed."""
    return {
        f"{name}.json": json.dumps(build(), indent=2, ensure_ascii=False) + "\n"
        for name, build in DASHBOARDS.items()
    }


def main(argv: list[str]) -> int:
    """Write the dashboards; with --check, only report the files that differ (exit 1)."""
    stale = []
    OUT.mkdir(exist_ok=True)
    for name, text in render().items():
        path = OUT / name
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        if "--check" in argv:
            stale.append(name)
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    if stale:
        print(f"out of date (run python {Path(__file__).name}): {', '.join(stale)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
