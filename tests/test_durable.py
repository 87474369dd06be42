"""The atomic write and the OS lock every durable file shares (``agentflow.durable``,
SPEC R16, R22 addendum): real files, real locks, a real killed writer."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from agentflow.durable import FileLock, sweep_temporaries, write_atomically
from agentflow.policy import ApprovalPolicy


def test_lock_is_exclusive_and_its_file_exists_only_while_held(tmp_path):
    path = str(tmp_path / "s.lock")
    first, second = FileLock(path), FileLock(path)
    assert first.acquire() is True
    assert os.path.exists(path)
    assert second.acquire() is False  # the other holder has it
    first.release()
    assert not os.path.exists(path)
    assert second.acquire() is True
    second.release()
    second.release()  # releasing twice is nothing


def test_lock_held_by_another_process_and_dropped_by_its_death(tmp_path):
    path = str(tmp_path / "s.lock")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from agentflow.durable import FileLock; "
         f"assert FileLock({path!r}).acquire(); print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        assert FileLock(path).acquire() is False
    finally:
        holder.kill()
        holder.wait()
    lock = FileLock(path)
    assert lock.acquire() is True  # SIGKILL released it
    lock.release()


def test_write_replaces_the_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "s.json"
    path.write_text("old", encoding="utf-8")
    write_atomically(str(path), "new é")
    assert path.read_text(encoding="utf-8") == "new é"
    assert os.listdir(tmp_path) == ["s.json"]


def test_sweep_removes_a_dead_writers_temporary_but_not_a_live_ones(tmp_path):
    dead = tmp_path / ".session-dead.tmp"
    dead.write_text("half", encoding="utf-8")
    young = tmp_path / ".session-young.tmp"
    young.write_text("just made", encoding="utf-8")
    live = tmp_path / ".session-live.tmp"
    live.write_text("being written", encoding="utf-8")
    other = tmp_path / "notes.tmp"
    other.write_text("not ours", encoding="utf-8")
    old = time.time() - 3600
    for path in (dead, live, other):
        os.utime(path, (old, old))
    writer = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, time; "
         f"fd = os.open({str(live)!r}, os.O_RDWR); fcntl.flock(fd, fcntl.LOCK_EX); "
         "print('writing', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline() == "writing\n"
        assert sweep_temporaries(str(tmp_path)) == 1
    finally:
        writer.kill()
        writer.wait()
    assert sorted(os.listdir(tmp_path)) == [".session-live.tmp", ".session-young.tmp",
                                            "notes.tmp"]


def test_policy_save_goes_through_the_shared_write(tmp_path, monkeypatch):
    written = []
    import agentflow.policy as policy_module
    real = policy_module.write_atomically
    monkeypatch.setattr(policy_module, "write_atomically",
                        lambda path, text, prefix: (written.append(path), real(path, text, prefix)))
    path = tmp_path / "sub" / "policy.json"
    ApprovalPolicy(allow=["read_file"]).save(path)
    assert written == [str(path)]
    assert ApprovalPolicy.load(path).allow == ApprovalPolicy(allow=["read_file"]).allow
    assert os.listdir(tmp_path / "sub") == ["policy.json"]
