"""A worker that SIGKILLs itself at one step boundary of a run (SPEC R23), for
tests/test_pause_kills.py.

    python tests/pause_worker.py STORE_URL SESSION BASE_URL LOG SCENARIO KILL_AT

It runs one turn (``pay`` in a new session SESSION of the store at STORE_URL) against
the replay server at BASE_URL. SCENARIO ``pause``: the model calls transfer (asks),
balance (never asks) and transfer again, so the run pauses; ``run``: the model calls
balance and note (neither asks, both run), then answers. The tools append a line to
LOG each time they really run.

Every write of the session is watched at three boundaries, counted from 1 across the
run: ``before`` a save, ``inside`` it (the file store: the new file written and
fsynced, not yet renamed; a database store: the row updated, not yet committed) and
``after`` it. At boundary KILL_AT the process sends itself SIGKILL, a real kill:
nothing of Python's runs after it. A run that ends before KILL_AT prints ``done N``
(N: the boundaries it passed).
"""

import os
import signal
import sys

from agentflow import ApprovalRequiredTool, ChatClientAgent, OpenAIChatClient, tool
from agentflow.stores import open_store


def tools(log) -> list:
    """The worker's tools, each appending a line to the file ``log`` when it runs."""
    @tool
    def transfer(amount: int) -> str:
        """Send money."""
        with open(log, "a") as handle:
            handle.write(f"transfer {amount}\n")
        return f"sent {amount}"

    @tool
    def balance() -> str:
        """Read the balance."""
        with open(log, "a") as handle:
            handle.write("balance\n")
        return "1000"

    @tool
    def note(text: str) -> str:
        """Write a note."""
        with open(log, "a") as handle:
            handle.write(f"note {text}\n")
        return "noted"

    return [ApprovalRequiredTool(transfer), balance, note]


def main() -> None:
    where, session_id, base_url, log, scenario, kill_at = sys.argv[1:7]
    kill_at, passed = int(kill_at), [0]

    def boundary(name: str) -> None:
        passed[0] += 1
        if passed[0] == kill_at:
            print(f"killed {name}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

    store = open_store(where)
    real_write = type(store)._write  # every write: a save, a checkpoint

    def write(this, sid, session, before, changed):
        boundary("before")
        done = real_write(this, sid, session, before, changed)
        boundary("after")
        return done

    type(store)._write = write
    if hasattr(store, "_execute"):  # a database store: inside the transaction
        execute = store._execute

        def watched(sql, *args):
            result = execute(sql, *args)
            if sql.lstrip().startswith(("INSERT", "UPDATE")) and "agentflow_sessions" in sql:
                boundary("inside")
            return result

        store._execute = watched
    else:  # the file store: the new file is written, not yet renamed into place
        replace = os.replace

        def watched_replace(source, target, *args, **kwargs):
            if str(target).endswith(".json"):
                boundary("inside")
            return replace(source, target, *args, **kwargs)

        os.replace = watched_replace
    agent = ChatClientAgent(OpenAIChatClient(base_url=base_url, api_key="k", max_retries=0),
                            tools=tools(log))
    with store.open(session_id) as session:
        list(agent.run("pay" if scenario == "pause" else "check", session))
    print(f"done {passed[0]}", flush=True)


if __name__ == "__main__":
    main()
