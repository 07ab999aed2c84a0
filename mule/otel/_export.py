"""OTLP export configured by the standard `OTEL_*` environment variables (for `mule run --otel`).

Needs the SDK and the OTLP/HTTP exporter (`pip install 'mule[otel-export]'`); a library host
configures its own providers and passes them to `traced` instead.
"""

from __future__ import annotations

import os
from typing import final

from attrs import frozen
from opentelemetry import metrics, trace

_PROTOCOL_VARS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")


class OtlpSetupError(Exception):
    """OTLP export cannot be set up (a missing package, an unsupported protocol)."""


@final
@frozen
class OtlpExport:
    """SDK providers exporting spans and metrics over OTLP; `shutdown` flushes both.

    Attributes:
        tracer_provider: The SDK tracer provider (pass it to `traced(tracer_provider=...)`).
        meter_provider: The SDK meter provider (pass it to `traced(meter_provider=...)`).

    """

    tracer_provider: trace.TracerProvider
    meter_provider: metrics.MeterProvider

    def shutdown(self) -> None:
        """Export what is buffered and stop (bounded by `OTEL_EXPORTER_OTLP_TIMEOUT`)."""
        self.tracer_provider.shutdown()  # type: ignore[attr-defined]
        self.meter_provider.shutdown()  # type: ignore[attr-defined]


def otlp_export(service_name: str = "mule") -> OtlpExport:
    """Return providers that export to the OTLP endpoint the environment names.

    `OTEL_EXPORTER_OTLP_ENDPOINT` (or the per-signal `..._TRACES_ENDPOINT` and
    `..._METRICS_ENDPOINT`), `..._HEADERS`, `..._TIMEOUT`, `OTEL_SERVICE_NAME` and
    `OTEL_RESOURCE_ATTRIBUTES` are read by the SDK itself; the protocol must be `http/protobuf`
    (the default).
    """
    for var in _PROTOCOL_VARS:
        protocol = os.environ.get(var)
        if protocol and protocol != "http/protobuf":
            raise OtlpSetupError(f"{var}={protocol}: mule exports OTLP over http/protobuf only")
    try:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise OtlpSetupError(
            f"OTLP export needs the OpenTelemetry SDK: pip install 'mule[otel-export]' ({exc})"
        ) from exc
    attributes = {} if os.environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: service_name}
    resource = Resource.create(attributes)
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    reader = PeriodicExportingMetricReader(OTLPMetricExporter())
    meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
    return OtlpExport(tracer_provider, meter_provider)


__all__ = ["OtlpExport", "OtlpSetupError", "otlp_export"]
