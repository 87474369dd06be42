"""The built-in tools of ``agentflow chat`` (``agentflow.builtin.builtin_tools``), called
directly: what each returns to the model, its caps, its approval requirement and
the preview the approval prompt shows."""

from __future__ import annotations

import time

import pytest

from agentflow.builtin.builtin_tools import BUILTIN_NAMES, builtin_tools

TIMEOUT = 60  # seconds; only against hangs


def one(name: str, **options):
    (made,) = builtin_tools([name], **options)
    assert made.name == name
    return made


# -- the set ------------------------------------------------------------------------------

def test_default_set_in_order_and_which_need_approval():
    tools = builtin_tools()
    assert [t.name for t in tools] == ["run_command", "read_file", "list_dir", "write_file"]
    assert list(BUILTIN_NAMES) == ["run_command", "read_file", "list_dir", "write_file"]
    # every built-in may ask; inside the workspace, reads and listings do not (issue 19)
    assert all(t.requires_approval() for t in tools)
    inside = {"command": "ls", "path": ".", "content": ""}
    assert {t.name: t.needs_approval(inside) for t in tools} == {
        "run_command": True, "read_file": False, "list_dir": False,
        "write_file": "write_file always asks"}


def test_a_subset_keeps_the_order_given():
    assert [t.name for t in builtin_tools(["list_dir", "read_file"])] == ["list_dir",
                                                                          "read_file"]
    assert builtin_tools([]) == []


def test_unknown_names_raise_value_error():
    with pytest.raises(ValueError) as caught:
        builtin_tools(["read_file", "rm_rf", "shell"])
    assert str(caught.value) == ("unknown tool(s) rm_rf, shell; the built-in tools are "
                                 "run_command, read_file, list_dir, write_file")


def test_schemas_offered_to_the_model():
    schemas = {t.name: (t.description, t.parameters) for t in builtin_tools()}
    assert schemas["run_command"] == (
        "Run a shell command on this machine and return its exit status and output.",
        {"type": "object",
         "properties": {"command": {"type": "string",
                                    "description": "the command line, run by the system shell."}},
         "required": ["command"], "additionalProperties": False})
    assert schemas["list_dir"][1] == {
        "type": "object",
        "properties": {"path": {"type": "string", "description": "the folder's path.",
                                "default": "."}},
        "additionalProperties": False}
    assert schemas["write_file"][1]["required"] == ["path", "content"]


# -- run_command --------------------------------------------------------------------------

def test_run_command_shows_the_exit_status_and_both_streams(tmp_path):
    run = one("run_command")
    assert run.invoke({"command": "echo out; echo err >&2; exit 3"}) == \
        "exit status 3\nout\nerr\n"
    assert run.invoke({"command": "true"}) == "exit status 0\n"


def test_run_command_output_cap_counts_bytes():
    run = one("run_command", output_cap=10)
    assert run.invoke({"command": "printf 0123456789ABCDEF"}) == (
        "exit status 0\n0123456789\n[... 6 more bytes cut: the output cap is 10 bytes]")
    # 'é' is two bytes in UTF-8: five of them are 10 bytes, all within the cap
    assert run.invoke({"command": "printf 'ééééé'"}) == "exit status 0\nééééé"
    small = one("run_command", output_cap=4)
    assert small.invoke({"command": "printf 'ééééé'"}) == (
        "exit status 0\néé\n[... 6 more bytes cut: the output cap is 4 bytes]")
    assert one("run_command", output_cap=10).invoke({"command": "printf 0123456789"}) == \
        "exit status 0\n0123456789"


