"""A local OTLP/HTTP trace receiver: services export to it with the standard
OTEL_EXPORTER_OTLP_ENDPOINT, and tests read the spans back."""

from __future__ import annotations

import gzip
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.support.fakes.http import FakeServer, Recorded, Response


@dataclass
class Span:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    start: int
    attributes: dict[str, Any] = field(default_factory=dict)


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


class FakeOTLP(FakeServer):
    def __init__(self) -> None:
        super().__init__()
        self.spans: list[Span] = []
        self.route("POST", "/v1/traces", self._traces)

    def _traces(self, rec: Recorded) -> Response:
        body = rec.body
        if {k.lower(): v for k, v in rec.headers.items()}.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        req = ExportTraceServiceRequest()
        req.ParseFromString(body)
        found = []
        for rs in req.resource_spans:
            attrs = {a.key: _value(a.value) for a in rs.resource.attributes}
            service = str(attrs.get("service.name", ""))
            for ss in rs.scope_spans:
                for sp in ss.spans:
                    found.append(
                        Span(
                            service=service,
                            name=sp.name,
                            trace_id=sp.trace_id.hex(),
                            span_id=sp.span_id.hex(),
                            parent_id=sp.parent_span_id.hex(),
                            start=sp.start_time_unix_nano,
                            attributes={a.key: _value(a.value) for a in sp.attributes},
                        )
                    )
        with self._lock:
            self.spans.extend(found)
        return Response(200, b"", {"content-type": "application/x-protobuf"})

    def trace(self, trace_id: str) -> list[Span]:
        with self._lock:
            return [s for s in self.spans if s.trace_id == trace_id]
