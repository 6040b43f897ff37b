"""OpenTelemetry set-up. With OTEL_EXPORTER_OTLP_ENDPOINT (or ..._TRACES_ENDPOINT) set, spans
are exported over OTLP/HTTP; with nothing set there is no exporter and no error, and spans are
not recorded (`_sampler`), though their trace ids are made and passed on all the same."""

from __future__ import annotations

import contextlib
import contextvars
import os

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, ParentBased, Sampler
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from services.runtime.base.logs import bound


class PresetIdGenerator(RandomIdGenerator):
    """Random ids, except that a span started inside `preset_span_id(x)` gets id x. This lets
    a service open a span whose children were already created elsewhere (an attempt span is
    written when its verdict is known, but the worker's spans point at it from the start)."""

    def generate_span_id(self) -> int:
        preset = _PRESET.get()
        if preset is not None:
            _PRESET.set(None)
            return preset
        return super().generate_span_id()


_PRESET: contextvars.ContextVar[int | None] = contextvars.ContextVar("preset", default=None)


def preset_span_id(span_id: int) -> contextlib.AbstractContextManager[None]:
    return bound(_PRESET, span_id)


def new_span_id() -> int:
    return RandomIdGenerator().generate_span_id()


def remote_parent(trace_id: str, span_id: str) -> Context:
    """A context whose parent is the given (possibly not yet written) span."""
    ctx = SpanContext(
        trace_id=int(trace_id, 16),
        span_id=int(span_id, 16),
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    return trace.set_span_in_context(NonRecordingSpan(ctx))


def current_ids() -> tuple[str, str] | None:
    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return None
    return format(ctx.trace_id, "032x"), format(ctx.span_id, "016x")


def current_trace_id() -> str | None:
    ids = current_ids()
    return ids[0] if ids else None


def setup_tracing(service: str) -> TracerProvider:
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current
    name = os.environ.get("OTEL_SERVICE_NAME") or f"sidekick-{service}"
    exporting = bool(
        os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )
    provider = TracerProvider(
        resource=Resource.create({"service.name": name}),
        id_generator=PresetIdGenerator(),
        sampler=_sampler(exporting),
    )
    if exporting:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider


def spans_recorded() -> bool:
    """Whether this process's spans are recorded (its sampler is not the one used where there
    is no exporter): a span that only it would make, with no child and nothing to carry, can
    be left out when they are not (endpoint.py's model-call spans)."""
    provider = trace.get_tracer_provider()
    return not isinstance(provider, TracerProvider) or provider.sampler is not ALWAYS_OFF


def _sampler(exporting: bool) -> Sampler | None:
    """With no exporter, spans are not recorded (nothing would read them): each still has its
    ids, so trace ids are made, propagated and stored as with one, at a fraction of the CPU (a
    recorded span cleans and keeps every attribute, then is dropped at its end). An exporting
    service records a span whose remote parent was not recorded (a service without an
    exporter sent it on): its own spans are not lost to another's settings. OTEL_TRACES_SAMPLER,
    when set, decides instead (None: the SDK reads it)."""
    if os.environ.get("OTEL_TRACES_SAMPLER"):
        return None
    if not exporting:
        return ALWAYS_OFF
    return ParentBased(root=ALWAYS_ON, remote_parent_not_sampled=ALWAYS_ON)
