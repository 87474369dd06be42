"""SPEC R27 in the sandbox (issue 37): a command cannot change what decides the next
run, see the home folder beyond an allowlist, get the environment's secrets, keep
root's capabilities, or send the model a secret a few characters at a time or from
git history. Through the real ``bwrap`` and the real ``agentflow chat`` (the place of
tests/test_sandbox.py: a fake home, a workspace that is a git repository)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from agentflow import AgentSession
from agentflow.builtin.builtin_tools import builtin_tools
from agentflow.builtin.environment import command_environment
from agentflow.builtin.sandbox import Sandbox
from agentflow.redact import RUN
from agentflow.stores import open_store
from helpers_cli import KEY, child_env, need_bwrap
from test_cli_chat import server  # noqa: F401  (a fixture)
from test_sandbox import approved, pause, place, read, user_policy, write  # noqa: F401

GH_TOKEN = "gho_fake-github-cli-token-1234"


# -- 1, 2. the store, its siblings, a --policy file: read-only wherever they lie ---------------

@pytest.mark.slow  # several commands in several sandboxes
def test_the_store_its_siblings_a_policy_file_and_their_folders_are_read_only(server, place):
    need_bwrap()
    ws = place["ws"]
    os.makedirs(ws + "/state")
    os.makedirs(ws + "/conf/rules")
    policy = ws + "/conf/rules/my-policy.json"
    write(policy, json.dumps({"allow": []}))
    key = ws + "/keys/store.key"
    os.makedirs(ws + "/keys")
    with open(key, "wb") as handle:
        handle.write(os.urandom(32))
    url = f"sqlite:///{ws}/state/sessions.db"
    _, results = approved(
        server, place,
        f"{sys.executable} -c \"import sqlite3; db = sqlite3.connect('state/sessions.db'); "
        "db.execute('CREATE TABLE forged (a)'); db.commit()\"",
        "echo x > state/sessions.db-wal; echo x > state/sessions.db-journal",
        "mv state moved; mv conf/rules conf/r2; mv conf c2",
        "echo '{\"allow\": [\"write_file\"]}' > conf/rules/my-policy.json",
        "cat keys/store.key | wc -c",
        flags=("--store", url, "--session", "s-1", "--policy", policy, "--store-key", key))
    assert "attempt to write a readonly database" in results[0]
    assert results[1].count("Read-only file system") == 2
    assert results[2].count("Device or resource busy") == 3
    assert "Read-only file system" in results[3]
    assert results[4].endswith("Permission denied\n0\n")  # the key is hidden
    assert json.loads(read(policy)) == {"allow": []}
    for name in os.listdir(ws + "/state"):  # only the store's own files
        path = f"{ws}/state/{name}"
        assert name.startswith("sessions.db") and (
            os.path.isdir(path) or open(path, "rb").read() != b"x\n"), name
    assert not os.path.exists(ws + "/moved") and not os.path.exists(ws + "/c2")


def test_a_store_in_the_workspaces_top_folder_makes_every_command_ask(server, place):
    """Its -wal and -journal files would be made right in the writable workspace, which
    the sandbox cannot make read-only: even auto_allow asks (SPEC R27)."""
    need_bwrap()
    env = user_policy(place, {"sandbox": {"auto_allow": True}})
    url = f"sqlite:///{place['ws']}/sessions.db"
    done = pause(server, place, {"command": "echo ran > ran.txt"}, env, runs=False,
                 flags=("--store", url, "--session", "s-1"))
    assert done.returncode == 3, done.stdout + done.stderr
    key = os.path.join(env["XDG_CONFIG_HOME"], "agentflow", "store.key")
    with open_store(url, open(key, "rb").read()) as store:
        [waiting] = store.load("s-1").approvals.pending
    assert waiting.why.startswith(f"the sandbox cannot keep {place['ws']} read-only (it lies "
                                  "in the workspace's top folder")
    assert not os.path.exists(place["ws"] + "/ran.txt")
    url = f"sqlite:///{place['ws']}/state/sessions.db"  # a folder of its own: it runs
    os.makedirs(place["ws"] + "/state")
    done = pause(server, place, {"command": "echo ran > ran.txt"}, env,
                 flags=("--store", url, "--session", "s-2"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert read(place["ws"] + "/ran.txt") == "ran\n"


# -- 3. root's capabilities ---------------------------------------------------------------------

ESCAPES = ("grep CapEff /proc/self/status; mount -o remount,bind,rw / && echo REMOUNTED; "
           "umount {home}/.ssh 2>/dev/null || umount /run && echo UNMOUNTED; "
           "unshare -Urm sh -c 'mount -o remount,rw / && echo NESTED' || echo no-unshare; "
           "echo x > {out}/written && echo WROTE")


def escapes(root: str, user: list[str], flags=None) -> str:
    """What the escapes print when ``user`` (a ``setpriv`` prefix, or ``[]``) runs them
    in the sandbox of a workspace in ``root`` (with ``bwrap`` ``flags`` instead of the
    sandbox's own, for the control)."""
    ws, home, out = (os.path.join(root, name) for name in ("ws", "home", "out"))
    script = ESCAPES.format(home=home, out=out)
    argv = Sandbox().argv(script, ws, (), home=home)
    if flags is not None:
        argv = [argv[0], *flags, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                "--tmpfs", "/run", "--", "/bin/sh", "-c", script]
    done = subprocess.run([*user, *argv], capture_output=True, text=True, cwd=ws, timeout=60)
    return done.stdout


@pytest.fixture
def world(monkeypatch):
    """A workspace, a home with ``.ssh`` and an outside folder, all writable by anyone
    (an unprivileged user runs there too), outside ``/tmp``."""
    root = tempfile.mkdtemp(prefix="agentflow-caps-", dir="/var/tmp")
    for name in ("ws", "home/.ssh", "out", "config/agentflow"):
        os.makedirs(os.path.join(root, name))
    monkeypatch.setenv("XDG_CONFIG_HOME", os.path.join(root, "config"))  # hidden, reachable
    for top, folders, _ in os.walk(root):
        for name in [""] + folders:
            os.chmod(os.path.join(top, name), 0o777)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_no_capability_no_remount_no_umount_no_unshare_as_root_and_as_a_user(world):
    need_bwrap()
    users = [[]]  # this process's user
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("setpriv (util-linux) is not installed: cannot run as a user too")
        users.append(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"])
    for user in users:
        said = escapes(world, user)
        assert "CapEff:\t0000000000000000" in said, (user, said)
        for escaped in ("REMOUNTED", "UNMOUNTED", "NESTED", "WROTE"):
            assert escaped not in said, (user, said)
        assert os.listdir(os.path.join(world, "out")) == []


def test_the_control_bwrap_as_root_keeps_its_capabilities_without_the_flags(world):
    """bwrap's own default as root (issue 37, item 3): every capability, and the
    remount works, so the test above would see the escape."""
    need_bwrap()
    if os.geteuid() != 0:
        pytest.skip("the control needs root: only root keeps capabilities in bwrap")
    said = escapes(world, [], ["--unshare-all", "--die-with-parent"])
    assert "CapEff:\t0000000000000000" not in said and "REMOUNTED" in said


# -- 4. the home folder by allowlist --------------------------------------------------------

@pytest.mark.slow  # two chats, a few sandboxes
def test_the_home_folder_is_empty_but_for_path_and_what_the_person_adds(server, place):
    need_bwrap()
    home = place["home"]
    for path, text in ((".config/gh/hosts.yml", f"oauth_token: {GH_TOKEN}\n"),
                       (".local/share/keyrings/login.keyring", "keyring-secret-bytes\n"),
                       (".config/tool/settings.ini", "colour = blue\n"),
                       (".config/agentflow/policy.json",
                        json.dumps({"sandbox": {"home_read": ["~/.config"]}})),
                       (".local/bin/hello", "#!/bin/sh\necho hello from the home bin\n"),
                       ("notes.txt", "private notes\n")):
        os.makedirs(os.path.dirname(os.path.join(home, path)), exist_ok=True)
        write(os.path.join(home, path), text)
    os.chmod(home + "/.local/bin/hello", 0o755)
    commands = ("ls -A ~; cat ~/notes.txt ~/.config/gh/hosts.yml "
                "~/.local/share/keyrings/login.keyring", "hello",
                "cat ~/.config/tool/settings.ini; cat ~/.config/gh/hosts.yml; "
                "ls ~/.config/agentflow | wc -l")
    path = f"{home}/.local/bin:{os.environ['PATH']}"
    _, results = approved(server, place, *commands, env=child_env(HOME=home, PATH=path))
    assert results[0].splitlines()[1:3] == [".local", "cat: " + home + "/notes.txt: No such "
                                            "file or directory"]
    assert "hello from the home bin" in results[1]  # a folder on PATH is shown
    assert "colour" not in results[2]  # not added: not shown
    # the person adds ~/.config (in a policy whose folder is ~/.config/agentflow)
    _, results = approved(server, place, *commands, env=child_env(
        HOME=home, PATH=path, XDG_CONFIG_HOME=home + "/.config"))
    assert "colour = blue" in results[2]
    assert results[2].endswith("0\n")  # agentflow's own folder stays hidden
    sent = "\n".join(results)
    for secret in (GH_TOKEN, "keyring-secret", "private notes"):
        assert secret not in sent


# -- 5. the environment without secrets -------------------------------------------------------

SECRETS_ENV = {"GITHUB_TOKEN": "ghp_gIthUbt0ken", "AWS_ACCESS_KEY_ID": "AKIAFAKEKEYID42",
               "AWS_SECRET_ACCESS_KEY": "aws/Secret+Access",
               "DATABASE_URL": "postgresql://app:Db-PassW0rd@db.example/app",
               "PGPASSWORD": "pg-pAssw0rd-x", "SERVICE_CREDENTIALS": "cred3ntial-blob",
               "BASIC_AUTH": "user:basic-auth-v4lue",
               # a password in a query or a keyword DSN, under a name that says nothing
               "JDBC_URL": "jdbc:mysql://db/app?user=u&password=jdbc-hunter2-zq",
               "PG_DSN": "host=db user=app password=dsn-hunter3-zq",
               "ODBC": "Driver={x};Server=db;Uid=u;Pwd=odbc-hunter4-zq"}


def test_the_environment_leaves_out_every_secret_by_name_or_value():
    kept, removed = command_environment({**SECRETS_ENV, "HOME": "/home/u", "LANG": "C.UTF-8",
                                         "OPENAI_API_KEY": KEY, "MY_SETTING": "on"},
                                        always=("OPENAI_API_KEY",))
    assert sorted(kept) == ["HOME", "LANG", "MY_SETTING"]
    assert sorted(removed) == sorted([*SECRETS_ENV, "OPENAI_API_KEY"])
    kept, _ = command_environment({**SECRETS_ENV, "OPENAI_API_KEY": KEY, "MY_SETTING": "on"},
                                  include=["github_*", "*"], exclude=["MY_*"],
                                  always=("OPENAI_API_KEY",))
    assert "GITHUB_TOKEN" in kept and "MY_SETTING" not in kept and "OPENAI_API_KEY" not in kept


@pytest.mark.parametrize("mode", ["off", "workspace-write"])
def test_env_set_and_export_print_no_secret(tmp_path, monkeypatch, mode):
    if mode != "off":
        need_bwrap()
    for name, value in {**SECRETS_ENV, "MY_SETTING": "kept-setting"}.items():
        monkeypatch.setenv(name, value)
    run = builtin_tools(["run_command"], workspace=tmp_path, sandbox=mode)[0]
    said = run.invoke({"command": "env; set; export -p"})
    assert "kept-setting" in said
    for value in SECRETS_ENV.values():
        assert value not in said
    wider = Sandbox(mode, env_include=("GITHUB_TOKEN",), env_exclude=("MY_*",))
    said = builtin_tools(["run_command"], workspace=tmp_path, sandbox=wider)[0].invoke(
        {"command": "echo \"[$GITHUB_TOKEN] [$MY_SETTING]\""})
    assert said.endswith("[ghp_gIthUbt0ken] []\n")


# -- 6. live output masked across pieces ------------------------------------------------------

def test_a_key_printed_a_few_characters_at_a_time_is_masked_on_the_screen(tmp_path,
                                                                         monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    run = builtin_tools(["run_command"], workspace=tmp_path)[0]
    shown: list[bytes] = []
    run.on_output = shown.append
    pieces = " ".join(KEY[i:i + 5] for i in range(0, len(KEY), 5))
    result = run.invoke({"command": f"echo start; for p in {pieces}; do printf %s \"$p\"; "
                                    "sleep 0.01; done; echo; echo end"})
    screen = b"".join(shown).decode()
    assert screen == "start\n***\nend\n"
    assert result == "exit status 0\nstart\n***\nend\n"
    assert not any(KEY[i:i + RUN] in screen for i in range(len(KEY) - RUN + 1))


# -- 8. secrets from git history ---------------------------------------------------------------

def test_a_word_naming_a_secret_file_asks_even_with_auto_allow(tmp_path):
    need_bwrap()
    run = builtin_tools(["run_command"], workspace=tmp_path,
                        sandbox=Sandbox(auto_allow=True))[0]
    for command in ("git show HEAD~1:.env", "git show origin/main:config/.env.local",
                    "docker run --env-file=.env app", "cat .env"):
        assert "a secret file (.env files)" in run.needs_approval({"command": command})
    for command in ("git show HEAD~1:README", "echo a:b=c", "ls"):
        assert run.needs_approval({"command": command}) is False


@pytest.mark.slow  # a repository, two chats
def test_a_removed_env_file_from_history_asks_and_current_values_never_reach_the_model(
        server, place):
    need_bwrap()
    ws = place["ws"]
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    write(ws + "/.env", "OLD_TOKEN=old-history-value-1\n")
    subprocess.run([*git, "add", "-f", ".env"], cwd=ws, check=True)
    subprocess.run([*git, "commit", "-qm", "add .env"], cwd=ws, check=True)
    subprocess.run([*git, "rm", "-q", "--cached", ".env"], cwd=ws, check=True)
    subprocess.run([*git, "commit", "-qm", "remove .env"], cwd=ws, check=True)
    write(ws + "/.env", "DATABASE_PASSWORD=current-value-5678\nDEBUG=true\n")
    write(ws + "/backup.txt", "pw was current-value-5678, debug true\n")
    env = user_policy(place, {"sandbox": {"auto_allow": True}})
    session = os.path.join(place["root"], "s.json")
    done = pause(server, place, {"command": "git show HEAD~1:.env"}, env, runs=False,
                 flags=("--session", session))
    assert done.returncode == 3
    [waiting] = AgentSession.load(session).approvals.pending
    assert waiting.why == ("auto_allow does not cover it: it names HEAD~1:.env: a secret file "
                           "(.env files)")
    done = pause(server, place, {"command": "cat backup.txt"}, env)
    assert done.returncode == 0, done.stdout + done.stderr
    [result] = [m["content"] for m in server.requests[-1].json["messages"] if m["role"] == "tool"]
    assert result == "exit status 0\npw was ***, debug true\n"
