"""A throwaway PostgreSQL cluster on a loopback port, for the store tests.

    python tests/postgres_cluster.py start DIR   # prints the DSN
    python tests/postgres_cluster.py stop DIR

``.ci/run`` starts one before ``make test`` and exports its DSN as
``AGENTFLOW_TEST_POSTGRES_DSN``; without that variable the tests start their own
(``tests/conftest.py``). PostgreSQL refuses to run as root, so as root the cluster
belongs to the ``postgres`` user that Debian's package creates. Durability is off
(``fsync=off``) unless asked for: the cluster dies with the test run.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys

USER = "agentflow"


def find_bin() -> str | None:
    """The folder holding initdb and pg_ctl, or ``None``."""
    found = shutil.which("initdb")
    if found:
        return os.path.dirname(os.path.realpath(found))
    folders = sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                     key=lambda p: int(p.split("/")[-2]) if p.split("/")[-2].isdigit() else 0)
    return folders[-1] if folders and os.path.exists(folders[-1] + "/initdb") else None


def _as_owner(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


def start(folder: str, durable: bool = False) -> str:
    """Create and start a cluster in ``folder``; returns its DSN. ``durable``: fsync
    on, as a real server (for ``make bench``); tests run faster without it.

    Raises:
        RuntimeError: no PostgreSQL binaries, or the cluster would not start (the
            message holds the server's log).
    """
    pgbin = find_bin()
    if pgbin is None:
        raise RuntimeError("no PostgreSQL here (initdb not on PATH nor under "
                           "/usr/lib/postgresql/*/bin)")
    data = os.path.join(folder, "data")
    os.makedirs(folder, exist_ok=True)
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    subprocess.run(_as_owner([f"{pgbin}/initdb", "-D", data, "-A", "trust", "-U", USER,
                              "--no-sync", "-E", "UTF8"]),
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=folder)
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1"
    if not durable:
        options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    log = os.path.join(folder, "server.log")
    started = subprocess.run(_as_owner([f"{pgbin}/pg_ctl", "-D", data, "-o", options, "-l", log,
                                        "-w", "-t", "30", "start"]),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=folder)
    if started.returncode != 0:
        text = open(log).read() if os.path.exists(log) else started.stderr.decode()
        raise RuntimeError(f"PostgreSQL did not start:\n{text}")
    return f"postgresql://{USER}@127.0.0.1:{port}/postgres"


def stop(folder: str) -> None:
    """Stop the cluster in ``folder`` (at once: its data is thrown away)."""
    pgbin = find_bin()
    data = os.path.join(folder, "data")
    if pgbin and os.path.exists(os.path.join(data, "postmaster.pid")):
        subprocess.run(_as_owner([f"{pgbin}/pg_ctl", "-D", data, "-m", "immediate", "-w",
                                  "stop"]), stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, cwd=folder)


def restart(folder: str) -> None:
    """Restart the cluster in ``folder`` as an operator does (``pg_ctl restart -m fast``:
    every connection is cut, committed data is kept); same port and options.

    Raises:
        RuntimeError: it would not start again.
    """
    pgbin = find_bin()
    data = os.path.join(folder, "data")
    done = subprocess.run(_as_owner([f"{pgbin}/pg_ctl", "-D", data, "-m", "fast", "-w", "-t",
                                     "30", "-l", os.path.join(folder, "server.log"),
                                     "restart"]),
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=folder)
    if done.returncode != 0:
        raise RuntimeError(f"PostgreSQL did not restart: {done.stderr.decode()}")


if __name__ == "__main__":
    action, where = sys.argv[1:3]
    if action == "start":
        print(start(where))
    else:
        stop(where)
