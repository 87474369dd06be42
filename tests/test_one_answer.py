"""SPEC R24 (one answer, one pause) and the answers that must be refused before anything
runs: an edit with an argument the tool does not take (R20), an answer from another
pause or another session, a signed session copied to another id. Real HTTP to a
loopback replay server, real stores."""

import dataclasses

import pytest

from agentflow import (AgentRunOptions, AgentSession, ApprovalError, ApprovalRequiredTool,
                       FinishReason, ToolApprovalRequest, ToolResult, tool)
from agentflow.testing.replay import chat_stream
from agentflow.tools import ToolDefinitionWarning

PAY = '{"amount": 120}'


def bank():
    ran = []

    @tool
    def transfer(amount: int) -> str:
        """Send money."""
        ran.append(amount)
        return f"sent {amount}"

    return ran, [ApprovalRequiredTool(transfer)]


def paused(make_agent, tools, *bodies, call_id="c1", arguments=PAY, session=None):
    agent, server = make_agent([chat_stream(tool_calls=[(call_id, "transfer", arguments)]),
                                *bodies], tools=tools)
    session = session if session is not None else AgentSession()
    updates = list(agent.run("pay", session))
    assert updates[-1].finish_reason is FinishReason.AWAITING_APPROVAL
    return agent, session, next(u for u in updates if isinstance(u, ToolApprovalRequest))


def answer(*responses):
    return AgentRunOptions().with_tool_approval_responses(list(responses))


@pytest.mark.parametrize("edit", [{"amount": 5, "to": "mallory"}, {"amount": 5, "": 1},
                                  {"amount": 5, "kwargs": {}}])
def test_r20_an_edit_with_an_argument_the_tool_does_not_take_is_refused(make_agent, edit):
    ran, tools = bank()
    agent, session, request = paused(make_agent, tools, chat_stream(text="ok"))
    before = session.to_dict()
    with pytest.raises(ApprovalError, match="do not fit the tool.*which the tool does not "
                                            "take. Nothing was executed"):
        list(agent.run([], session, answer(request.approve(arguments=edit))))
    assert ran == [] and session.to_dict() == before  # the approval is not spent
    updates = list(agent.run([], session, answer(request.approve(arguments={"amount": 5}))))
    assert [u.result for u in updates if isinstance(u, ToolResult)] == ["sent 5"]


def test_r20_a_tool_with_kwargs_still_takes_extra_arguments(make_agent):
    seen = []

    with pytest.warns(ToolDefinitionWarning, match="left out of the tool's schema"):
        @tool
        def tag(name: str, **labels) -> str:
            """Tag something."""
            seen.append(labels)
            return "tagged"

    assert "additionalProperties" not in tag.parameters
    agent, _ = make_agent([chat_stream(tool_calls=[("c1", "tag", '{"name": "x"}')]),
                           chat_stream(text="ok")], tools=[ApprovalRequiredTool(tag)])
    session = AgentSession()
    request = next(u for u in agent.run("tag it", session)
                   if isinstance(u, ToolApprovalRequest))
    list(agent.run([], session, answer(request.approve(arguments={"name": "y", "k": "v"}))))
    assert seen == [{"k": "v"}]


@pytest.mark.parametrize("number", ["9" * 400, "-" + "1" * 310, "1e400"])
def test_every_call_has_a_digest_even_a_huge_number(make_agent, number):
    """A number beyond the double range has no RFC 8785 form: the call's digest is that of
    its text as sent (SPEC §3), the pause is made, and the approval runs the call once."""
    import hashlib
    ran, tools = bank()
    text = f'{{"amount": {number}}}'
    agent, session, request = paused(make_agent, tools, chat_stream(text="ok"), arguments=text)
    assert request.digest == hashlib.sha256(text.encode()).hexdigest()
    assert session.approvals.pending[0].digest == request.digest
    updates = list(agent.run([], session, answer(request.approve())))
    assert [u.result.startswith(("sent", "Error")) for u in updates
            if isinstance(u, ToolResult)] == [True]
    assert len(ran) <= 1


def test_a_number_the_decoder_refuses_is_never_put_to_a_person(make_agent):
    """5,000 digits: valid JSON that Python's decoder refuses (its 4,300-digit limit),
    so the call can never run: R14's result, no request (SPEC R18, fourth batch)."""
    ran, tools = bank()
    agent, server = make_agent([chat_stream(tool_calls=[("c1", "transfer",
                                                         '{"amount": ' + "1" * 5000 + "}")]),
                                chat_stream(text="ok")], tools=tools)
    updates = list(agent.run("pay", AgentSession()))
    assert not [u for u in updates if isinstance(u, ToolApprovalRequest)]
    [result] = [u.result for u in updates if isinstance(u, ToolResult)]
    assert result.startswith("Error: arguments are not valid JSON: ") and "4300" in result
    assert ran == []


