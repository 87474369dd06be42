"""Exporting traces from the command line: the standard ``OTEL_*`` variables.

``agentflow chat``, ``worker``, ``inbox``, ``pending`` and ``demo`` export the spans of
``agentflow.tracing`` over OTLP/HTTP when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set, as the OpenTelemetry SDK's own
environment variables say (``OTEL_SERVICE_NAME``, ``OTEL_EXPORTER_OTLP_HEADERS``,
``OTEL_TRACES_EXPORTER=none``, ``OTEL_SDK_DISABLED=true`` …). Without them nothing is
exported and the SDK is not even imported. The SDK and the exporter come with the
``[otel-export]`` extra; when they are missing, a note on stderr says so.
"""

from __future__ import annotations

import os
import sys
from typing import Callable

INSTALL = "pip install 'agentflow-approvals[otel-export]'"


def configure(environ=os.environ) -> Callable[[], None]:
    """Set the global tracer provider to export over OTLP/HTTP, when the environment
    asks for it.

    Args:
        environ: the environment (a mapping of str), default ``os.environ``.

    Returns:
        a function that flushes and shuts the exporter down (call it before exiting);
        it does nothing when nothing was configured.
    """
    endpoint = (environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))
    if (not endpoint or environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"
            or environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() == "none"):
        return lambda: None
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        print("agentflow: OTEL_EXPORTER_OTLP_ENDPOINT is set, but the OpenTelemetry SDK "
              f"or its OTLP/HTTP exporter is not installed, so no trace is exported: "
              f"{INSTALL}", file=sys.stderr)
        return lambda: None
    # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES are read by Resource.create itself
    named = environ.get("OTEL_SERVICE_NAME") or "service.name=" in environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", "")
    provider = TracerProvider(resource=Resource.create(
        {} if named else {"service.name": "agentflow"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider.shutdown
