"""OpenTelemetry traces of a run, across the pause (the optional ``[otel]`` extra).

What is traced, by the OpenTelemetry GenAI semantic conventions (Development status;
v1.36.0 by default, v1.41.0 when ``OTEL_SEMCONV_STABILITY_OPT_IN`` lists
``gen_ai_latest_experimental``, as the conventions ask of instrumentations):

* ``invoke_agent {name}``: one ``ChatClientAgent.run`` (``gen_ai.operation.name``,
  ``gen_ai.agent.name``, ``gen_ai.conversation.id`` = the session's store id, its finish
  reason and summed usage, ``error.type`` when it failed);
* ``chat {model}``: each model call, a child of the run (``gen_ai.request.model``,
  ``gen_ai.response.model``, ``gen_ai.response.finish_reasons``,
  ``gen_ai.usage.input_tokens`` / ``output_tokens``, ``server.address`` / ``port``,
  ``error.type``);
* ``execute_tool {name}``: each tool that runs (``gen_ai.tool.name``,
  ``gen_ai.tool.call.id``, ``agentflow.tool.sandboxed``, ``agentflow.tool.result_size``
  in characters, ``error.type`` when the result is an ``Error: …``);
* the approval itself: an ``agentflow.approval.pause`` event on the run that pauses (the
  calls, why each asks and the rule that asked, the ``request_id``), and an
  ``agentflow.approval.answer`` event per answered call on the run that resumes
  (approved or not, edited or not, by whom, how many seconds the call waited).

A trace spans the pause: the pausing run's span context is written into each pending
record (``traceparent``, W3C Trace Context), in the same write as the pause (SPEC R23).
The run that resumes, in this process, another worker or hours later, continues that
trace: its ``invoke_agent`` span is a child of the paused run's (or, when the caller has
a span of its own current, a child of that one, linked to the pause), and links to the
span that recorded the answer (an inbox's ``agentflow.approval.answer`` span, whose
context the recorded answer keeps). One trace viewer then shows a call from the model's
request to the person's answer to the tool's result.

No content by default: arguments, results and messages are recorded only when
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` is ``true`` (the conventions'
switch), and then masked as every output is (SPEC R26, R27: the API key and the values
of secret-named environment variables never appear).

Cost: ``import agentflow`` never imports OpenTelemetry. Without ``opentelemetry-api``
installed, or with no tracer provider set (the API's default, which records nothing),
``start`` returns ``None`` and the loop pays one ``None`` check per step. Spans are
started with explicit parents and the OpenTelemetry context is made current only while
a step of the run executes (``_stepping``), never across a ``yield``, so a caller that
interleaves runs, or abandons one, never sees another run's context.
"""

from __future__ import annotations

import contextvars
import json
import os
import re
import time
from typing import Iterator

from .redact import scrub
from .types import Finish, FinishReason

SCHEMA_DEFAULT = "https://opentelemetry.io/schemas/1.36.0"
SCHEMA_LATEST = "https://opentelemetry.io/schemas/1.41.0"
CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
CONTENT_CAP = 8_000  # characters of one captured text (arguments, a result)
_SECRET_NAME = re.compile(r"KEY|SECRET|TOKEN|PASSWORD|CREDENTIAL|AUTH", re.IGNORECASE)

# The audit outcomes of a person's answer (or its absence) at a resume (SPEC R4).
HUMAN_OUTCOMES = frozenset({"approved", "rejected", "unanswered", "expired"})

_UNSET = object()
_tracer = _UNSET
_current: contextvars.ContextVar = contextvars.ContextVar("agentflow_run_trace",
                                                          default=None)


def tracer():
    """The tracer agentflow's spans come from, made once.

    Returns:
        an ``opentelemetry.trace.Tracer`` of the global tracer provider (a proxy that
        follows a provider set later), or ``None`` when ``opentelemetry-api`` is not
        installed.
    """
    global _tracer
    if _tracer is _UNSET:
        try:
            from opentelemetry import trace
        except ImportError:
            _tracer = None
        else:
            _tracer = trace.get_tracer("agentflow", schema_url=schema_url())
    return _tracer


