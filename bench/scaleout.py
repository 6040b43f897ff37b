"""Scale-out figures: how busy each process was (which one saturates) and what each service
costs per request summed over its replicas. `python -m bench --replicas N --gateways G` runs
N processes of every service and G gateways, the sessions spread over the gateways; the
concurrency part then reports, per level, the sessions that got stuck and the busiest
processes beside the throughput, the model-bound ideal and LangGraph's."""

from __future__ import annotations

from typing import Any

from services.runtime.base.children import SERVICES, service_of

SATURATED = 0.9  # cores: a process this busy is what holds the throughput down


def cores_busy(first: dict[str, float], last: dict[str, float], seconds: float) -> dict[str, float]:
    """Cores each process kept busy between two CPU snapshots, busiest first."""
    busy = {k: round((last[k] - first.get(k, 0.0)) / max(seconds, 1e-9), 2) for k in last}
    return dict(sorted(busy.items(), key=lambda kv: -kv[1]))


def per_service(cpu_ms: dict[str, float]) -> dict[str, float]:
    """CPU ms per request of each service, its replicas summed."""
    out: dict[str, float] = {}
    for name, ms in cpu_ms.items():
        service = service_of(name)
        if service in SERVICES:
            out[service] = round(out.get(service, 0.0) + ms, 2)
    return out


def busiest(level: dict[str, Any], top: int = 3) -> str:
    """The busiest processes of a level, e.g. `orchestrator.2 0.97 (saturated), ...`."""
    busy: dict[str, float] = level.get("cores_busy_by_process") or {}
    shown = []
    for name, cores in list(busy.items())[:top]:
        shown.append(f"{name} {cores:.2f}" + (" (saturated)" if cores >= SATURATED else ""))
    return ", ".join(shown)


def render(results: dict[str, Any]) -> list[str]:
    """The scale-out table (markdown lines) for the concurrency part of a run."""
    conc = results.get("concurrency")
    config = results.get("meta", {}).get("config", {})
    if not conc:
        return []
    rows = []
    for level, f in conc["levels"].items():
        cpu = per_service(f.get("cpu_ms_per_request") or {})
        rows.append(
            "| "
            + " | ".join(
                [
                    level,
                    str(f["rps"]),
                    f"{f['of_ideal'] * 100:.1f}%",
                    str(f.get("stuck", "—")),
                    ", ".join(f"{k} {v}" for k, v in cpu.items()),
                    str(f.get("cpu_ms_per_request", {}).get("nats-server", "—")),
                    busiest(f),
                ]
            )
            + " |"
        )
    head = (
        f"### Scale-out ({config.get('replicas', 1)} process(es) of every service, "
        f"{config.get('gateways', 1)} gateway(s); cores busy are of the measured window)"
    )
    return [
        "",
        head,
        "| sessions | rps | of ideal | stuck | CPU ms/request by service (replicas summed) "
        "| nats-server ms/request | busiest processes (cores) |",
        "|---|---|---|---|---|---|---|",
        *rows,
    ]
