"""``agentflow inspect-stream FILE``: the assembled message and the quirks met (issue 4)."""

import os

from helpers_cli import REPO, run_agentflow
from helpers_streams import streams_dir


def inspect(*args, stdin=b""):
    return run_agentflow("inspect-stream", *args, cwd=REPO, env=dict(os.environ), stdin=stdin)


def test_a_recorded_stream_without_index_is_explained():
    out = inspect(str(streams_dir() / "mistral-tool-no-index.sse"))
    text = out.stdout
    assert out.returncode == 0, out.stderr
    assert "gSIMJiOkT  weather  {\"location\": \"San Francisco\"}" in text
    assert "finish_reason: tool_calls" in text
    assert "tool call without index at event 2" in text
    assert "stream ended without [DONE]" in text


def test_standard_input_and_an_error_in_the_stream():
    body = (b'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n'
            b'data: {"error":{"message":"Token limit reached","code":400}}\n\n')
    out = inspect("-", stdin=body)
    text = out.stdout
    assert out.returncode == 1
    assert "text (2 characters):\n  Hi" in text
    assert "error: ProviderError: [code 400] Token limit reached" in text


def test_quirks_are_listed_with_their_event():
    body = (b': keepalive\n\n'
            b'data: {"choices":[]}\n\n'
            b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"a","function":'
            b'{"name":"f","arguments":{"x":1}}}]}}],"x_groq":{"usage":{"prompt_tokens":3,'
            b'"completion_tokens":2,"total_tokens":5}}}\n\n'
            b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
            b'data: [DONE]\n\n')
    text = inspect("-", stdin=body).stdout
    for quirk in ["chunk with empty choices at event 1", "usage under x_groq at event 2",
                  "tool call index 1 where 0 was expected at event 2",
                  "tool call arguments as a JSON object at event 2",
                  "finish_reason 'stop' although tools were called at event 3"]:
        assert f"  - {quirk}\n" in text, quirk
    assert 'a  f  {"x": 1}' in text
    assert 'usage: {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}' in text


def test_a_missing_file_is_one_clear_line():
    out = inspect("/nonexistent/stream.sse")
    assert out.returncode == 2
    assert out.stderr.strip() == "agentflow: cannot read /nonexistent/stream.sse: No such file or directory"