def use_tracer_provider(provider) -> None:
    """Trace through ``provider`` instead of the global tracer provider (a test's
    in-memory exporter, an application with several providers).

    Args:
        provider: an ``opentelemetry.trace.TracerProvider``; ``None`` goes back to the
            global one.
    """
    global _tracer
    _tracer = _UNSET if provider is None else provider.get_tracer(
        "agentflow", schema_url=schema_url())


def latest_conventions() -> bool:
    """Whether ``OTEL_SEMCONV_STABILITY_OPT_IN`` (comma-separated) holds
    ``gen_ai_latest_experimental``: then the v1.41.0 names are emitted."""
    chosen = os.environ.get("OTEL_SEMCONV_STABILITY_OPT_IN", "")
    return "gen_ai_latest_experimental" in {v.strip() for v in chosen.split(",")}


def schema_url() -> str:
    """The schema URL of the conventions emitted (str)."""
    return SCHEMA_LATEST if latest_conventions() else SCHEMA_DEFAULT


def capture_content() -> bool:
    """Whether the person opted in to recording content (the conventions' switch)."""
    return os.environ.get(CAPTURE_CONTENT, "").strip().lower() == "true"


def current() -> "RunTrace | None":
    """The ``RunTrace`` of the run whose step is executing, or ``None`` (not traced)."""
    return _current.get()


def start(agent_name: str | None, session, chat_client) -> "RunTrace | None":
    """Start the ``invoke_agent`` span of one run, continuing a paused run's trace.

    Args:
        agent_name: the agent's name (str) or ``None``.
        session: the run's ``AgentSession``; its pending records and recorded answers
            give the trace contexts to continue and link (``traceparent``).
        chat_client: the ``FunctionInvokingChatClient`` (its inner client's model and
            endpoint name the spans).

    Returns:
        RunTrace, or ``None`` when nothing would be recorded (no API, or no tracer
        provider that records): the run then pays nothing more.
    """
    found = tracer()
    if found is None:
        return None
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    propagator = TraceContextTextMapPropagator()
    paused = [propagator.extract({"traceparent": r.traceparent})
              for r in session.approvals.pending if getattr(r, "traceparent", None)]
    answered = [propagator.extract({"traceparent": a.traceparent})
                for a in session.approvals.answers if getattr(a, "traceparent", None)]
    links = [trace.Link(trace.get_current_span(c).get_span_context()) for c in
             paused + answered]
    links = [l for l in links if l.context.is_valid]
    parent = None  # the caller's current span, if it has one
    if not trace.get_current_span().get_span_context().is_valid and paused:
        parent = paused[0]  # no span of the caller's: the paused run's trace goes on
    name = agent_name or "agentflow"
    span = found.start_span(f"invoke_agent {name}", context=parent,
                            kind=trace.SpanKind.INTERNAL, links=links)
    if not span.is_recording():
        span.end()
        return None
    span.set_attributes(_common("invoke_agent", chat_client.inner))
    span.set_attribute("gen_ai.agent.name", name)
    session_id = getattr(getattr(session, "_store", None), "session_id", None)
    if session_id:  # a session opened from a store: its id names the conversation
        span.set_attribute("gen_ai.conversation.id", str(session_id))
    return RunTrace(found, span, chat_client.inner)


def _common(operation: str, inner) -> dict:
    """The attributes every span carries: the operation and the provider."""
    provider = "openai"  # the API agentflow speaks, whoever serves it
    key = "gen_ai.provider.name" if latest_conventions() else "gen_ai.system"
    return {"gen_ai.operation.name": operation, key: provider}


