"""The command line exports traces over OTLP/HTTP (make test-slow): `agentflow chat`
pauses in one process, the inbox records the answer, `agentflow worker --once` resumes
in another process, each exporting to a receiver on loopback that decodes the protobuf
(opentelemetry-proto). One trace holds it all: the paused run, the answer, the resumed
run and its tool (agentflow.tracing; the OTEL_* variables turn export on)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agentflow import tracing
from agentflow.testing.replay import chat_stream
from helpers_cli import AGENTFLOW, calls_reply, child_env
from helpers_inbox import Client, ran, running_inbox, server, url  # noqa: F401

pytestmark = pytest.mark.slow

ECHO = {"command": "echo ran >> ran.txt"}


def _proto():
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("the OpenTelemetry SDK and OTLP exporter are required under CI=true")
        pytest.skip("opentelemetry-sdk / -exporter-otlp-proto-http are not installed (pip "
                    "install 'agentflow-approvals[otel-export]'; make test installs them)")
    return OTLPSpanExporter, trace_service_pb2, TracerProvider, SimpleSpanProcessor


@contextlib.contextmanager
def receiver(trace_service_pb2):
    """An OTLP/HTTP traces receiver on 127.0.0.1: yields ``(endpoint, spans)``, where
    ``spans`` fills with ``(service.name, Span message)`` as exports arrive."""
    spans: list = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers["Content-Length"]))
            request = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
            for resource_spans in request.resource_spans:
                service = {a.key: a.value.string_value
                           for a in resource_spans.resource.attributes}.get("service.name")
                for scope in resource_spans.scope_spans:
                    spans.extend((service, s) for s in scope.spans)
            reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", spans
    finally:
        httpd.shutdown()
        httpd.server_close()


def attributes(span) -> dict:
    values = {}
    for a in span.attributes:
        kind = a.value.WhichOneof("value")
        values[a.key] = getattr(a.value, kind) if kind != "array_value" else [
            getattr(v, v.WhichOneof("value")) for v in a.value.array_value.values]
    return values


def test_one_trace_from_the_model_call_to_the_answer_to_the_tool_across_processes(
        server, url, tmp_path):  # noqa: F811 - fixtures
    OTLPSpanExporter, trace_service_pb2, TracerProvider, SimpleSpanProcessor = _proto()
    with receiver(trace_service_pb2) as (endpoint, spans):
        env = child_env(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, OTEL_SERVICE_NAME="chat-cli")
        server.queue(calls_reply(("call_1", "run_command", ECHO)))
        paused = subprocess.run([AGENTFLOW, "chat", "--base-url", server.base_url, "--store",
                                 url, "--session", "t-1", "do it"], cwd=tmp_path, env=env,
                                capture_output=True, text=True, timeout=60)
        assert paused.returncode == 3, paused.stderr  # waits for approval

        provider = TracerProvider()  # the inbox, in this process, exports too
        provider.add_span_processor(SimpleSpanProcessor(
            OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces")))
        tracing.use_tracer_provider(provider)
        try:
            with running_inbox(url) as inbox:
                client = Client(inbox)
                client.login("dana")  # the approver is the link's (issue 39)
                fields = {**client.form("t-1", "call_1"), "action": "approve"}
                assert client.answer(fields)[0] == 200
        finally:
            tracing.use_tracer_provider(None)
            provider.shutdown()

        server.queue(chat_stream(text="It ran."))
        env["OTEL_SERVICE_NAME"] = "worker"
        worker = subprocess.run([AGENTFLOW, "worker", "--store", url, "--once",
                                 "--base-url", server.base_url], cwd=tmp_path, env=env,
                                capture_output=True, text=True, timeout=60)
        assert worker.returncode == 0, worker.stderr
        assert ran(tmp_path) == ["ran"]

    by_name = {}
    for service, span in spans:
        by_name.setdefault(span.name, []).append((service, span))
    runs = by_name["invoke_agent agentflow"]
    assert [service for service, _ in runs] == ["chat-cli", "worker"]
    (_, first), (_, second) = runs
    (_, answer), = by_name["approve_tool run_command"]
    (_, executed), = by_name["execute_tool run_command"]
    assert {span.trace_id for _, span in spans} == {first.trace_id}  # one trace
    assert answer.parent_span_id == first.span_id
    assert second.parent_span_id == first.span_id
    assert answer.span_id in {link.span_id for link in second.links}
    assert executed.parent_span_id == second.span_id
    assert attributes(executed)["gen_ai.tool.call.id"] == "call_1"
    assert attributes(answer)["agentflow.approval.approver"] == "dana"
    assert "ran >> ran.txt" not in str([attributes(s) for _, s in spans])  # no content
    chats = [span for name, found in by_name.items() if name.startswith("chat ")
             for _, span in found]
    assert sorted(span.parent_span_id for span in chats) == sorted(
        [first.span_id, second.span_id])  # one model call in each run
