"""Every exception agentflow raises is in agentflow/errors.py and is an AgentflowError
(issue 22), and a message names a caller's setting as a field, which a front end words
its own way: the command line never rewrites English (``Setting``, ``Wording``)."""

import ast
import pathlib

import agentflow
from agentflow import errors
from agentflow.cli.chat import CLIWording
from agentflow.errors import ApprovalError, ProviderError, ProviderTimeoutError, Setting

from helpers_source import nodes

PACKAGE = pathlib.Path(agentflow.__file__).parent


def test_every_exception_class_of_the_package_is_in_errors_py():
    elsewhere = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in nodes(path):
            if isinstance(node, ast.ClassDef) and any(
                    getattr(b, "id", getattr(b, "attr", "")).endswith(("Error", "Exception"))
                    for b in node.bases) and path.name != "errors.py":
                elsewhere.append(f"{path.relative_to(PACKAGE)}:{node.name}")
    assert elsewhere == []


def test_every_error_in_errors_py_is_an_agentflow_error():
    classes = [v for v in vars(errors).values()
               if isinstance(v, type) and issubclass(v, BaseException)]
    assert len(classes) >= 15
    assert all(issubclass(c, errors.AgentflowError) for c in classes)


def test_a_setting_is_worded_by_the_front_end():
    error = ProviderError.naming("could not connect: refused. Is ", Setting("base_url"),
                                 " (or OPENAI_BASE_URL) right?", status=502)
    assert str(error) == "[HTTP 502] could not connect: refused. Is base_url (or " \
                         "OPENAI_BASE_URL) right?"
    assert error.worded(CLIWording()) == "[HTTP 502] could not connect: refused. Is " \
                                         "--base-url (or OPENAI_BASE_URL) right?"
    timeout = ProviderTimeoutError.naming("silent for more than ",
                                          Setting("read_timeout", 2.5), "; raise ",
                                          Setting("read_timeout"))
    assert str(timeout) == "silent for more than read_timeout=2.5 s; raise read_timeout"
    assert timeout.worded(CLIWording()) == "silent for more than 2.5 s; raise --read-timeout"
    assert timeout.status is None and isinstance(timeout, ProviderError)
    approval = ApprovalError.naming("no pending call; ", Setting("session"), call_ids=["c9"])
    assert approval.call_ids == ["c9"]
    assert approval.worded(CLIWording()) == ("no pending call; give the --session file the "
                                             "run paused in")


def test_text_that_only_looks_like_a_setting_is_never_rewritten():
    """A provider's own message that happens to say ``base_url (or OPENAI_BASE_URL)``
    is shown as sent: only a ``Setting`` is worded."""
    error = ProviderError.naming("the upstream says: check base_url (or OPENAI_BASE_URL)",
                                 status=400)
    assert error.worded(CLIWording()) == str(error)


def test_a_retried_connection_failure_keeps_naming_its_setting():
    """After the retries the error is made again with ``(tried N times)``: the
    setting it names is still a ``Setting``, so the command line still says
    ``--base-url``. Real HTTP to a closed port on 127.0.0.1."""
    import socket
    from agentflow import OpenAIChatClient
    from agentflow.types import ChatMessage
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = OpenAIChatClient(base_url=f"http://127.0.0.1:{port}/v1", api_key="k",
                              max_retries=1, retry_backoff=0)
    try:
        list(client.run([ChatMessage.user("hi")]))
    except ProviderError as exc:
        error = exc
    assert error.attempts == 2 and str(error).endswith("OPENAI_BASE_URL) right? (tried 2 "
                                                       "times)")
    assert "base_url (or" in str(error)
    assert "is --base-url (or OPENAI_BASE_URL) right? (tried 2 times)" in error.worded(
        CLIWording())