def test_run_command_timeout_kills_the_command():
    assert one("run_command", command_timeout=0.1).invoke({"command": "sleep 5"}) == \
        "timed out after 0.1 s (killed)\n"
    # what the command printed before it was killed still reaches the model (0.3 s: the
    # shell, sandboxed or not, has started and printed by then)
    run = one("run_command", command_timeout=0.3)
    assert run.invoke({"command": "echo started; sleep 5"}) == \
        "timed out after 0.3 s (killed)\nstarted\n"


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def test_run_command_timeout_kills_the_processes_the_command_started(tmp_path):
    """A command that times out is reported ``(killed)``: what it started must not
    go on running. The inner shell records its pid, sleeps, then would leave a
    marker file; once that process is gone the marker must not exist."""
    run = one("run_command", command_timeout=0.3)
    script = f"echo $$ > {tmp_path}/inner.pid; sleep 2; touch {tmp_path}/finished"
    assert run.invoke({"command": f"sh -c '{script}'; echo after"}) == \
        "timed out after 0.3 s (killed)\n"
    pid_file = tmp_path / "inner.pid"
    if pid_file.exists():
        pid = int(pid_file.read_text())
        deadline = time.monotonic() + TIMEOUT
        while not _gone(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _gone(pid)
    assert not (tmp_path / "finished").exists()


def test_run_command_preview_is_the_command_line():
    run = one("run_command")
    assert run.preview({"command": "ls -la | head -3"}) == "$ ls -la | head -3\nnot sandboxed"
    assert run.preview({}) == "(no preview: 'command')"


# -- read_file ----------------------------------------------------------------------------

def test_read_file_returns_the_text(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("héllo\nworld\n", encoding="utf-8")
    assert one("read_file").invoke({"path": str(path)}) == "héllo\nworld\n"


def test_read_file_cap_counts_and_reports_the_bytes_cut(tmp_path):
    path = tmp_path / "big.txt"
    path.write_bytes(b"0123456789")
    read = one("read_file", read_cap=5)
    # 10 bytes, 5 shown: 5 were cut
    assert read.invoke({"path": str(path)}) == \
        "01234\n[... 5 more bytes cut: the read cap is 5 bytes]"


def test_read_file_at_the_cap_is_not_cut(tmp_path):
    path = tmp_path / "exact.txt"
    path.write_bytes(b"01234")
    assert one("read_file", read_cap=5).invoke({"path": str(path)}) == "01234"


def test_read_file_missing_file_raises(tmp_path):
    with pytest.raises(FileNotFoundError):
        one("read_file").invoke({"path": str(tmp_path / "missing.txt")})


# -- list_dir -----------------------------------------------------------------------------

def test_list_dir_sorted_with_folders_marked(tmp_path):
    for name in ("b.txt", "a.txt", ".hidden"):
        (tmp_path / name).write_text("", encoding="utf-8")
    (tmp_path / "c").mkdir()
    (tmp_path / "A").mkdir()
    assert one("list_dir").invoke({"path": str(tmp_path)}) == ".hidden\nA/\na.txt\nb.txt\nc/"


def test_list_dir_cap(tmp_path):
    for name in ("e", "d", "c", "b", "a"):
        (tmp_path / name).write_text("", encoding="utf-8")
    assert one("list_dir", list_cap=2).invoke({"path": str(tmp_path)}) == \
        "a\nb\n[... 3 more entries]"
    assert one("list_dir", list_cap=5).invoke({"path": str(tmp_path)}) == "a\nb\nc\nd\ne"


def test_list_dir_empty_and_default_path(tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert one("list_dir").invoke({"path": str(empty)}) == "(empty)"
    (tmp_path / "here.txt").write_text("", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert one("list_dir").invoke({}) == "empty/\nhere.txt"


# -- write_file ---------------------------------------------------------------------------

def test_write_file_writes_and_reports_bytes(tmp_path):
    path = tmp_path / "out.txt"
    write = one("write_file")
    assert write.invoke({"path": str(path), "content": "héllo\n"}) == \
        f"wrote 7 bytes to {path}"
    assert path.read_bytes() == "héllo\n".encode("utf-8")
    assert write.invoke({"path": str(path), "content": "x"}) == f"wrote 1 bytes to {path}"
    assert path.read_text(encoding="utf-8") == "x"


def test_write_file_preview_for_a_new_file(tmp_path):
    path = tmp_path / "new.txt"
    assert one("write_file").preview({"path": str(path), "content": "one\ntwo\n"}) == (
        "--- (new file)\n"
        f"+++ {path}\n"
        "@@ -0,0 +1,2 @@\n"
        "+one\n"
        "+two\n")
    assert not path.exists()  # a preview writes nothing


def test_write_file_preview_for_a_changed_file(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("one\ntwo\nthree\n", encoding="utf-8")
    assert one("write_file").preview({"path": str(path), "content": "one\n2\nthree\n"}) == (
        f"--- {path}\n"
        f"+++ {path}\n"
        "@@ -1,3 +1,3 @@\n"
        " one\n"
        "-two\n"
        "+2\n"
        " three\n")
    assert path.read_text(encoding="utf-8") == "one\ntwo\nthree\n"


def test_write_file_preview_without_a_change(tmp_path):
    path = tmp_path / "same.txt"
    path.write_text("same\n", encoding="utf-8")
    assert one("write_file").preview({"path": str(path), "content": "same\n"}) == \
        f"(no change to {path})"
    assert one("write_file").preview({"path": str(path)}) == "(no preview: 'content')"


def test_read_only_tools_have_no_preview():
    assert not hasattr(one("read_file"), "preview")
    assert not hasattr(one("list_dir"), "preview")


# -- the preview summary hook (one line, for lists of waiting calls) ----------------------

def test_write_file_preview_summary_counts_the_diff(tmp_path):
    path = tmp_path / "notes.txt"
    write = one("write_file")
    assert write.preview_summary({"path": str(path), "content": "a\nb\n"}) == \
        f"{path} (new file): +2 -0 lines"
    path.write_text("one\n--two\nthree\n", encoding="utf-8")
    # a removed line that itself starts with "--" is a removal, not a header
    assert write.preview_summary({"path": str(path), "content": "one\n2\n3\nthree\n"}) == \
        f"{path}: +2 -1 lines"
    assert write.preview_summary({"path": str(path), "content": "one\n--two\nthree\n"}) == \
        f"(no change to {path})"
    assert write.preview_summary({"path": str(path)}) == "(no preview: 'content')"
    assert path.read_text(encoding="utf-8") == "one\n--two\nthree\n"  # nothing written


def test_run_command_preview_summary_is_one_line(tmp_path):
    run = one("run_command", workspace=tmp_path)
    assert run.preview_summary({"command": "ls"}) == "$ ls ⏎ not sandboxed"
    assert run.preview_summary({"command": "cat ../x"}) == \
        "$ cat ../x ⏎ warning: it " + run.space.command_warnings("cat ../x")[0] + \
        " ⏎ not sandboxed"
    assert run.preview_summary({}) == "(no preview: 'command')"


def test_each_tool_is_a_class_usable_alone(tmp_path):
    from agentflow.builtin.builtin_tools import ListDir, ReadFile, RunCommand, WriteFile
    from agentflow.commandline.workspace import Workspace

    space = Workspace(tmp_path)
    assert WriteFile(space).write_file("a.txt", "hi") == "wrote 2 bytes to a.txt"
    assert ReadFile(space, read_cap=1).read_file("a.txt") == \
        "h\n[... 1 more bytes cut: the read cap is 1 bytes]"
    assert ListDir(space).list_dir() == "a.txt"
    assert RunCommand(space).run_command("cat a.txt") == "exit status 0\nhi"
    # what help() shows is what the model is told
    assert RunCommand.run_command.__doc__.startswith("Run a shell command on this machine")