def test_an_edit_with_a_huge_integer_is_a_typed_refusal(make_agent):
    ran, tools = bank()
    agent, session, request = paused(make_agent, tools)
    with pytest.raises(ApprovalError, match=r"c1 \(transfer\) have no canonical JSON form: "
                                            r"the integer of 400 digits"):
        list(agent.run([], session, answer(request.approve(arguments={"amount": 10 ** 399}))))
    assert ran == []


# -- R24: an answer is bound to its pause ---------------------------------------------------

def test_r24_an_answer_from_another_session_is_refused(make_agent):
    """Two sessions paused on the same call id with the same arguments: A's approval,
    passed to B's run, runs nothing in B."""
    ran, tools = bank()
    agent_a, session_a, request_a = paused(make_agent, tools)
    agent_b, session_b, request_b = paused(make_agent, tools, chat_stream(text="ok"))
    assert (request_a.call_id, request_a.digest) == (request_b.call_id, request_b.digest)
    assert request_a.request_id != request_b.request_id
    before = session_b.to_dict()
    with pytest.raises(ApprovalError, match="given to another pause \\(or another session\\)"
                                            ".*Nothing was executed") as caught:
        list(agent_b.run([], session_b, answer(request_a.approve())))
    assert caught.value.call_ids == ["c1"]
    assert ran == [] and session_b.to_dict() == before
    list(agent_b.run([], session_b, answer(request_b.approve())))
    assert ran == [120]


def test_r24_an_answer_to_an_earlier_pause_of_the_same_session_is_refused(make_agent):
    """The model asks for the same call again after a rejection: the first pause's
    approval, kept and replayed, does not approve the second."""
    ran, tools = bank()
    agent, session, first = paused(make_agent, tools,
                                   chat_stream(tool_calls=[("c1", "transfer", PAY)]))
    kept = first.approve()
    updates = list(agent.run([], session, answer(first.reject("not now"))))
    second = next(u for u in updates if isinstance(u, ToolApprovalRequest))
    # the repeated id is made unique in the history (c1_0), and the pauses differ
    assert second.digest == first.digest and second.request_id != first.request_id
    with pytest.raises(ApprovalError, match=r"no pending call has the id\(s\) c1 "):
        list(agent.run([], session, answer(kept)))
    moved = dataclasses.replace(kept, call_id=second.call_id)  # aimed at the new call
    with pytest.raises(ApprovalError, match="another pause"):
        list(agent.run([], session, answer(moved)))
    assert ran == []


def test_r24_an_answer_without_a_request_id_is_matched_by_call_id_and_digest(make_agent):
    from agentflow import ToolApprovalResponse
    ran, tools = bank()
    agent, session, request = paused(make_agent, tools, chat_stream(text="ok"))
    list(agent.run([], session, answer(ToolApprovalResponse("c1", True, digest=request.digest))))
    assert ran == [120]


def test_r24_the_request_id_survives_a_save_and_the_reloaded_requests_carry_it(
        make_agent, tmp_path):
    ran, tools = bank()
    agent, session, request = paused(make_agent, tools, chat_stream(text="ok"))
    session.save(tmp_path / "s.json")
    again = AgentSession.load(tmp_path / "s.json")
    assert [r.request_id for r in again.approval_requests(tools)] == [request.request_id]
    list(agent.run([], again, answer(again.approval_requests(tools)[0].approve())))
    assert ran == [120]


# -- R24: a signed session is bound to its identity -----------------------------------------

SECRET = "s3cret-key"


def copy_in_storage(store_url, store, source, target):
    """What someone who can write the storage does: copy a session's rows (or file) to
    another id, signature and all."""
    if store_url.startswith("file://"):
        import shutil
        shutil.copy(store.path(source), store.path(target))
        return
    statements = [
        f"INSERT INTO agentflow_sessions SELECT '{target}', revision, data, updated_at, "
        f"waiting_since FROM agentflow_sessions WHERE id = '{source}'",
        f"INSERT INTO agentflow_session_items SELECT '{target}', kind, position, data, mac "
        f"FROM agentflow_session_items WHERE session_id = '{source}'",
        f"INSERT INTO agentflow_pending_calls SELECT '{target}', call_id, issued_at, data, "
        f"mac FROM agentflow_pending_calls WHERE session_id = '{source}'"]
    if store_url.startswith("sqlite:///"):
        import sqlite3
        with sqlite3.connect(store_url[len("sqlite:///"):]) as db:
            for statement in statements:
                db.execute(statement)
        return
    import psycopg
    with psycopg.connect(store_url, autocommit=True) as db:
        for statement in statements:
            db.execute(statement)


