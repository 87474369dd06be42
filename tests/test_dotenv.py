"""The values of the workspace's ``.env`` files, read again only where something changed
(``agentflow.builtin.dotenv.Scan``; issue 37, SPEC R27): each test asks as a tool call
does, changes the workspace as a person or a command would, and asks again."""

from __future__ import annotations

import os
import time

from agentflow.builtin.dotenv import secret_values
from agentflow.commandline.workspace import Workspace

OLD = time.time_ns() - 3600 * 10**9  # an hour ago: outside the racy window


def aged(*paths) -> None:
    """Give ``paths`` a modification time of an hour ago, as files of a checkout have."""
    for path in paths:
        os.utime(path, ns=(OLD, OLD))


def test_a_env_file_made_after_the_first_call_is_read_at_the_next(tmp_path):
    (tmp_path / "src" / "deep").mkdir(parents=True)
    aged(tmp_path / "src" / "deep", tmp_path / "src", tmp_path)
    space = Workspace(tmp_path)
    assert secret_values(space) == []
    (tmp_path / "src" / "deep" / ".env.local").write_text("TOKEN=made-later-123\n")
    assert secret_values(space) == ["made-later-123"]


def test_a_value_changed_in_place_is_read_again(tmp_path):
    env = tmp_path / ".env"
    env.write_text("TOKEN=first-value-1\n")
    aged(env, tmp_path)
    space = Workspace(tmp_path)
    assert secret_values(space) == ["first-value-1"]
    env.write_text("TOKEN=second-value-22\n")  # its time moves: read again
    assert "second-value-22" in secret_values(space)


def test_a_file_read_in_its_racy_window_is_read_again_whatever_its_time(tmp_path):
    """As git's index does: a file written within 2 s of being read may change again in
    the same tick of a coarse clock, so its time is not trusted the next time."""
    env = tmp_path / ".env"
    env.write_text("TOKEN=aaaaaaaa-1\n")
    before = env.stat().st_mtime_ns
    space = Workspace(tmp_path)
    assert secret_values(space) == ["aaaaaaaa-1"]
    env.write_text("TOKEN=bbbbbbbb-1\n")  # the same size, and the same time as before
    os.utime(env, ns=(before, before))
    assert "bbbbbbbb-1" in secret_values(space)


def test_a_value_once_read_stays_masked_after_the_file_is_renamed(tmp_path):
    """``mv .env notes.txt`` leaves no secret file, but notes.txt holds the value: a
    later result that prints it must still mask it."""
    (tmp_path / ".env").write_text("STRIPE_KEY=sk_live_renamed_1\n")
    space = Workspace(tmp_path)
    assert secret_values(space) == ["sk_live_renamed_1"]
    (tmp_path / ".env").rename(tmp_path / "notes.txt")
    assert secret_values(space) == ["sk_live_renamed_1"]


def test_links_and_git_folders_are_not_read(tmp_path):
    outside = tmp_path / "outside.env"
    outside.write_text("TOKEN=outside-value-1\n")
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    (ws / ".git" / ".env").write_text("TOKEN=in-git-folder-1\n")
    (ws / ".env").symlink_to(outside)
    (ws / "linked").symlink_to(tmp_path, target_is_directory=True)
    assert secret_values(Workspace(ws)) == []


def test_a_workspace_given_by_a_link_is_scanned_through_it(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    aged(real)
    (tmp_path / "ws").symlink_to(real, target_is_directory=True)
    space = Workspace(str(tmp_path / "ws"))
    assert secret_values(space) == []
    (real / ".env").write_text("TOKEN=through-the-link-1\n")
    assert secret_values(space) == ["through-the-link-1"]


def test_a_multi_line_value_s_every_line_is_masked_in_a_copy(tmp_path):
    """``KEY="-----BEGIN …`` runs on to its closing quote (python-dotenv, Node's dotenv):
    a backup's ``cat`` printed the key's body lines in clear."""
    from agentflow.builtin.builtin_tools import builtin_tools
    body = ["MIIEowIBAAKCAQEAbodyOne1xyzQ", "MIIEowIBAAKCAQEAbodyTwo2xyzQ"]
    text = ('APP_KEY="-----BEGIN RSA PRIVATE KEY-----\n' + "\n".join(body)
            + '\n-----END RSA PRIVATE KEY-----"\n'
            + "SINGLE='line one of it\nline-two-of-it'\nAFTER=after-value-1\n")
    (tmp_path / ".env").write_text(text)
    (tmp_path / "backup.txt").write_text(text)
    assert "after-value-1" in secret_values(Workspace(tmp_path))
    run = builtin_tools(["run_command"], workspace=str(tmp_path))[0]
    result = run.run_command("cat backup.txt", sandbox=False)
    for secret in (*body, "line-two-of-it", "after-value-1"):
        assert secret not in result and secret[:10] not in result, (secret, result)
    assert result.startswith("exit status 0\nAPP_KEY=")