class RunTrace:
    """The spans of one run: its ``invoke_agent`` span and what the loop reports to it.

    Made by ``start``; the loop finds it with ``current()`` while one of its steps runs.
    """

    def __init__(self, tracer_, span, inner):
        self.tracer = tracer_
        self.span = span
        self.inner = inner
        self.capture = capture_content()
        self._secrets = [getattr(inner, "_api_key", None)] + [
            v for k, v in os.environ.items() if _SECRET_NAME.search(k) and len(v) >= 8]

    # -- the run -----------------------------------------------------------------------

    def stepping(self, updates: Iterator) -> Iterator:
        """``updates`` (the run's generator) with this run's span current while each
        of its steps executes, and the span ended with the run's ``Finish``.

        Args:
            updates: the loop's generator of updates.

        Yields:
            the same updates.

        Raises:
            whatever the run raises, after ``error.type`` is set and the span ended.
        """
        from opentelemetry import context, trace

        ctx = trace.set_span_in_context(self.span)
        finish = None
        try:
            while True:
                token, mine = context.attach(ctx), _current.set(self)
                try:
                    update = next(updates)
                except StopIteration:
                    break
                finally:
                    _current.reset(mine)
                    context.detach(token)
                if isinstance(update, Finish):
                    finish = update
                yield update
        except BaseException as exc:
            if not isinstance(exc, GeneratorExit):
                self.failed(self.span, exc)
            raise
        finally:
            updates.close()
            if finish is not None:
                self._finished(self.span, finish)
            self.span.end()

    def answered(self, records: list) -> None:
        """Add one ``agentflow.approval.answer`` event per audit record a resume made
        (SPEC R4: approved, rejected, unanswered, expired).

        Args:
            records: the ``AuditRecord`` objects this run appended for human answers.
        """
        for record in records:
            attrs = {"gen_ai.tool.call.id": record.call_id, "gen_ai.tool.name": record.tool,
                     "agentflow.approval.outcome": record.outcome,
                     "agentflow.approval.edited": bool(record.edited_digest)}
            if record.approver:
                attrs["agentflow.approval.approver"] = record.approver
            waited = _seconds_between(record.issued_at, record.decided_at)
            if waited is not None:
                attrs["agentflow.approval.waited_seconds"] = waited
            self.span.add_event("agentflow.approval.answer", attrs,
                                timestamp=_nanoseconds(record.decided_at))

    # -- what the loop reports ---------------------------------------------------------

    def chat(self, updates: Iterator, options) -> Iterator:
        """One model call's updates inside a ``chat {model}`` span.

        Args:
            updates: the provider client's generator for one turn.
            options: the ``AgentRunOptions`` it was called with (the requested model).

        Yields:
            the same updates, the provider's ``Finish`` included.
        """
        from opentelemetry import context, trace

        model = getattr(options, "model", None) or getattr(self.inner, "model", None)
        span = self.tracer.start_span(f"chat {model}" if model else "chat",
                                      context=trace.set_span_in_context(self.span),
                                      kind=trace.SpanKind.CLIENT)
        span.set_attributes(_common("chat", self.inner))
        if model:
            span.set_attribute("gen_ai.request.model", model)
        span.set_attributes(_server(getattr(self.inner, "base_url", None)))
        ctx = trace.set_span_in_context(span)
        try:
            while True:
                token = context.attach(ctx)
                try:
                    update = next(updates)
                except StopIteration:
                    break
                finally:
                    context.detach(token)
                if isinstance(update, Finish):
                    self._turn_finished(span, update, model)
                yield update
        except BaseException as exc:
            if not isinstance(exc, GeneratorExit):
                self.failed(span, exc)
            raise
        finally:
            updates.close()
            span.end()

    def tool_started(self, call, tool):
        """Start the ``execute_tool {name}`` span of a call about to run, current
        while the tool runs (it holds no ``yield``), so a tool's own spans are its
        children.

        Args:
            call: the ``ToolCall``.
            tool: its ``Tool``, or ``None`` for an unknown tool.

        Returns:
            a context manager giving the span.
        """
        from opentelemetry import trace

        span = self.tracer.start_as_current_span(
            f"execute_tool {call.name}", context=trace.set_span_in_context(self.span),
            kind=trace.SpanKind.INTERNAL, end_on_exit=True, record_exception=True)
        return _ToolSpan(self, span, call, tool)

    def paused(self, approvals, requests) -> None:
        """The run pauses: stamp this run's trace context on the pending records of
        ``requests`` (written with the pause, SPEC R23) and add the pause event.

        Args:
            approvals: the session's ``ApprovalLedger``, holding the new records.
            requests: the ``ToolApprovalRequest`` updates about to be yielded.
        """
        from opentelemetry.trace.propagation.tracecontext import (
            TraceContextTextMapPropagator)
        from opentelemetry import trace

        carrier: dict = {}
        TraceContextTextMapPropagator().inject(carrier, trace.set_span_in_context(self.span))
        ids = {r.call_id for r in requests}
        records = [] if approvals is None else [p for p in approvals.pending
                                                if p.call_id in ids]
        for record in records:
            record.traceparent = carrier.get("traceparent")
        why = {r.call_id: (r.why or "", r.rule or "") for r in records}
        self.span.add_event("agentflow.approval.pause", {
            "agentflow.approval.request_id": requests[0].request_id or "",
            "agentflow.approval.call_ids": [r.call_id for r in requests],
            "agentflow.approval.tools": [r.name for r in requests],
            "agentflow.approval.why": [why.get(r.call_id, ("", ""))[0] for r in requests],
            "agentflow.approval.rules": [why.get(r.call_id, ("", ""))[1] for r in requests],
        })

    # -- helpers -----------------------------------------------------------------------

    def masked(self, text: str) -> str:
        """Content as it may be recorded (SPEC R26, R27).

        Args:
            text: a tool's arguments or result, a message (str).

        Returns:
            str: cut to ``CONTENT_CAP`` characters, every run of six or more characters
            of the API key or of a secret-named variable's value masked.
        """
        for secret in self._secrets:
            text = scrub(text, secret)
        return text if len(text) <= CONTENT_CAP else text[:CONTENT_CAP] + "…"

    def failed(self, span, exc: BaseException) -> None:
        """Mark a span failed.

        Args:
            span: the OpenTelemetry span.
            exc: the exception that ended its work; ``error.type`` is its class name and
                the status description its (masked) message.
        """
        from opentelemetry.trace import Status, StatusCode

        span.set_attribute("error.type", type(exc).__name__)
        span.set_status(Status(StatusCode.ERROR, self.masked(str(exc))[:500]))

    def _turn_finished(self, span, finish: Finish, model) -> None:
        span.set_attribute("gen_ai.response.finish_reasons", [finish.finish_reason.value])
        if model:
            span.set_attribute("gen_ai.response.model",
                               getattr(finish, "model", None) or model)
        _usage(span, finish.usage)
        message = finish.message
        if self.capture and message is not None:
            span.set_attribute("gen_ai.output.messages",
                               self.masked(json.dumps([message.to_openai()])))

    def _finished(self, span, finish: Finish) -> None:
        span.set_attribute("gen_ai.response.finish_reasons", [finish.finish_reason.value])
        _usage(span, finish.usage)
        if finish.finish_reason is FinishReason.AWAITING_APPROVAL:
            span.set_attribute("agentflow.awaiting_approval", True)