def test_r24_a_signed_session_copied_to_another_id_is_refused(make_agent, store_url):
    from agentflow.errors import SessionIntegrityError
    from agentflow.stores import open_store
    ran, tools = bank()
    with open_store(store_url) as store:
        store.secret = SECRET
        with store.open("a") as session:
            agent, _ = make_agent([chat_stream(tool_calls=[("c1", "transfer", PAY)])],
                                  tools=tools)
            list(agent.run("pay", session))
        copy_in_storage(store_url, store, "a", "b")
        with pytest.raises(SessionIntegrityError):
            store.load("b")
        assert store.load("a").approvals.pending[0].call_id == "c1"  # the original loads
    assert ran == []


def test_r24_a_signed_file_copied_to_another_path_is_refused(tmp_path):
    import shutil
    from agentflow.errors import SessionIntegrityError
    session = AgentSession(state={"n": 1})
    session.save(tmp_path / "a.json", secret=SECRET)
    assert AgentSession.load(tmp_path / "a.json", secret=SECRET).state == {"n": 1}
    shutil.copy(tmp_path / "a.json", tmp_path / "b.json")
    with pytest.raises(SessionIntegrityError, match="signed as another session"):
        AgentSession.load(tmp_path / "b.json", secret=SECRET)


def older_signed(data: dict, scheme: str) -> str:
    """A session file as an older agentflow signed it: over the dict alone, RFC 8785
    (before R24) or, for schema 2, Python's sorted json.dumps (before RFC 8785)."""
    import hashlib
    import hmac
    import json
    from agentflow.canonical import canonical_json
    text = (canonical_json(data) if scheme == "rfc8785" else
            json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False))
    value = hmac.new(SECRET.encode(), text.encode(), hashlib.sha256).hexdigest()
    return json.dumps({**data, "signature": {"alg": "HMAC-SHA256", "value": value}})


@pytest.mark.parametrize("scheme, version", [("rfc8785", 3), ("rfc8785", 2),
                                             ("json.dumps", 2)])
def test_r24_an_older_signature_is_verified_by_its_scheme_and_re_signed(tmp_path, scheme,
                                                                        version):
    import json
    from agentflow.errors import SessionIntegrityError
    data = {"schema_version": version, "messages": [{"role": "user", "content": "x 12.0"}],
            "state": {"amount": 12.0}, "approvals": {"pending": [], "audit": []}}
    path = tmp_path / "s.json"
    path.write_text(older_signed(data, scheme))
    session = AgentSession.load(path, secret=SECRET)
    assert session.state == {"amount": 12.0}
    session.save(path, secret=SECRET)  # re-signed in the new scheme
    assert json.loads(path.read_text())["signature"]["covers"] == "identity"
    assert AgentSession.load(path, secret=SECRET).state == {"amount": 12.0}
    tampered = older_signed(data, scheme).replace("12.0}", "99.0}")
    path.write_text(tampered)
    with pytest.raises(SessionIntegrityError):
        AgentSession.load(path, secret=SECRET)


def test_r24_the_json_dumps_scheme_is_not_accepted_for_a_schema_3_session(tmp_path):
    from agentflow.errors import SessionIntegrityError
    data = {"schema_version": 3, "messages": [], "state": {"amount": 12.0},
            "approvals": {"pending": [], "audit": []}}
    path = tmp_path / "s.json"
    path.write_text(older_signed(data, "json.dumps"))
    with pytest.raises(SessionIntegrityError):
        AgentSession.load(path, secret=SECRET)


def test_r24_stripping_the_identity_mark_does_not_verify(tmp_path):
    import json
    from agentflow.errors import SessionIntegrityError
    AgentSession().save(tmp_path / "a.json", secret=SECRET)
    data = json.loads((tmp_path / "a.json").read_text())
    del data["signature"]["covers"]  # posing as an older signature, for another file
    (tmp_path / "b.json").write_text(json.dumps(data))
    with pytest.raises(SessionIntegrityError):
        AgentSession.load(tmp_path / "b.json", secret=SECRET)
