"""The lock file of ``AgentSession.open`` (issue 16): it exists only while a process
holds the session, so a finished run leaves beside the session file only its revision
mark (``.rev``, which must outlive the run: it is how a file put back from an older
copy is recognised, SPEC R22); a missing folder is named as the session's folder, not
as a ``.lock`` file."""

from __future__ import annotations

import pytest

from agentflow.errors import SessionError
from agentflow.session import AgentSession, SessionLockedError


def test_the_lock_file_exists_while_held_and_is_removed_after(tmp_path):
    path = tmp_path / "chat.json"
    with AgentSession.open(path) as session:
        assert (tmp_path / "chat.json.lock").exists()
        session.state["n"] = 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chat.json", "chat.json.rev"]
    with AgentSession.open(path) as session:  # and it can be taken again
        assert session.state == {"n": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chat.json", "chat.json.rev"]


def test_a_failed_load_leaves_no_lock_file(tmp_path):
    path = tmp_path / "chat.json"
    path.write_text("{}", encoding="utf-8")
    with pytest.raises(SessionError, match="not a saved session"):
        with AgentSession.open(path):
            pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chat.json"]


def test_a_held_lock_still_refuses_a_second_holder(tmp_path):
    path = tmp_path / "chat.json"
    with AgentSession.open(path):
        with pytest.raises(SessionLockedError, match=f"^{path} is in use by another"):
            with AgentSession.open(path):
                pass
    with AgentSession.open(path):  # the refused attempt did not break the lock
        pass


def test_a_missing_folder_is_named_as_the_sessions(tmp_path):
    path = tmp_path / "nope" / "chat.json"
    with pytest.raises(FileNotFoundError) as info:
        with AgentSession.open(path):
            pass
    assert str(info.value) == (f"cannot open the session {path}: the folder "
                               f"{tmp_path / 'nope'} does not exist")
