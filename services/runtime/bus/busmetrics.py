"""The broker's Prometheus middleware, with label values that stay bounded.

FastStream labels its message metrics by subject. Client-bound events travel on one subject per
request (`<ns>.out.<session>.<request_id>.<what>`, `<ns>.outbox.<request_id>`), so every request
made new time series in every process that published or heard them: after 500 requests a
gateway served 57,000 series and its memory grew by ~37 KB per request, without bound
(`python -m bench`).
Such subjects are labelled by their pattern instead: `<ns>.out.*.<what>`, `<ns>.outbox.*`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from faststream.nats.prometheus.provider import (
    BatchNatsMetricsSettingsProvider,
    NatsMetricsSettingsProvider,
)
from faststream.prometheus import PrometheusMiddleware
from nats.aio.msg import Msg

if TYPE_CHECKING:
    from faststream.prometheus import ConsumeAttrs
    from prometheus_client import CollectorRegistry


def subject_pattern(subject: str) -> str:
    """`ns.out.<session>.<request>.chunk` -> `ns.out.*.chunk`; `ns.outbox.<id>` -> `ns.outbox.*`."""
    parts = subject.split(".")
    if len(parts) >= 4 and parts[1] == "out":
        return f"{parts[0]}.out.*.{parts[-1]}"
    if len(parts) >= 3 and parts[1] == "outbox":
        return f"{parts[0]}.outbox.*"
    return subject


class _ByPattern(NatsMetricsSettingsProvider):
    __slots__ = ()

    def get_consume_attrs_from_message(self, msg: Any) -> ConsumeAttrs:
        attrs = super().get_consume_attrs_from_message(msg)
        attrs["destination_name"] = subject_pattern(attrs["destination_name"])
        return attrs

    def get_publish_destination_name_from_cmd(self, cmd: Any) -> str:
        return subject_pattern(super().get_publish_destination_name_from_cmd(cmd))


def _provider(msg: Msg | Sequence[Msg] | None) -> Any:
    if isinstance(msg, Sequence):
        return BatchNatsMetricsSettingsProvider()
    if isinstance(msg, Msg) or msg is None:
        return _ByPattern()
    return None  # KeyValue and object-store watches are not measured


def prometheus_middleware(registry: CollectorRegistry, service: str) -> Any:
    """What `NatsPrometheusMiddleware(registry=..., app_name=...)` is, minus per-request labels."""
    return PrometheusMiddleware(
        settings_provider_factory=_provider, registry=registry, app_name=service
    )
