"""OpenTelemetry GenAI traces and metrics of mule runs (`pip install 'mule[otel]'`).

    outcome = await mule.run(inp, mule.otel.traced(show))

`traced(listener)` records the run as an `invoke_agent` span, a `chat {model}` span per model
attempt and an `execute_tool {name}` span per tool call, nested as mule's identities are, and
the GenAI client metrics `gen_ai.client.token.usage` and `gen_ai.client.operation.duration`. It
needs only `opentelemetry-api`: the host configures the SDK and exporters (or runs
`mule run --otel`, which exports with the standard `OTEL_EXPORTER_OTLP_*` variables).
"""

from mule.pi import needs_extra

with needs_extra("otel", "mule.otel"):
    from mule.otel._export import OtlpExport, OtlpSetupError, otlp_export
    from mule.otel._listener import traced
    from mule.otel._propagate import link_to, traceparent

__all__ = [
    "OtlpExport",
    "OtlpSetupError",
    "link_to",
    "otlp_export",
    "traced",
    "traceparent",
]

# Last, once every exported name is bound: public names read this face as their module.
from mule._publish import publish as _publish

_publish(__name__, globals(), __all__)