class _ToolSpan:
    """The ``execute_tool`` span of one call; ``done(outcome)`` records its result."""

    def __init__(self, run: RunTrace, manager, call, tool):
        self.run, self.manager, self.call, self.tool = run, manager, call, tool

    def __enter__(self):
        self.span = self.manager.__enter__()
        self.span.set_attributes(_common("execute_tool", self.run.inner))
        self.span.set_attributes({"gen_ai.tool.name": self.call.name,
                                  "gen_ai.tool.call.id": self.call.id,
                                  "gen_ai.tool.type": "function"})
        sandboxed = getattr(self.tool, "sandboxed", None)  # run_command's
        if isinstance(sandboxed, bool):
            try:  # the model may ask for one call outside the sandbox ("sandbox": false)
                asked = json.loads(self.call.arguments or "{}").get("sandbox", True)
            except (ValueError, AttributeError):
                asked = True
            self.span.set_attribute("agentflow.tool.sandboxed",
                                    sandboxed and asked is not False)
        if self.run.capture:
            self.span.set_attribute("gen_ai.tool.call.arguments",
                                    self.run.masked(self.call.arguments or ""))
        return self

    def done(self, outcome) -> None:
        """Record ``outcome`` (a ``tools.Outcome``): the result's size in characters,
        ``error.type`` when the tool failed, the result itself only on opt-in."""
        self.span.set_attribute("agentflow.tool.result_size", len(outcome.text))
        if outcome.failed:
            kind = outcome.text.split(":", 2)[1].strip() if outcome.text.count(":") >= 2 \
                else "tool_error"
            self.span.set_attribute("error.type", kind or "tool_error")
            from opentelemetry.trace import Status, StatusCode
            self.span.set_status(Status(StatusCode.ERROR))
        if self.run.capture:
            self.span.set_attribute("gen_ai.tool.call.result", self.run.masked(outcome.text))

    def __exit__(self, *exc):
        return self.manager.__exit__(*exc)


