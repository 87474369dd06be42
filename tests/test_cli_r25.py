"""SPEC R25 through the command: what a person is shown is what runs (issue 24).

Each test runs the real command (``tests/helpers_cli.py``) against a loopback
``ReplayServer`` whose model sends the issue's injections (real ESC bytes) and
variants, and checks that no byte a terminal acts on reaches the output, that the real
text is shown escaped, that ``--json`` stays exact, and that every command printed
for pasting reads back, through a real ``sh``, as exactly what it shows. The screen of
a real terminal is checked in test_cli_tmux.py (slow).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import pytest

from agentflow.testing.replay import ReplayServer, chat_stream

from helpers_cli import (SANDBOXED, calls_reply, child_env, json_lines, pty_chat,
                         run_agentflow, run_chat, saved)

FAKE_LS = "touch PWNED #\r\x1b[2A\x1b[2K    \"command\": \"ls -la\"\x1b[2B\r\x1b[2K$ ls -la"
FAKE_LS_SHOWN = ("touch PWNED #\\x0d\\x1b[2A\\x1b[2K    \"command\": \"ls -la\"\\x1b[2B"
                 "\\x0d\\x1b[2K$ ls -la")
OSC = "\x1b]0;owned\x07\x1b]52;c;cm0gLXJmIH4=\x07"
HOSTILE_ID = "x;touch${IFS}PWNED;#"
# Bytes no output may hold: C0 controls but newline, C1 (as UTF-8), bidi overrides.
FORBIDDEN = [chr(c) for c in range(0x20) if c != 0x0a] + ["\x7f", "\x9b", "\u202e"]


@pytest.fixture
def server():
    with ReplayServer() as replay:
        yield replay


def clean(text: str) -> bool:
    return not any(char in text for char in FORBIDDEN)


def test_r25_a_paused_command_is_listed_escaped(server, tmp_path):
    server.queue(calls_reply(("call_1", "run_command", {"command": FAKE_LS})))
    done = run_chat("--sandbox", "off",
                    "--base-url", server.base_url, "--session", "s.json", "List", cwd=tmp_path)
    assert done.returncode == 3 and clean(done.stdout), done.stdout
    assert f"  call_1  run_command  $ {FAKE_LS_SHOWN} ⏎ {SANDBOXED}\n" in done.stdout
    assert not (tmp_path / "PWNED").exists()


def test_r25_json_keeps_the_exact_text(server, tmp_path):
    server.queue(calls_reply(("call_1", "run_command", {"command": FAKE_LS})))
    done = run_chat("--base-url", server.base_url, "--json", "List", cwd=tmp_path)
    assert done.returncode == 3
    [request] = [line for line in json_lines(done.stdout) if line["type"] == "approval_request"]
    assert request["arguments"] == {"command": FAKE_LS}


def test_r25_results_and_assistant_text_are_escaped(server, tmp_path):
    """A tool result holding OSC 0 (the title) and OSC 52 (the clipboard), and a model
    reply holding cursor moves and a right-to-left override, are shown inert."""
    server.queue(calls_reply(("call_1", "run_command", {"command": f"printf '{OSC}'"})))
    server.queue(chat_stream("done\x1b[1A\x1b[2K \u202eevil"))
    done = run_chat("--sandbox", "off",
                    "--base-url", server.base_url, "--approve-all", "Go", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert clean(done.stdout), repr(done.stdout)
    assert "\\x1b]52;c;cm0gLXJmIH4=\\x07" in done.stdout
    assert "assistant> done\\x1b[1A\\x1b[2K \\u202eevil" in done.stdout


def test_r25_the_prompt_shows_the_real_command_and_says_it_escaped(server, tmp_path):
    server.queue(calls_reply(("call_1", "run_command", {"command": FAKE_LS})))
    chat = pty_chat("--base-url", server.base_url, "--session", "s.json", "List", cwd=tmp_path)
    block = chat.expect("[q]uit: ")
    assert "\x1b" not in block and "\r" not in block.replace("\r\n", "\n")
    assert f"$ {FAKE_LS_SHOWN}\n" in block
    assert f'"command": "{json.dumps(FAKE_LS)[1:-1]}"' in block  # JSON's own escapes
    assert "note:        some text above held control or invisible characters" in block
    chat.send("q")
    assert chat.wait() == 3
    assert not (tmp_path / "PWNED").exists()


def test_r25_a_hostile_call_id_is_quoted_in_the_resume_line(server, tmp_path):
    """The id the endpoint chose holds ``;``: the printed command, run by a real ``sh``,
    answers that call and runs nothing else."""
    server.queue(calls_reply((HOSTILE_ID, "run_command", {"command": "echo hi"})))
    done = run_chat("--base-url", server.base_url, "--session", "s.json", "Go", cwd=tmp_path)
    assert done.returncode == 3
    printed = done.stdout.split("Resume with: ", 1)[1].splitlines()[0]
    assert pasted(printed, tmp_path) == ["chat", "--session", "s.json",
                                         "--respond", f"{HOSTILE_ID}=yes"]


def test_r25_an_id_that_cannot_be_shown_is_answered_by_position(server, tmp_path):
    ids = ("call\x1b[2K_1", "2")  # one that needs escaping; one that reads as a number
    server.queue(calls_reply((ids[0], "run_command", {"command": "echo one"}),
                             (ids[1], "run_command", {"command": "echo two"})))
    server.queue(chat_stream("Both ran."))
    done = run_chat("--sandbox", "off",
                    "--base-url", server.base_url, "--session", "s.json", "Go", cwd=tmp_path)
    assert done.returncode == 3 and clean(done.stdout)
    assert f"  1) call\\x1b[2K_1  run_command  $ echo one ⏎ {SANDBOXED}\n" in done.stdout
    assert f"  2) 2              run_command  $ echo two ⏎ {SANDBOXED}\n" in done.stdout
    printed = done.stdout.split("Resume with: ", 1)[1].splitlines()[0]
    argv = pasted(printed, tmp_path)
    assert argv[-4:] == ["--respond", "1=yes", "--respond", "2=yes"]
    resumed = run_agentflow(argv[0], "--sandbox", "off", *argv[1:], cwd=tmp_path,
                            env=child_env(OPENAI_BASE_URL=server.base_url))
    assert (resumed.returncode, resumed.stderr) == (0, ""), resumed.stderr
    outcomes = {r["call_id"]: r["outcome"] for r in saved(tmp_path / "s.json")["approvals"]["audit"]}
    assert outcomes == {ids[0]: "approved", ids[1]: "approved"}


def test_r25_positions_never_name_an_id_that_is_a_number(server, tmp_path):
    """Ids "2" and "1" in that order: ``1=no`` is the first call (id "2"), as listed."""
    server.queue(calls_reply(("2", "run_command", {"command": "echo first"}),
                             ("1", "run_command", {"command": "echo second"})))
    server.queue(chat_stream("ok"))
    run_chat("--base-url", server.base_url, "--session", "s.json", "Go", cwd=tmp_path)
    done = run_chat("--session", "s.json", "--respond", "1=no", "--respond", "2=yes",
                    cwd=tmp_path, env=child_env(OPENAI_BASE_URL=server.base_url))
    assert done.returncode == 0, done.stderr
    outcomes = {r["call_id"]: r["outcome"] for r in saved(tmp_path / "s.json")["approvals"]["audit"]}
    assert outcomes == {"2": "rejected", "1": "approved"}


def test_r25_pending_suggests_a_quoted_command_without_the_password(server, tmp_path):
    url = f"sqlite:///{tmp_path}/sessions.db"
    server.queue(calls_reply((HOSTILE_ID, "run_command", {"command": "echo hi"})))
    run_chat("--base-url", server.base_url, "--store", url, "--session", "t 1", "Go",
             cwd=tmp_path)
    done = run_agentflow("pending", "--store", url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    printed = done.stdout.split("answer with: ", 1)[1].split(" (or =no:REASON)")[0]
    assert pasted(printed, tmp_path) == ["chat", "--store", url, "--session", "t 1",
                                         "--respond", f"{HOSTILE_ID}=yes"]


def test_r25_a_store_password_is_left_out_and_said(tmp_path):
    from agentflow.cli.paste import without_password
    assert without_password("postgresql://ann:s3cr%40t@db:5432/app") == (
        "postgresql://ann@db:5432/app", True)
    assert without_password("sqlite:///x.db") == ("sqlite:///x.db", False)


def pasted(line: str, folder) -> list[str]:
    """Run a printed ``agentflow …`` line in a real ``sh``, with ``agentflow`` a stub
    that records its arguments; return them. Nothing else may run (no PWNED file)."""
    stub = folder / "bin" / "agentflow"
    stub.parent.mkdir(exist_ok=True)
    stub.write_text(f"#!{sys.executable}\nimport json, sys\n"
                    f"open({str(folder / 'argv.json')!r}, 'w').write(json.dumps(sys.argv[1:]))\n")
    stub.chmod(0o755)
    env = {"PATH": f"{stub.parent}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run(["sh", "-c", line], cwd=folder, env=env, check=True, timeout=60)
    assert not (folder / "PWNED").exists()
    return json.loads((folder / "argv.json").read_text())


# -- previews read a bounded prefix of regular files only -----------------------------------

@pytest.mark.parametrize("target", ["/dev/zero", "fifo"])
def test_r25_a_write_to_a_device_or_fifo_is_listed_and_rejected(server, tmp_path, target):
    """The issue's ``write_file(path="/dev/zero")`` died with MemoryError in the pause
    listing and even at ``--respond call_1=no``; a FIFO would block the preview forever.
    Neither is read: the listing says so, and the rejection goes through."""
    if target == "fifo":
        os.mkfifo(tmp_path / "fifo")
    server.queue(calls_reply(("call_1", "write_file", {"path": target, "content": "x\n"})))
    server.queue(chat_stream("Left alone."))
    done = run_chat("--sandbox", "off",
                    "--base-url", server.base_url, "--session", "s.json", "Go", cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    path = target if target.startswith("/") else str(tmp_path / target)
    assert (f"  call_1  write_file  (no preview: {path} is not a regular file, so it is "
            "not read)\n") in done.stdout
    rejected = run_chat("--sandbox", "off",
                        "--session", "s.json", "--respond", "call_1=no", cwd=tmp_path,
                        env=child_env(OPENAI_BASE_URL=server.base_url))
    assert (rejected.returncode, rejected.stderr) == (0, "")
    assert rejected.stdout.endswith("assistant> Left alone.\n")


def test_r25_a_preview_of_a_large_file_reads_a_prefix_and_says_it_replaces_it(tmp_path):
    from agentflow.builtin.builtin_tools import PREVIEW_CAP, builtin_tools
    big = tmp_path / "big.txt"
    big.write_text("line\n" * (PREVIEW_CAP // 5 + 10))
    [write] = builtin_tools(["write_file"], workspace=str(tmp_path))
    diff = write.preview({"path": "big.txt", "content": "new\n"})
    size = big.stat().st_size
    assert diff.splitlines()[:4] == [
        f"--- big.txt ({size} bytes now, too large to compare: all replaced)",
        "+++ big.txt", "@@ -0,0 +1 @@", "+new"]
    assert write.preview_summary({"path": "big.txt", "content": "new\n"}) == \
        "big.txt (too large to compare): +1 lines, all replaced"