def _usage(span, usage) -> None:
    if usage is None:
        return
    if usage.prompt_tokens is not None:
        span.set_attribute("gen_ai.usage.input_tokens", usage.prompt_tokens)
    if usage.completion_tokens is not None:
        span.set_attribute("gen_ai.usage.output_tokens", usage.completion_tokens)


def _server(base_url: str | None) -> dict:
    """``server.address`` and ``server.port`` of the endpoint (never its credentials)."""
    if not base_url:
        return {}
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(base_url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return {}
    return {"server.address": parts.hostname or "", "server.port": port}


def _seconds_between(asked_at: str | None, decided_at: str | None) -> float | None:
    """Seconds from one ISO-8601 UTC moment of the audit trail to another."""
    from datetime import datetime

    try:
        start_ = datetime.fromisoformat(str(asked_at).replace("Z", "+00:00"))
        end = datetime.fromisoformat(str(decided_at).replace("Z", "+00:00"))
    except ValueError:
        return None
    return round((end - start_).total_seconds(), 3)


def _nanoseconds(moment: str | None) -> int | None:
    """POSIX nanoseconds of an ISO-8601 UTC moment of the audit trail, or ``None``."""
    from datetime import datetime

    try:
        return int(datetime.fromisoformat(str(moment).replace("Z", "+00:00"))
                   .timestamp() * 1e9)
    except ValueError:
        return None


def answer_span(entry_traceparent: str | None, call_id: str, tool: str, approved: bool,
                approver: str | None, edited: bool, waited: float | None) -> str | None:
    """Record a person's answer given outside a run (an inbox, ``agentflow pending
    --respond``) as an ``agentflow.approval.answer`` span in the paused run's trace.

    Args:
        entry_traceparent: the pending record's ``traceparent``, or ``None``.
        call_id: the call answered (str); tool: its tool's name (str).
        approved: the decision (bool); approver: who (str or ``None``);
        edited: whether the answer edits the arguments (bool);
        waited: seconds the call waited (float or ``None``).

    Returns:
        str or None: the answer span's ``traceparent``, for the recorded answer, so the
        resume links to it; ``None`` when nothing is traced.
    """
    found = tracer()
    if found is None:
        return None
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    propagator = TraceContextTextMapPropagator()
    parent = propagator.extract({"traceparent": entry_traceparent}) \
        if entry_traceparent else None
    span = found.start_span(f"approve_tool {tool}", context=parent,
                            kind=trace.SpanKind.SERVER)
    if not span.is_recording():
        span.end()
        return None
    attrs = {"gen_ai.tool.call.id": call_id, "gen_ai.tool.name": tool,
             "agentflow.approval.outcome": "approved" if approved else "rejected",
             "agentflow.approval.edited": edited}
    if approver:
        attrs["agentflow.approval.approver"] = approver
    if waited is not None:
        attrs["agentflow.approval.waited_seconds"] = round(waited, 3)
    span.set_attributes(attrs)
    span.add_event("agentflow.approval.answer", attrs)
    carrier: dict = {}
    propagator.inject(carrier, trace.set_span_in_context(span))
    span.end(end_time=time.time_ns())
    return carrier.get("traceparent")
